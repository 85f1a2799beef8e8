package fault

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// prober is a provider with a probe that always passes, and a continuation.
type prober struct {
	counting
	probes atomic.Int64
}

func (p *prober) Probe(context.Context) error { p.probes.Add(1); return nil }
func (p *prober) Continuation() string        { return "prefill" }

func TestProbeThroughTheFault(t *testing.T) {
	tests := []struct {
		name       string
		fault      Fault
		status     int // 0 means the probe passes
		kind       afloat.Kind
		wantProbes int64
	}{
		{"none", Fault{}, 0, 0, 1},
		{"malformed answers, working list", Fault{Mode: ModeMalformed}, 0, 0, 1},
		{"forced unavailable", Fault{Mode: ModeUnavailable}, 503, afloat.Unavailable, 0},
		{"forced unusable", Fault{Mode: ModeUnavailable, Status: 401}, 401, afloat.Unusable, 0},
		{"forced throttled", Fault{Mode: ModeUnavailable, Status: 429}, 429, afloat.Throttled, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &prober{}
			p := Wrap("gigachat-pro", inner, nil)
			if err := p.Set(tt.fault); err != nil {
				t.Fatal(err)
			}
			err := p.Probe(context.Background())
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("Probe = %v, want nil", err)
				}
			} else {
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) || pe.Status != tt.status || pe.Kind != tt.kind || pe.Provider != "gigachat-pro" || !errors.Is(err, ErrInjected) {
					t.Fatalf("Probe = %v, want an injected %s failure of status %d", err, tt.kind, tt.status)
				}
			}
			if got := inner.probes.Load(); got != tt.wantProbes {
				t.Errorf("inner probed %d times, want %d", got, tt.wantProbes)
			}
			if inner.calls.Load() != 0 {
				t.Error("a probe made a call")
			}
		})
	}
}

func TestProbeHangsAndWaitsAsCalls(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		p := Wrap("p", &prober{}, nil)
		_ = p.Set(Fault{Mode: ModeTimeout})
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the hang ends with its context, as a call's does
		if err := p.Probe(ctx); !afloat.IsTimeout(err) || afloat.KindOf(err) != afloat.Unavailable || !errors.Is(err, ErrInjected) {
			t.Fatalf("Probe = %v, want an injected unavailable timeout", err)
		}
	})
	t.Run("slow", func(t *testing.T) {
		clk := clockwork.NewFakeClock()
		inner := &prober{}
		p := Wrap("p", inner, clk)
		_ = p.Set(Fault{Mode: ModeSlow, Delay: time.Second})
		done := make(chan error, 1)
		go func() { done <- p.Probe(context.Background()) }()
		if err := clk.BlockUntilContext(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if inner.probes.Load() != 0 {
			t.Fatal("probed before the delay")
		}
		clk.Advance(time.Second)
		if err := <-done; err != nil || inner.probes.Load() != 1 {
			t.Fatalf("Probe = %v after %d probes, want nil after 1", err, inner.probes.Load())
		}
	})
}

func TestProbeWithoutAProber(t *testing.T) {
	p := Wrap("yandexgpt", &counting{}, nil)
	if p.CanProbe() {
		t.Error("CanProbe of a provider without a probe")
	}
	err := p.Probe(context.Background())
	if afloat.KindOf(err) != afloat.Contract || !errors.Is(err, ErrNoProbe) {
		t.Fatalf("Probe = %v, want a contract error wrapping ErrNoProbe", err)
	}
	if !Wrap("p", &prober{}, nil).CanProbe() {
		t.Error("CanProbe of a prober is false")
	}
}

func TestContinuationPassesThrough(t *testing.T) {
	if got := Wrap("p", &prober{}, nil).Continuation(); got != "prefill" {
		t.Errorf("Continuation() = %q, want the wrapped provider's prefill", got)
	}
	if got := Wrap("p", &counting{}, nil).Continuation(); got != "none" {
		t.Errorf("Continuation() = %q, want none", got)
	}
}
