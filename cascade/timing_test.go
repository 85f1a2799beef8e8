package cascade

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
	"github.com/jonboulle/clockwork"
)

// runAsync starts a call and returns a channel closed when it is over.
func runAsync(task *Task, res *afloat.Result[json.RawMessage], err *error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		*res, *err = task.RunJSON(context.Background(), ticket)
	}()
	return done
}

func waitDone(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end")
	}
}

// TestHangingProviderIsCutAtMeasuredTimeout: after 200 calls measured at p95 ≈ 100 ms, with
// a 50 ms minimum, a provider that hangs for 5 s is cut at about 150 ms (p95 × 1.5) — not
// 5 s and not a round 30 s. Time is a fake clock: the provider "takes" its latency by
// advancing it.
func TestHangingProviderIsCutAtMeasuredTimeout(t *testing.T) {
	var clk *clockwork.FakeClock
	rng := rand.New(rand.NewPCG(1, 2))
	hangNow := false
	provider := func(ctx context.Context, _ *afloat.Request, n int) (*afloat.Response, error) {
		if hangNow {
			select {
			case <-ctx.Done():
				return nil, &afloat.ProviderError{Provider: "p0", Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
			case <-clk.After(5 * time.Second):
				return &afloat.Response{Content: validAnswer}, nil
			}
		}
		// 95 % of calls in 40–95 ms, 5 % in 100–110 ms: p95 ≈ 100 ms.
		d := time.Duration(40+rng.IntN(55)) * time.Millisecond
		if n%20 == 19 {
			d = time.Duration(100+rng.IntN(10)) * time.Millisecond
		}
		clk.Advance(d)
		return &afloat.Response{Content: validAnswer}, nil
	}
	fx := newFixture(t, func(c *Config) {
		c.Providers[0].Timeouts = latency.Config{Min: 50 * time.Millisecond}
	}, provider)
	clk = fx.clock
	task := fx.task(t, func(c *TaskConfig) { c.Budget = 10 * time.Second })
	for range 200 {
		if res, err := task.RunJSON(context.Background(), ticket); err != nil || res.Source != afloat.SourceModel {
			t.Fatalf("warm-up call: %+v %v", res, err)
		}
	}
	timeout := task.tiers[0].est.ReadTimeout()
	if timeout < 140*time.Millisecond || timeout > 160*time.Millisecond {
		t.Fatalf("read timeout %v after 200 calls at p95≈100ms, want ≈150ms", timeout)
	}

	hangNow = true
	var res afloat.Result[json.RawMessage]
	var err error
	done := runAsync(task, &res, &err)
	// Waiters: the call's deadline, the attempt's timeout, and the provider's 5 s.
	if err := clk.BlockUntilContext(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(timeout - time.Millisecond)
	select {
	case <-done:
		t.Fatal("the call ended before its read timeout")
	default:
	}
	clk.Advance(time.Millisecond)
	waitDone(t, done)
	if err != nil {
		t.Fatal(err)
	}
	sameOutcomes(t, res, afloat.OutcomeTimeout)
	if got := res.Attempts[0].Latency; got != timeout {
		t.Fatalf("cut after %v, want %v", got, timeout)
	}
	if res.Latency != timeout || res.Source != afloat.SourceHeuristic || res.Reason != "timeout" {
		t.Fatalf("envelope %+v", res)
	}
}

// TestThreeHangingTiersEndWithinBudget: three tiers whose measured read timeouts add up to
// more than the 1.5 s budget all hang; the call still ends at the budget: the first gets its
// read timeout, the second is capped to keep the third its p95, the third gets what is left.
func TestThreeHangingTiersEndWithinBudget(t *testing.T) {
	fx := newFixture(t, nil, hang, hang, hang)
	task := fx.task(t, func(c *TaskConfig) { c.Budget = 1500 * time.Millisecond })
	for i := range task.tiers {
		for n := range 50 {
			// Median 200 ms, p95 400 ms: read timeout ≈ 600 ms each.
			d := 200 * time.Millisecond
			if n%10 == 9 {
				d = 400 * time.Millisecond
			}
			task.tiers[i].est.Observe(d)
		}
	}
	var res afloat.Result[json.RawMessage]
	var err error
	done := runAsync(task, &res, &err)
	for step := 0; ; step++ {
		// While a tier hangs there are two waiters: the call's deadline and the attempt's.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		blocked := fx.clock.BlockUntilContext(ctx, 2) == nil
		cancel()
		select {
		case <-done:
		default:
			if blocked {
				fx.clock.Advance(10 * time.Millisecond)
			}
			if step > 10000 {
				t.Fatal("the call never ended")
			}
			continue
		}
		break
	}
	if err != nil {
		t.Fatal(err)
	}
	// The first two are cut by their own allotment (the read timeout, then the reserve for the
	// last tier): the providers' failures. The last is cut by the budget: not its failure.
	sameOutcomes(t, res, afloat.OutcomeTimeout, afloat.OutcomeTimeout, afloat.OutcomeDeadline)
	if res.Latency > 1500*time.Millisecond {
		t.Fatalf("the call took %v of a 1.5s budget", res.Latency)
	}
	if res.Latency < 1490*time.Millisecond {
		t.Fatalf("the call ended at %v, before its budget, although every tier hung", res.Latency)
	}
	if last := res.Attempts[2].Latency; last >= res.Attempts[0].Latency {
		t.Fatalf("the last tier got %v, not the remainder of the budget: %+v", last, res.Attempts)
	}
	if res.Source != afloat.SourceHeuristic {
		t.Fatalf("source %v", res.Source)
	}
}
