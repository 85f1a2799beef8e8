package cascade

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
)

// TestRampUpSpillsToTheBackup: the primary's breaker closed by a good probe ramps up over
// 10s. Early in the ramp-up most calls skip the primary as an open circuit and are answered
// by the backup with reason circuit_open; late in it most are answered by the primary; after
// it, all are. The calls turned away never reach the primary.
func TestRampUpSpillsToTheBackup(t *testing.T) {
	const n = 100
	var draws atomic.Uint64 // n values evenly spread over [0, 1), in turn: exact shares
	spread := func() float64 { return (float64((draws.Add(1)-1)%n) + 0.5) / n }
	fx := newFixture(t, func(c *Config) {
		p0 := &c.Providers[0]
		p0.Retry.Max = -1
		p0.Breaker.RampUp = 10 * time.Second
		p0.Breaker.Rand = spread
	}, func(ctx context.Context, req *afloat.Request, i int) (*afloat.Response, error) {
		if i < breaker.DefaultConsecutiveFailures {
			return failWith(503, afloat.Unavailable)(ctx, req, i)
		}
		return answer(validAnswer)(ctx, req, i)
	}, answer(validAnswer))
	task := fx.task(t, nil)
	ctx := context.Background()
	br := fx.eng.Breaker("p0")
	for range breaker.DefaultConsecutiveFailures {
		if _, err := task.RunJSON(ctx, ticket); err != nil {
			t.Fatal(err)
		}
	}
	if st := br.State(ctx); st != breaker.StateOpen {
		t.Fatalf("primary's breaker %v after %d failures, want open", st, breaker.DefaultConsecutiveFailures)
	}
	fx.clock.Advance(br.Snapshot(ctx).Until.Sub(fx.clock.Now()))
	res, err := task.RunJSON(ctx, ticket)
	if err != nil || res.Provider != "p0" || res.Degraded {
		t.Fatalf("the probe's call: %+v, %v; want answered by the primary", res, err)
	}
	closed := fx.clock.Now()
	if snap := br.Snapshot(ctx); snap.State != breaker.StateClosed || snap.RampUntil != closed.Add(10*time.Second) {
		t.Fatalf("primary's breaker after its probe: %+v, want closed, ramping up for 10s", snap)
	}

	// run makes n calls at after since the close and counts those the primary answered.
	run := func(after time.Duration) (primary int) {
		t.Helper()
		fx.clock.Advance(closed.Add(after).Sub(fx.clock.Now()))
		before := fx.fakes["p0"].calls.Load()
		for range n {
			res, err := task.RunJSON(ctx, ticket)
			if err != nil || res.Source != afloat.SourceModel {
				t.Fatalf("%v after the close: %+v, %v", after, res, err)
			}
			switch res.Provider {
			case "p0":
				primary++
				if res.Degraded || res.Reason != "" {
					t.Fatalf("%v after the close, answered by the primary: %+v", after, res)
				}
			case "p1":
				if !res.Degraded || res.Reason != "circuit_open" || res.Attempts[0].Outcome != afloat.OutcomeCircuitOpen {
					t.Fatalf("%v after the close, answered by the backup: %+v; want degraded, reason circuit_open", after, res)
				}
			default:
				t.Fatalf("%v after the close: answered by %q", after, res.Provider)
			}
		}
		if called := fx.fakes["p0"].calls.Load() - before; called != int64(primary) {
			t.Errorf("%v after the close: the primary was called %d times for %d answers: a call turned away reached it", after, called, primary)
		}
		if st := br.State(ctx); st != breaker.StateClosed {
			t.Fatalf("%v after the close: primary's breaker %v, want closed", after, st)
		}
		t.Logf("%v after the close: %d of %d answered by the primary", after, primary, n)
		return primary
	}
	if got := run(time.Second); got > n/4 {
		t.Errorf("1s into a 10s ramp-up the primary answered %d of %d calls, want about a tenth", got, n)
	}
	if got := run(9 * time.Second); got < 3*n/4 || got == n {
		t.Errorf("9s into a 10s ramp-up the primary answered %d of %d calls, want about nine tenths", got, n)
	}
	if got := run(10 * time.Second); got != n {
		t.Errorf("after the ramp-up the primary answered %d of %d calls, want all", got, n)
	}
}
