package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/provider/sim"
)

func continueRequest(partial string) *afloat.Request {
	req := userRequest("Не работает оплата")
	req.Messages = append(req.Messages, afloat.Message{Role: afloat.RoleAssistant, Content: partial})
	req.Continue = true
	return req
}

func TestContinue(t *testing.T) {
	p := newSim(t, sim.Config{})
	if got := p.Continuation(); got != "prefill" {
		t.Errorf("Continuation() = %q, want prefill", got)
	}
	tests := []struct {
		name, partial string
		json          bool
	}{
		{name: "json cut in a string", partial: `{"department":"bill`, json: true},
		{name: "json cut after a key", partial: `{"department":"billing","urgent"`, json: true},
		{name: "json cut in an array", partial: ` [{"a":1},`, json: true},
		{name: "text cut mid-sentence", partial: "Похоже, обращение касается оплаты"},
		{name: "text cut after a sentence", partial: "Похоже, обращение касается оплаты. "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := continueRequest(tt.partial)
			req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(triageSchema)}
			resp, err := newSim(t, sim.Config{}).Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			joined := tt.partial + resp.Content
			switch {
			case resp.Content == "" || resp.FinishReason != "stop" || resp.Usage.InputTokens == 0:
				t.Errorf("continuation %+v, want text that finishes", resp)
			case tt.json && !json.Valid([]byte(joined)):
				t.Errorf("joined answer %q is not JSON", joined)
			case !tt.json && (!strings.HasSuffix(joined, ".") || strings.Contains(joined, "  ") || strings.Contains(joined, "..")):
				t.Errorf("joined answer %q does not end plausibly", joined)
			}
			// Streamed, the same continuation arrives in chunks.
			s, err := newSim(t, sim.Config{}).Stream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for {
				c, err := s.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				text.WriteString(c.Delta)
			}
			if text.String() != resp.Content {
				t.Errorf("streamed %q, completed %q", text.String(), resp.Content)
			}
		})
	}
}

func TestContinueNeedsAnAssistantText(t *testing.T) {
	p := newSim(t, sim.Config{})
	for _, req := range []*afloat.Request{
		{Continue: true, Messages: userRequest("x").Messages},
		{Continue: true, Messages: []afloat.Message{{Role: afloat.RoleAssistant, ToolCalls: []afloat.ToolCall{{ID: "c", Name: "f"}}}}},
		{Continue: true},
	} {
		_, err := p.Complete(context.Background(), req)
		if pe := providerError(t, err); pe.Kind != afloat.Contract || pe.Status != 400 || !strings.Contains(err.Error(), "continue:") {
			t.Errorf("err = %v, want a contract error of the request", err)
		}
	}
}

func TestStreamNamesTheModel(t *testing.T) {
	req := userRequest("hello")
	req.Model = "sim-large"
	s, err := newSim(t, sim.Config{}).Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := s.Recv()
		if err == io.EOF {
			break
		}
		if c.Model != "sim-large" {
			t.Fatalf("chunk %+v names model %q", c, c.Model)
		}
	}
}

func TestProbe(t *testing.T) {
	tests := []struct {
		name   string
		cfg    sim.Config
		fault  sim.Fault
		status int // 0 means the probe passes
		kind   afloat.Kind
	}{
		{name: "healthy, whatever its latency", cfg: sim.Config{P50: time.Hour, P95: 2 * time.Hour}},
		{name: "slow answers, quick list", fault: sim.Fault{Mode: sim.ModeSlow, Delay: time.Hour}},
		{name: "malformed answers, working list", fault: sim.Fault{Mode: sim.ModeMalformed}},
		{name: "unavailable", fault: sim.Fault{Mode: sim.ModeUnavailable}, status: 503, kind: afloat.Unavailable},
		{name: "unusable", fault: sim.Fault{Mode: sim.ModeUnavailable, Status: 401}, status: 401, kind: afloat.Unusable},
		{name: "always failing", cfg: sim.Config{ErrorRate: 1, ErrorStatus: 429}, status: 429, kind: afloat.Throttled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Clock = clockwork.NewFakeClock() // nothing may wait on it
			p := newSim(t, tt.cfg)
			p.SetFault(tt.fault)
			err := p.Probe(context.Background())
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("Probe = %v, want nil", err)
				}
			} else if pe := providerError(t, err); pe.Status != tt.status || pe.Kind != tt.kind || !errors.Is(err, sim.ErrSimulated) {
				t.Fatalf("Probe = %v, want a simulated %s failure of status %d", err, tt.kind, tt.status)
			}
			if p.Probes() != 1 || p.Calls() != 0 {
				t.Errorf("probes, calls = %d, %d; want 1, 0", p.Probes(), p.Calls())
			}
		})
	}
}

func TestProbeHangsUnderTimeout(t *testing.T) {
	clock := clockwork.NewFakeClock()
	p := newSim(t, sim.Config{Clock: clock})
	p.SetFault(sim.Fault{Mode: sim.ModeTimeout})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- p.Probe(ctx) }()
	if err := clock.BlockUntilContext(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if pe := providerError(t, err); pe.Kind != afloat.Unavailable || !pe.Timeout {
			t.Fatalf("Probe = %v, want an unavailable timeout", err)
		}
	case <-testCtx(t).Done():
		t.Fatal("Probe did not return")
	}
}

// TestProbesKeepTheSequence: probes draw from their own source, so the calls' answers and
// failures do not depend on how often the provider was probed between them.
func TestProbesKeepTheSequence(t *testing.T) {
	cfg := sim.Config{Seed: 42, ErrorRate: 0.2}
	a := transcript(t, newSim(t, cfg), 30)
	probed := newSim(t, cfg)
	var b []string
	for range 30 {
		probed.Probe(context.Background())
		b = append(b, transcript(t, probed, 1)...)
	}
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatal("probes changed the calls' answers")
	}
}
