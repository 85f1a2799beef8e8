package afloattest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/afloattest"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
)

var _ afloattest.Breakers = (*cascade.Engine)(nil)

// Envelopes the assertions are tried on.
var (
	fromPrimary = afloat.Result[json.RawMessage]{Task: "triage", Value: json.RawMessage(`{"department":"billing"}`),
		Source: afloat.SourceModel, Provider: "primary", Tier: 0}
	fromBackup = afloat.Result[json.RawMessage]{Task: "triage", Value: json.RawMessage(`{"department":"billing"}`),
		Source: afloat.SourceModel, Degraded: true, Reason: "circuit_open", Provider: "backup", Tier: 1,
		Attempts: []afloat.Attempt{{Provider: "primary", Outcome: afloat.OutcomeCircuitOpen}, {Provider: "backup", Tier: 1, Outcome: afloat.OutcomeOK}}}
	fromRules = afloat.Result[json.RawMessage]{Task: "triage", Value: json.RawMessage(`{"department":"technical"}`),
		Source: afloat.SourceHeuristic, Degraded: true, Reason: "timeout", Tier: -1,
		Attempts: []afloat.Attempt{{Provider: "primary", Outcome: afloat.OutcomeTimeout, Latency: 1300 * time.Millisecond}}}
	// degradedWithoutReason is a broken envelope: degraded, but not saying why.
	degradedWithoutReason = afloat.Result[json.RawMessage]{Task: "triage", Source: afloat.SourceHeuristic, Degraded: true, Tier: -1,
		Value: json.RawMessage(`{}`)}
)

func TestRequireDegraded(t *testing.T) {
	tests := []struct {
		name   string
		res    afloat.Result[json.RawMessage]
		source afloat.Source
		want   []string // parts of the failure message; nil: passes
	}{
		{"heuristic", fromRules, afloat.SourceHeuristic, nil},
		{"lower tier", fromBackup, afloat.SourceModel, nil},
		{"not degraded", fromPrimary, afloat.SourceModel, []string{"degraded false", `"provider": "primary"`}},
		{"other source", fromBackup, afloat.SourceHeuristic, []string{"degraded heuristic", `source "model"`, `"provider": "backup"`}},
		{"no reason", degradedWithoutReason, afloat.SourceHeuristic, []string{`reason ""`, `"reason": null`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record(t, func(tb testing.TB) { afloattest.RequireDegraded(tb, tt.res, tt.source) })
			if tt.want == nil {
				wantPass(t, r)
				return
			}
			wantFatal(t, r, append(tt.want, `"task": "triage"`)...)
		})
	}
}

func TestRequireModel(t *testing.T) {
	tests := []struct {
		name     string
		res      afloat.Result[json.RawMessage]
		provider string
		want     []string
	}{
		{"primary", fromPrimary, "primary", nil},
		{"backup", fromBackup, "backup", nil},
		{"other provider", fromBackup, "primary", []string{`model "primary"`, `provider "backup"`, `"outcome": "circuit_open"`}},
		{"no model", fromRules, "primary", []string{`source "heuristic"`, `"source": "heuristic"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record(t, func(tb testing.TB) { afloattest.RequireModel(tb, tt.res, tt.provider) })
			if tt.want == nil {
				wantPass(t, r)
				return
			}
			wantFatal(t, r, tt.want...)
		})
	}
}

func TestRequireReason(t *testing.T) {
	tests := []struct {
		name    string
		res     afloat.Result[json.RawMessage]
		reasons []afloat.Reason
		want    []string
	}{
		{"none, none wanted", fromPrimary, nil, nil},
		{"the one wanted", fromBackup, []afloat.Reason{"circuit_open"}, nil},
		{"one of those wanted", fromRules, []afloat.Reason{"circuit_open", afloat.Reason(afloat.OutcomeTimeout)}, nil},
		{"none wanted", fromBackup, nil, []string{"want no reason", `got reason "circuit_open"`}},
		{"none given", fromPrimary, []afloat.Reason{afloat.ReasonKillSwitch}, []string{`["kill_switch"]`, `got reason ""`}},
		{"another", fromRules, []afloat.Reason{"circuit_open"}, []string{`got reason "timeout"`, `"latency_ms": 1300`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record(t, func(tb testing.TB) { afloattest.RequireReason(tb, tt.res, tt.reasons...) })
			if tt.want == nil {
				wantPass(t, r)
				return
			}
			wantFatal(t, r, tt.want...)
		})
	}
}

// breakers is a Breakers over breakers built by hand.
type breakers map[string]*breaker.Breaker

func (b breakers) Breaker(provider string) *breaker.Breaker { return b[provider] }

func TestRequireBreaker(t *testing.T) {
	ctx := context.Background()
	closed, err := breaker.New("backup", breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	open, err := breaker.New("primary", breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Force(ctx, breaker.StateOpen); err != nil {
		t.Fatal(err)
	}
	bs := breakers{"primary": open, "backup": closed}
	tests := []struct {
		name     string
		provider string
		state    breaker.State
		want     []string
	}{
		{"open", "primary", breaker.StateOpen, nil},
		{"closed", "backup", breaker.StateClosed, nil},
		{"closed, open wanted", "backup", breaker.StateOpen, []string{`breaker of "backup" is closed, want open`, "never changed state"}},
		{"open, closed wanted", "primary", breaker.StateClosed, []string{`breaker of "primary" is open, want closed`, "until"}},
		{"unknown provider", "primry", breaker.StateOpen, []string{`no breaker for provider "primry"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record(t, func(tb testing.TB) { afloattest.RequireBreaker(tb, bs, tt.provider, tt.state) })
			if tt.want == nil {
				wantPass(t, r)
				return
			}
			wantFatal(t, r, tt.want...)
		})
	}
}

func TestRequireFailFast(t *testing.T) {
	tests := []struct {
		took, bound time.Duration
		fails       bool
	}{
		{0, 100 * time.Millisecond, false},
		{99 * time.Millisecond, 100 * time.Millisecond, false},
		{100 * time.Millisecond, 100 * time.Millisecond, true},
		{1300 * time.Millisecond, 100 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.took.String(), func(t *testing.T) {
			r := record(t, func(tb testing.TB) { afloattest.RequireFailFast(tb, tt.took, tt.bound) })
			if !tt.fails {
				wantPass(t, r)
				return
			}
			wantFatal(t, r, "took "+tt.took.String(), "under 100ms")
		})
	}
}
