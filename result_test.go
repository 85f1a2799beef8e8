package afloat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

type triage struct {
	Department *string `json:"department"`
	IsUrgent   float64 `json:"is_urgent"`
}

func TestEnvelopeJSON(t *testing.T) {
	dep := "technical"
	at := time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)
	tests := []struct {
		name string
		res  Result[triage]
		want string
	}{
		{"model", Result[triage]{Task: "triage", Value: triage{&dep, 0.8}, Source: SourceModel, Provider: "gigachat-pro", Tier: 0,
			PromptVersion: "triage/gigachat-pro/v3", Attempts: []Attempt{{Provider: "gigachat-pro", Outcome: OutcomeOK, Latency: 640 * time.Millisecond}},
			Latency: 642 * time.Millisecond, Usage: Usage{InputTokens: 410, OutputTokens: 38, Cost: 0.0007, Currency: "USD"}},
			`{"task":"triage","result":{"department":"technical","is_urgent":0.8},"source":"model","degraded":false,"reason":null,"provider":"gigachat-pro","tier":0,"prompt_version":"triage/gigachat-pro/v3","review_id":null,"attempts":[{"provider":"gigachat-pro","tier":0,"outcome":"ok","latency_ms":640,"reask":false}],"latency_ms":642,"usage":{"input_tokens":410,"output_tokens":38,"cost":0.0007,"currency":"USD"}}`},
		{"unavailable", Result[triage]{Task: "summary", Source: SourceUnavailable, Degraded: true, Reason: "circuit_open", Tier: -1},
			`{"task":"summary","result":null,"source":"unavailable","degraded":true,"reason":"circuit_open","provider":null,"tier":null,"prompt_version":null,"review_id":null,"attempts":[],"latency_ms":0,"usage":{"input_tokens":0,"output_tokens":0,"cost":0}}`},
		{"human", Result[triage]{Task: "moderation", Source: SourceHuman, Degraded: true, Reason: "timeout", Tier: -1, ReviewID: "rv_1", ReviewSLA: 30 * time.Minute, ExpectedBy: at},
			`{"task":"moderation","result":null,"source":"human","degraded":true,"reason":"timeout","provider":null,"tier":null,"prompt_version":null,"review_id":"rv_1","review_sla":"30m0s","expected_by":"2026-11-29T10:30:00Z","attempts":[],"latency_ms":0,"usage":{"input_tokens":0,"output_tokens":0,"cost":0}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.res)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("got  %s\nwant %s", b, tt.want)
			}
			var back Result[triage]
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			again, _ := json.Marshal(back)
			if string(again) != tt.want {
				t.Fatalf("round trip changed the envelope:\n%s\n%s", again, tt.want)
			}
		})
	}
}

func TestTransient(t *testing.T) {
	reset := &net.OpError{Op: "read", Err: syscall.ECONNRESET}
	tests := []struct {
		name string
		err  *ProviderError
		want bool
	}{
		{"502", &ProviderError{Status: 502, Kind: Unavailable}, true},
		{"503", &ProviderError{Status: 503, Kind: Unavailable}, true},
		{"500", &ProviderError{Status: 500, Kind: Unavailable}, true},
		{"504", &ProviderError{Status: 504, Kind: Unavailable}, true},
		{"408", &ProviderError{Status: 408, Kind: Unavailable}, true},
		{"501", &ProviderError{Status: 501, Kind: Unavailable}, false},
		{"dial reset", &ProviderError{Kind: Unavailable, Err: &net.OpError{Op: "dial", Err: syscall.ECONNRESET}}, false},
		{"refused content", &ProviderError{Status: 400, Kind: Refused, Code: "content_policy_violation"}, false},
		{"reset", &ProviderError{Kind: Unavailable, Err: reset}, true},
		{"refused", &ProviderError{Kind: Unavailable, Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, false},
		{"timeout", &ProviderError{Kind: Unavailable, Timeout: true, Err: context.DeadlineExceeded}, false},
		{"429 with wait", &ProviderError{Status: 429, Kind: Throttled, RetryAfter: time.Second}, true},
		{"429 without wait", &ProviderError{Status: 429, Kind: Throttled}, false},
		{"quota", &ProviderError{Status: 429, Kind: Unusable, Code: "insufficient_quota"}, false},
		{"400", &ProviderError{Status: 400, Kind: Contract}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Transient(); got != tt.want {
				t.Fatalf("Transient() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKindAndOutcome(t *testing.T) {
	tests := []struct {
		err     error
		kind    Kind
		outcome Outcome
	}{
		{&ProviderError{Status: 503, Kind: Unavailable}, Unavailable, OutcomeUnavailable},
		{fmt.Errorf("wrapped: %w", &ProviderError{Status: 429, Kind: Throttled}), Throttled, OutcomeRateLimited},
		{&ProviderError{Status: 402, Kind: Unusable}, Unusable, OutcomeUnusable},
		{&ProviderError{Status: 422, Kind: Contract}, Contract, OutcomeClientError},
		{&ContractError{Stage: "schema"}, Contract, OutcomeContractViolation},
		{&ProviderError{Kind: Unavailable, Timeout: true}, Unavailable, OutcomeTimeout},
		{context.DeadlineExceeded, Unavailable, OutcomeTimeout},
		{errors.New("something unclassified"), Unavailable, OutcomeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			if got := KindOf(tt.err); got != tt.kind {
				t.Fatalf("KindOf = %v, want %v", got, tt.kind)
			}
			if got := OutcomeError(tt.err); got != tt.outcome {
				t.Fatalf("OutcomeError = %v, want %v", got, tt.outcome)
			}
		})
	}
	if !Unavailable.CountsAsFailure() || !Throttled.CountsAsFailure() || Contract.CountsAsFailure() || Unusable.CountsAsFailure() {
		t.Fatal("only unavailable and throttled count toward a breaker")
	}
}

func TestCriticality(t *testing.T) {
	for _, s := range []string{"enrichment", "assistance", "critical"} {
		c, err := ParseCriticality(s)
		if err != nil || c.String() != s {
			t.Fatalf("%s: %v %v", s, c, err)
		}
	}
	if _, err := ParseCriticality("important"); err == nil {
		t.Fatal("unknown criticality accepted")
	}
}

func TestProviderErrorTextHasNoSecrets(t *testing.T) {
	err := &ProviderError{Provider: "gigachat-pro", Status: 401, Kind: Unusable, Code: "authentication_error"}
	if got := err.Error(); got != "gigachat-pro: unusable: status 401 (authentication_error)" {
		t.Fatalf("error text %q", got)
	}
}

// TestUsageJSONRoundsTheCost: a sum of per-token prices is written without its binary noise.
func TestUsageJSONRoundsTheCost(t *testing.T) {
	u := Usage{Cost: 0.1}.Add(Usage{Cost: 0.2, Currency: "USD"}) // 0.30000000000000004 in float64
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"input_tokens":0,"output_tokens":0,"cost":0.3,"currency":"USD"}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}
