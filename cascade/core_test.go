package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/latency"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The tests in this file run inside testing/synctest bubbles: the engine keeps its real clock,
// whose time is the bubble's, so providers take their latency with real timers and the
// whole scenario runs in no time, deterministically.

// after answers like then once d has passed, or fails as cut when ctx ends first.
func after(d time.Duration, then func(context.Context, *afloat.Request, int) (*afloat.Response, error)) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, &afloat.ProviderError{Provider: "fake", Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
		case <-t.C:
			return then(ctx, req, n)
		}
	}
}

// realClock makes a fixture keep the real clock (the bubble's), with the default retry budget.
func realClock(c *Config) {
	c.Clock = nil
	for i := range c.Providers {
		c.Providers[i].Retry = RetryConfig{}
	}
}

func opened(fx *fixture, provider string) float64 {
	return testutil.ToFloat64(fx.eng.Metrics().CircuitOpened.WithLabelValues(provider))
}

// TestBudgetSqueezeSparesTheBackup: p0 answers 500 after 1.2 s, p1 answers in 700 ms, the
// budget is 1.5 s. The 300 ms p0 leaves is not p1's failure: p1's breaker never opens, and
// once p0's has opened p1 answers every call. (Before: p1 was cut at 300 ms and counted, both
// breakers opened within five calls, and 600 of 600 calls ended in the heuristic.)
func TestBudgetSqueezeSparesTheBackup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock,
			after(1200*time.Millisecond, failWith(500, afloat.Unavailable)),
			after(700*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		fromP1 := 0
		for range 600 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if res.Source == afloat.SourceModel && res.Provider == "p1" {
				fromP1++
			}
			for _, a := range res.Attempts {
				if a.Provider == "p1" && a.Outcome == afloat.OutcomeTimeout {
					t.Fatalf("p1 was counted as timed out: %+v", res.Attempts)
				}
			}
		}
		t.Logf("%d of 600 calls answered by p1", fromP1)
		if fromP1 < 594 {
			t.Errorf("%d of 600 calls answered by p1, want ≥ 99%%", fromP1)
		}
		if n := opened(fx, "p1"); n != 0 {
			t.Errorf("p1's breaker opened %v times", n)
		}
		if st := fx.eng.Breaker("p1").State(context.Background()); st != breaker.StateClosed {
			t.Errorf("p1's breaker %v", st)
		}
		if n := opened(fx, "p0"); n == 0 {
			t.Error("p0's breaker never opened")
		}
	})
}

// healthyThenSlow is a primary that answers in 200–300 ms, and takes 5 s on the calls slow
// says.
func healthyThenSlow(slow func(n int) bool) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	rng := rand.New(rand.NewPCG(7, 9))
	return func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
		d := time.Duration(200+rng.IntN(100)) * time.Millisecond
		if slow(n) {
			d = 5 * time.Second
		}
		return after(d, answer(validAnswer))(ctx, req, n)
	}
}

// TestBrownout: the primary slows from 300 ms to 5 s. The first calls wait at most about
// twice its healthy p95 on it before the backup answers within the budget; its breaker
// opens, and then calls do not wait on it at all; its read timeout does not rise.
func TestBrownout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const warm = 100
		fx := newFixture(t, realClock,
			healthyThenSlow(func(n int) bool { return n >= warm }),
			after(400*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		for range warm {
			if res, err := task.RunJSON(context.Background(), ticket); err != nil || res.Provider != "p0" {
				t.Fatalf("warm-up %+v %v", res, err)
			}
		}
		p95, _ := task.tiers[0].est.Percentile()
		healthyRead := task.tiers[0].est.ReadTimeout()
		t.Logf("healthy p95 %v, read timeout %v", p95, healthyRead)
		for i := range 20 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if res.Source != afloat.SourceModel || res.Provider != "p1" || res.Latency > 1500*time.Millisecond {
				t.Fatalf("brownout call %d: %+v", i, res)
			}
			first := res.Attempts[0]
			switch {
			case first.Outcome == afloat.OutcomeCircuitOpen:
				if i < 5 {
					t.Fatalf("call %d skipped the primary before five failures", i)
				}
			case first.Outcome != afloat.OutcomeTimeout || first.Latency > 2*p95:
				t.Fatalf("call %d waited %v on the primary (%s), want ≤ 2 × p95 = %v", i, first.Latency, first.Outcome, 2*p95)
			case i >= 5:
				t.Fatalf("call %d still waited on the primary: its breaker did not open", i)
			}
		}
		if n := opened(fx, "p0"); n != 1 {
			t.Errorf("primary's breaker opened %v times, want 1", n)
		}
		if got := task.tiers[0].est.ReadTimeout(); got > healthyRead {
			t.Errorf("read timeout rose from %v to %v", healthyRead, got)
		}
	})
}

// TestPartialBrownoutDoesNotChaseTheTimeout: every third call of the primary takes 5 s, too
// few failures to open its breaker. The cuts must not raise its read timeout: before, they
// raised it step by step to the budget, and the slow calls then spent the whole budget on
// the primary and fell to the heuristic although the backup was healthy.
func TestPartialBrownoutDoesNotChaseTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const warm = 100
		fx := newFixture(t, realClock,
			healthyThenSlow(func(n int) bool { return n >= warm && n%3 == 0 }),
			after(400*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		for range warm {
			if _, err := task.RunJSON(context.Background(), ticket); err != nil {
				t.Fatal(err)
			}
		}
		healthyRead := task.tiers[0].est.ReadTimeout()
		var fromP0, fromP1 int
		for i := range 600 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if res.Source != afloat.SourceModel || res.Latency > 1500*time.Millisecond {
				t.Fatalf("call %d: %+v", i, res)
			}
			if res.Provider == "p0" {
				fromP0++
			} else {
				fromP1++
			}
		}
		t.Logf("600 calls in a partial brownout: %d from p0, %d from p1; read timeout %v → %v", fromP0, fromP1, healthyRead, task.tiers[0].est.ReadTimeout())
		if got := task.tiers[0].est.ReadTimeout(); got > healthyRead*105/100 {
			t.Errorf("read timeout rose from %v to %v", healthyRead, got)
		}
	})
}

// panicky panics on the calls boom says, and answers otherwise.
func panicky(boom func(n int) bool) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
		if boom(n) {
			panic("adapter bug")
		}
		return answer(validAnswer)(ctx, req, n)
	}
}

// runRecovering runs one call and returns what it panicked with, if anything.
func runRecovering(task *Task) (res afloat.Result[json.RawMessage], v any) {
	defer func() { v = recover() }()
	res, _ = task.RunJSON(context.Background(), ticket)
	return res, nil
}

// TestPanicReleasesSlotAndPermit: a provider that panics gets its panic back, and leaks
// neither its bulkhead slot nor its breaker permit. (Before: after max_in_flight panics the
// provider was skipped as bulkhead until restart, and a panicking probe held the half-open
// slot for a minute.)
func TestPanicReleasesSlotAndPermit(t *testing.T) {
	fx := newFixture(t, func(c *Config) {
		c.Providers[0].MaxInFlight = 2
		c.Providers[0].Breaker.ConsecutiveFailures = 100
	}, panicky(func(n int) bool { return n < 3 }), answer(validAnswer))
	task := fx.task(t, nil)
	for i := range 3 {
		if _, v := runRecovering(task); v != "adapter bug" {
			t.Fatalf("call %d recovered %v, want the provider's panic", i, v)
		}
	}
	if n := fx.eng.InFlight("p0"); n != 0 {
		t.Fatalf("%d bulkhead slots still held after the panics", n)
	}
	res, v := runRecovering(task)
	if v != nil || res.Provider != "p0" || res.Source != afloat.SourceModel {
		t.Fatalf("call after the panics: %+v (panic %v), want p0's answer", res, v)
	}
	fails := testutil.ToFloat64(fx.eng.Metrics().Attempts.WithLabelValues("triage", "p0", "unavailable"))
	if fails != 3 {
		t.Errorf("%v unavailable attempts counted for the panics, want 3", fails)
	}

	// A probe that panics settles as a failed probe: the breaker opens again instead of
	// keeping its one probe slot taken.
	br := fx.eng.Breaker("p0")
	if err := br.Force(context.Background(), breaker.StateHalfOpen); err != nil {
		t.Fatal(err)
	}
	fx.fakes["p0"].fn = panicky(func(int) bool { return true })
	if _, v := runRecovering(task); v != "adapter bug" {
		t.Fatalf("probe recovered %v", v)
	}
	if st := br.State(context.Background()); st != breaker.StateOpen {
		t.Fatalf("breaker %v after a panicking probe, want open", st)
	}
}

// TestRetryFloorRetriesAQuietService: the first transient failure of a quiet service is
// retried on the same provider (before, the budget allowed no retry until five calls had gone
// out in its window, and the call went to the backup).
func TestRetryFloorRetriesAQuietService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		once := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			if n == 0 {
				return failWith(502, afloat.Unavailable)(ctx, req, n)
			}
			return answer(validAnswer)(ctx, req, n)
		}
		fx := newFixture(t, realClock, once, answer(validAnswer))
		res, err := fx.task(t, nil).RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Provider != "p0" || res.Degraded {
			t.Fatalf("answered by %s (degraded %v), want p0 after one retry: %+v", res.Provider, res.Degraded, res.Attempts)
		}
		sameOutcomes(t, res, afloat.OutcomeUnavailable, afloat.OutcomeOK)
	})
}

// TestRetryBudgetFloorAndRatio: the budget always allows its floor of retries in a window,
// and beyond it the ratio of calls.
func TestRetryBudgetFloorAndRatio(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	b := newRetryBudget(fx.clock, RetryConfig{BudgetRatio: 0.2, BudgetFloor: 3, Window: 10 * time.Second})
	for i := range 3 {
		if _, ok := b.take(); !ok {
			t.Fatalf("retry %d refused with no calls: the floor allows 3", i+1)
		}
	}
	if _, ok := b.take(); ok {
		t.Fatal("a fourth retry allowed with no calls")
	}
	for range 20 {
		b.call()
	}
	if _, ok := b.take(); !ok {
		t.Fatal("retry refused at 3 of 20 calls, under the 20% ratio")
	}
	if _, ok := b.take(); ok {
		t.Fatal("retry allowed at 5 of 20 calls, over the 20% ratio")
	}
	fx.clock.Advance(11 * time.Second) // the window has moved on: the floor again
	if _, ok := b.take(); !ok {
		t.Fatal("retry refused in a fresh window")
	}
}

// TestRetryBudgetNoRatio: a negative ratio (a file's budget_ratio: 0) allows the floor's
// retries and no more, however many calls there were; 0 is the default 0.2.
func TestRetryBudgetNoRatio(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	cfg, err := RetryConfig{BudgetRatio: -1, BudgetFloor: 2}.withDefaults()
	if err != nil || cfg.BudgetRatio != 0 {
		t.Fatalf("ratio %v, %v: want 0", cfg.BudgetRatio, err)
	}
	if def, _ := (RetryConfig{}).withDefaults(); def.BudgetRatio != 0.2 {
		t.Fatalf("default ratio %v, want 0.2", def.BudgetRatio)
	}
	b := newRetryBudget(fx.clock, cfg)
	for range 100 {
		b.call()
	}
	for i := range 2 {
		if _, ok := b.take(); !ok {
			t.Fatalf("retry %d refused: the floor allows 2", i+1)
		}
	}
	if _, ok := b.take(); ok {
		t.Fatal("a third retry allowed at 100 calls with no ratio")
	}
}

// TestRetryBudgetGiveReturnsItsOwn: a retry given back frees its own bucket's while the window
// holds it, and nothing once it has left the window (not another, later retry's).
func TestRetryBudgetGiveReturnsItsOwn(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	b := newRetryBudget(fx.clock, RetryConfig{BudgetRatio: 0.2, BudgetFloor: 3, Window: 10 * time.Second})
	taken := func() int {
		n := 0
		for _, r := range b.retries {
			n += r
		}
		return n
	}
	first, _ := b.take()
	fx.clock.Advance(3 * time.Second)
	b.give(first)
	if n := taken(); n != 0 {
		t.Fatalf("%d retries held after the one taken was given back 3s later; want 0", n)
	}
	old, _ := b.take()
	fx.clock.Advance(12 * time.Second) // old's bucket has left the window
	if _, ok := b.take(); !ok {
		t.Fatal("retry refused in a fresh window")
	}
	b.give(old)
	if n := taken(); n != 1 {
		t.Errorf("%d retries held; want 1: giving back one that left the window frees no other", n)
	}
	recent, _ := b.take() // in the same bucket as the one after the fresh window: 2 there
	fx.clock.Advance(1500 * time.Millisecond)
	if _, ok := b.take(); !ok { // a bucket on: 1 there
		t.Fatal("retry refused within the ratio")
	}
	b.give(recent)
	prev := (b.head + len(b.retries) - 1) % len(b.retries)
	if b.retries[prev] != 1 || b.retries[b.head] != 1 {
		t.Errorf("retries %v (head %d); want 1 and 1: the one given back gone from its own bucket, the newer one kept", b.retries, b.head)
	}
}

// TestDialFailureGoesToTheNextTierAtOnce: a connection that was never established is not
// retried on the same address; the next tier is asked at once, without a backoff.
func TestDialFailureGoesToTheNextTierAtOnce(t *testing.T) {
	for _, cause := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, &net.DNSError{Err: "no such host", Name: "llm.invalid"}} {
		t.Run(cause.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				err := cause
				if !errors.As(err, new(*net.DNSError)) {
					err = &net.OpError{Op: "dial", Net: "tcp", Err: cause}
				}
				dead := func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
					return nil, &afloat.ProviderError{Provider: "p0", Kind: afloat.Unavailable, Err: err}
				}
				fx := newFixture(t, realClock, dead, answer(validAnswer))
				res, rerr := fx.task(t, nil).RunJSON(context.Background(), ticket)
				if rerr != nil {
					t.Fatal(rerr)
				}
				sameOutcomes(t, res, afloat.OutcomeUnavailable, afloat.OutcomeOK)
				if n := fx.fakes["p0"].calls.Load(); n != 1 {
					t.Errorf("the dead address was called %d times", n)
				}
				if res.Latency != 0 {
					t.Errorf("the call took %v: the next tier was not asked at once", res.Latency)
				}
			})
		})
	}
}

// warm feeds tier i of task n answers of latency d, so that its median and p95 are d.
func warm(task *Task, i int, d time.Duration) {
	for range 50 {
		task.tiers[i].est.Observe(d)
	}
}

// TestTierThatCannotFitIsSkipped: when what is left of the budget is less than a tier's
// median latency, the tier is skipped at once with outcome deadline, without a call; the next
// tier, which fits, answers.
func TestTierThatCannotFitIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock,
			after(700*time.Millisecond, answer(validAnswer)),
			after(100*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		warm(task, 0, 700*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		res, err := task.RunJSON(ctx, ticket)
		if err != nil {
			t.Fatal(err)
		}
		sameOutcomes(t, res, afloat.OutcomeDeadline, afloat.OutcomeOK)
		if n := fx.fakes["p0"].calls.Load(); n != 0 {
			t.Errorf("p0 called %d times with 500 ms left of its 700 ms", n)
		}
		if res.Attempts[0].Latency != 0 || res.Latency != 100*time.Millisecond || res.Provider != "p1" {
			t.Errorf("skip took %v, the call %v, answered by %s", res.Attempts[0].Latency, res.Latency, res.Provider)
		}
	})
}

// TestAttemptKeepsTheReserve: a hanging primary is cut so that the backup still has its p95:
// 1.5 s − 700 ms, although its read timeout (the initial 2 s) is longer.
func TestAttemptKeepsTheReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock, hang, after(700*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		warm(task, 1, 700*time.Millisecond)
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		sameOutcomes(t, res, afloat.OutcomeTimeout, afloat.OutcomeOK)
		// The p95 is the sketch's, within 1% of 700 ms.
		if got := res.Attempts[0].Latency; got < 790*time.Millisecond || got > 800*time.Millisecond {
			t.Errorf("primary cut after %v, want 800ms (−1%% of the reserve)", got)
		}
		if res.Provider != "p1" || res.Latency > 1500*time.Millisecond {
			t.Errorf("answered by %s after %v", res.Provider, res.Latency)
		}

		// With the backup's circuit open, nothing below needs a reserve: the primary gets
		// its whole read timeout, capped by the budget.
		if err := fx.eng.Breaker("p1").Force(context.Background(), breaker.StateOpen); err != nil {
			t.Fatal(err)
		}
		res, _ = task.RunJSON(context.Background(), ticket)
		if got := res.Attempts[0].Latency; got != 1500*time.Millisecond {
			t.Errorf("primary cut after %v with the backup open, want the whole 1.5s", got)
		}
	})
}

func TestAllot(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name                    string
		left, read, need, floor time.Duration // floor: need, or the measured p95
		reserve, next           time.Duration // the next open tier's p95 and median
		want                    time.Duration
		ok, readsBelow          bool
	}{
		{"read timeout fits with the reserve", 1500 * ms, 450 * ms, 250 * ms, 400 * ms, 700 * ms, 600 * ms, 450 * ms, true, false},
		{"capped for the reserve", 1500 * ms, 2000 * ms, 200 * ms, 600 * ms, 700 * ms, 600 * ms, 800 * ms, true, true},
		{"the reserve never cuts below need", 1000 * ms, 2000 * ms, 500 * ms, 500 * ms, 700 * ms, 500 * ms, 500 * ms, true, true},
		// The example config's triage: budget 1.5 s, the primary's p95 532 ms, the backup's p95
		// 1,051 ms and median 500 ms: the cap stops at the primary's p95, not at 449 ms.
		{"the reserve never cuts below a measured p95", 1500 * ms, 1400 * ms, 300 * ms, 532 * ms, 1051 * ms, 500 * ms, 532 * ms, true, true},
		{"no cap when the next tier could not start anyway", 1500 * ms, 1600 * ms, 900 * ms, 1000 * ms, 700 * ms, 700 * ms, 1500 * ms, true, true},
		{"no cap when the p95 leaves the next tier less than its need", 1500 * ms, 1600 * ms, 300 * ms, 1100 * ms, 700 * ms, 500 * ms, 1500 * ms, true, true},
		{"the budget cuts", 300 * ms, 2000 * ms, 200 * ms, 400 * ms, 0, 0, 300 * ms, true, false},
		{"less than need is left", 300 * ms, 2000 * ms, 700 * ms, 800 * ms, 0, 0, 0, false, false},
		{"nothing left", 0, 2000 * ms, 0, 0, 0, 0, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := false
			got, ok := allot(tt.left, tt.read, tt.need, tt.floor, tt.reserve, func() (time.Duration, time.Duration) {
				read = true
				return tt.reserve, tt.next
			})
			if got != tt.want || ok != tt.ok || read != tt.readsBelow {
				t.Errorf("allot = %v, %v (breakers read %v); want %v, %v (%v)", got, ok, read, tt.want, tt.ok, tt.readsBelow)
			}
		})
	}
}

// TestFinishReasonReachesTheContract: an answer that stopped by itself and lacks only its
// closing brace is accepted; one cut by the token limit is re-asked, saying so.
func TestFinishReasonReachesTheContract(t *testing.T) {
	const unclosed = `{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3`
	stopped := func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
		return &afloat.Response{Content: unclosed, FinishReason: "stop"}, nil
	}
	fx := newFixture(t, nil, stopped)
	res, err := fx.task(t, nil).RunJSON(context.Background(), ticket)
	if err != nil || res.Source != afloat.SourceModel {
		t.Fatalf("%+v %v", res, err)
	}
	if string(res.Value) != `{"department":"billing","is_urgent":0.1,"urgency_score":0.3}` && !strings.Contains(string(res.Value), `"urgency_score": 0.3`) {
		t.Errorf("value %s", res.Value)
	}

	cut := func(_ context.Context, _ *afloat.Request, n int) (*afloat.Response, error) {
		if n == 0 {
			return &afloat.Response{Content: unclosed, FinishReason: "length"}, nil
		}
		return &afloat.Response{Content: validAnswer, FinishReason: "stop"}, nil
	}
	fx = newFixture(t, nil, cut)
	res, err = fx.task(t, nil).RunJSON(context.Background(), ticket)
	if err != nil || res.Source != afloat.SourceModel {
		t.Fatalf("%+v %v", res, err)
	}
	sameOutcomes(t, res, afloat.OutcomeContractViolation, afloat.OutcomeOK)
	if !strings.Contains(res.Attempts[0].Error, "truncated") {
		t.Errorf("violation %q, want stage truncated", res.Attempts[0].Error)
	}
	reqs := fx.fakes["p0"].reqs
	last := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	if !strings.Contains(last, "cut off") {
		t.Errorf("re-ask %q does not say the answer was cut", last)
	}
	if got := testutil.ToFloat64(fx.eng.Metrics().ContractViolations.WithLabelValues("triage", "p0", "truncated")); got != 1 {
		t.Errorf("truncated violations %v", got)
	}
}

// TestStreamRetriedBeforeTheFirstChunk: a stream that fails with a transient 502 before its
// first chunk is retried on the same provider, as a Complete call is.
func TestStreamRetriedBeforeTheFirstChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamer{recv: words("Hello", " there")}
		s.open = func(context.Context) error {
			if s.calls.Load() == 1 {
				return &afloat.ProviderError{Provider: "p0", Status: 502, Kind: afloat.Unavailable}
			}
			return nil
		}
		backup := &streamer{recv: words("backup")}
		e, r := newRoute(t, nil, nil, nil, s, backup)
		for _, name := range []string{"p0", "p1"} {
			e.upstreams[name].retry.Max = 1
		}
		var c collector
		rep, err := r.Stream(context.Background(), hi, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Provider != "p0" || c.text.String() != "Hello there" || backup.calls.Load() != 0 {
			t.Fatalf("answered by %s: %q (backup called %d times)", rep.Provider, c.text.String(), backup.calls.Load())
		}
		if len(rep.Attempts) != 2 || rep.Attempts[0].Outcome != afloat.OutcomeUnavailable {
			t.Errorf("attempts %+v", rep.Attempts)
		}
	})
}

// TestReserveStopsAtTheMeasuredP95: the example config's triage. Budget 1.5 s; p0 answers in
// 200–550 ms, p1, slower, in 300–1,100 ms (p95 about 1.06 s, so the reserve alone would cut p0
// at about 440 ms, under its own p95). Healthy, p0 answers nearly every call; then p0 hangs,
// and its cuts, at its p95, are its timeouts: its breaker opens and later calls skip it at
// once. (Before, the reserve cut p0 at 440 ms, under its p95: a quarter of the healthy calls
// went to p1, and the hung p0's cuts were blamed on the budget, so its breaker never opened
// and every call paid 440 ms for it.)
// measure feeds 200 latencies from d to the estimator of provider on the fixture's task.
func measure(t *testing.T, fx *fixture, provider string, d func() time.Duration) {
	t.Helper()
	est, ok := fx.eng.Latency().Lookup(provider, "triage")
	if !ok {
		t.Fatalf("no estimator for %s on triage", provider)
	}
	for range 200 {
		est.Observe(d())
	}
}

func TestReserveStopsAtTheMeasuredP95(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hung atomic.Bool
		rng := rand.New(rand.NewPCG(7, 7))
		var mu sync.Mutex
		between := func(lo, hi int) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond
		}
		p0 := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			if hung.Load() {
				return hang(ctx, req, n)
			}
			return after(between(200, 550), answer(validAnswer))(ctx, req, n)
		}
		p1 := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			return after(between(300, 1100), answer(validAnswer))(ctx, req, n)
		}
		fx := newFixture(t, realClock, p0, p1)
		task := fx.task(t, nil)
		// Both measured already, as a gateway's traffic measures them: p1's reserve is its
		// p95, and p0's p95 (about 530 ms) is above what the reserve alone would leave it.
		measure(t, fx, "p0", func() time.Duration { return between(200, 550) })
		measure(t, fx, "p1", func() time.Duration { return between(300, 1100) })
		const healthy = 200
		degraded := 0
		for range healthy {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if res.Degraded {
				degraded++
			}
		}
		t.Logf("healthy: %d of %d calls degraded", degraded, healthy)
		if degraded > healthy/10 {
			t.Errorf("healthy: %d of %d calls degraded, want at most a tenth", degraded, healthy)
		}
		hung.Store(true)
		var last afloat.Result[json.RawMessage]
		for range 20 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			last = res
		}
		if n := opened(fx, "p0"); n < 1 {
			t.Fatal("the hung p0's breaker never opened")
		}
		if first := last.Attempts[0]; first.Outcome != afloat.OutcomeCircuitOpen || last.Source != afloat.SourceModel {
			t.Errorf("a call after the breaker opened: %+v from %s, want p0 skipped and p1 answering", last.Attempts, last.Source)
		}
	})
}

// TestCriticalWaitsAheadOfEnrichmentInTheBulkhead: p0 takes two calls at once; four
// enrichment calls hold both slots and fill the queue (its bound is max_in_flight). A critical
// call is not refused by the full queue: it takes the next free slot, before the enrichment
// calls that waited first. (Before, it was skipped at once with outcome bulkhead and failed
// closed with nearly all of its budget left.)
func TestCriticalWaitsAheadOfEnrichmentInTheBulkhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, func(c *Config) { realClock(c); c.Providers[0].MaxInFlight = 2 },
			after(200*time.Millisecond, answer(validAnswer)))
		enrich := fx.task(t, func(c *TaskConfig) { c.Budget = 5 * time.Second })
		critical := fx.task(t, func(c *TaskConfig) {
			c.Name, c.Criticality, c.OnExhausted, c.Budget = "moderation", afloat.Critical, PolicyBlock, 5*time.Second
		})
		var wg sync.WaitGroup
		var enrichDone sync.Map // which enrichment calls had ended when the critical one did
		for i := range 4 {
			wg.Go(func() {
				if _, err := enrich.RunJSON(context.Background(), ticket); err != nil {
					t.Error(err)
				}
				enrichDone.Store(i, time.Now())
			})
			synctest.Wait() // in this order: two in flight, then two queued
		}
		start := time.Now()
		res, err := critical.RunJSON(context.Background(), ticket)
		took := time.Since(start)
		wg.Wait()
		if err != nil || res.Source != afloat.SourceModel {
			t.Fatalf("critical call: %v, source %s, attempts %+v; want p0's answer", err, res.Source, res.Attempts)
		}
		if took != 400*time.Millisecond {
			t.Errorf("critical call took %v; want 400ms: the first free slot (200ms) and its own call", took)
		}
		last, _ := enrichDone.Load(3)
		if end := last.(time.Time); !end.After(start.Add(took)) {
			t.Errorf("the last queued enrichment call ended before the critical one")
		}
	})
}

// TestClientGoneInTheQueueIsNoBulkheadRefusal: a call that waits for p0's one slot and whose
// client leaves meanwhile is recorded as deadline (the call ended), not as a bulkhead refusal.
func TestClientGoneInTheQueueIsNoBulkheadRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, func(c *Config) { realClock(c); c.Providers[0].MaxInFlight = 1 },
			after(200*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, func(c *TaskConfig) { c.Budget = 5 * time.Second })
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = task.RunJSON(context.Background(), ticket) }) // holds the slot
		synctest.Wait()
		ctx, leave := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, leave)
		_, _ = task.RunJSON(ctx, ticket)
		wg.Wait()
		attempts := func(outcome string) float64 {
			return testutil.ToFloat64(fx.eng.Metrics().Attempts.WithLabelValues("triage", "p0", outcome))
		}
		if b, d := attempts("bulkhead"), attempts("deadline"); b != 0 || d != 1 {
			t.Errorf("afloat_attempts_total bulkhead %v, deadline %v; want 0 and 1", b, d)
		}
	})
}

// TestHangingBackupOpensBehindAFastFailingPrimary: the primary fails fast (a contract
// violation after 5 ms, twice with its re-ask), the backup hangs. The backup had nearly its whole
// allotment, so its cuts are its own timeouts: its breaker opens, and then calls end at once
// instead of paying the budget every time.
func TestHangingBackupOpensBehindAFastFailingPrimary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prose := func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
			return &afloat.Response{Content: "no json here", FinishReason: "stop"}, nil
		}
		fx := newFixture(t, realClock, after(5*time.Millisecond, prose), hang)
		task := fx.task(t, func(c *TaskConfig) { c.Budget = 400 * time.Millisecond })
		var last afloat.Result[json.RawMessage]
		for range 8 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			last = res
		}
		if n := opened(fx, "p1"); n != 1 {
			t.Fatalf("the hanging backup's breaker opened %v times, want 1", n)
		}
		if last.Latency != 10*time.Millisecond || last.Attempts[len(last.Attempts)-1].Outcome != afloat.OutcomeCircuitOpen {
			t.Errorf("last call took %v: %+v", last.Latency, last.Attempts)
		}
	})
}

// refusing fails every call with a content-policy refusal.
func refusing(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return nil, &afloat.ProviderError{Provider: "p0", Status: 400, Kind: afloat.Refused, Code: "content_policy_violation",
		Err: errors.New("Your request was rejected as a result of our safety system.")}
}

// TestRefusalReachesTheCaller: a content-policy refusal is not retried and, by default, not
// routed around: the route returns a *RefusalError with the provider's reason, the task
// answers by its policy with reason refused. With on_refusal next_tier the next tier answers.
func TestRefusalReachesTheCaller(t *testing.T) {
	p0, p1 := &fake{fn: refusing}, &fake{fn: answer("hello")}
	_, r := newRoute(t, nil, nil, nil, p0, p1)
	rep, err := r.Complete(context.Background(), hi)
	var re *RefusalError
	if !errors.As(err, &re) || re.Provider != "p0" || re.Code != "content_policy_violation" || !strings.Contains(re.Reason, "safety system") {
		t.Fatalf("err %v, want the provider's refusal", err)
	}
	if p0.calls.Load() != 1 || p1.calls.Load() != 0 {
		t.Errorf("calls p0 %d p1 %d: a refusal is neither retried nor routed around", p0.calls.Load(), p1.calls.Load())
	}
	if rep == nil || rep.Reason != afloat.Reason(afloat.OutcomeRefused) {
		t.Errorf("reply %+v", rep)
	}

	e, r := newRoute(t, nil, nil, nil, &fake{fn: refusing}, &fake{fn: answer("hello")})
	r2, err := e.Route(RouteConfig{Name: "chat2", Criticality: afloat.Assistance, OnRefusal: RefusalNextTier,
		Cascade: []RouteTier{{Provider: "p0"}, {Provider: "p1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := r2.Complete(context.Background(), hi); err != nil || rep.Provider != "p1" {
		t.Fatalf("with next_tier: %+v %v", rep, err)
	}
	_ = r

	fx := newFixture(t, nil, refusing, answer(validAnswer))
	task := fx.task(t, nil)
	for range 6 { // more than the breaker's consecutive failures
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil || res.Source != afloat.SourceHeuristic || res.Reason != "refused" {
			t.Fatalf("task: %+v %v, want the heuristic with reason refused", res, err)
		}
	}
	if fx.fakes["p1"].calls.Load() != 0 {
		t.Error("the task asked the next tier after a refusal")
	}
	if st := fx.eng.Breaker("p0").State(context.Background()); st != breaker.StateClosed {
		t.Errorf("a refusal moved the breaker: %v", st)
	}
	if got := testutil.ToFloat64(fx.eng.Metrics().Refusals.WithLabelValues("triage", "p0")); got != 6 {
		t.Errorf("refusals counted %v", got)
	}
}

// cutAfter streams pieces, then fails as a cut connection.
func cutAfter(pieces ...string) func(context.Context, int) (afloat.Chunk, error) {
	return func(_ context.Context, n int) (afloat.Chunk, error) {
		if n < len(pieces) {
			return afloat.Chunk{Delta: pieces[n]}, nil
		}
		return afloat.Chunk{}, &afloat.ProviderError{Provider: "p0", Kind: afloat.Unavailable, Err: syscall.ECONNRESET}
	}
}

// TestCutStreamContinuedOnTheNextTier: a stream cut after its first chunks is continued by a
// tier that declares continuation from an assistant prefill: it is asked to continue the text
// the client has, and the client reads one answer. A tier that cannot continue is not asked.
func TestCutStreamContinuedOnTheNextTier(t *testing.T) {
	var got *afloat.Request
	cont := &streamer{recv: words(" world", "!")}
	cont.open = func(context.Context) error { return nil }
	e, r := newRoute(t, nil, nil, nil, &streamer{recv: cutAfter("Hel", "lo")}, &streamer{recv: words("never")}, cont)
	e.upstreams["p2"].continues = true
	captured := &capturing{Streamer: cont, got: &got}
	e.upstreams["p2"].p = captured
	var c collector
	rep, err := r.Stream(context.Background(), hi, c.emit)
	if err != nil {
		t.Fatalf("err %v, want the stream continued", err)
	}
	if c.text.String() != "Hello world!" || rep.Response.Content != "Hello world!" || rep.Provider != "p2" || !rep.Degraded {
		t.Fatalf("client read %q, reply %q from %s (degraded %v)", c.text.String(), rep.Response.Content, rep.Provider, rep.Degraded)
	}
	last := got.Messages[len(got.Messages)-1]
	if !got.Continue || last.Role != afloat.RoleAssistant || last.Content != "Hello" {
		t.Errorf("continuation request: continue %v, last message %+v", got.Continue, last)
	}
	outs := make([]afloat.Outcome, len(rep.Attempts))
	for i, a := range rep.Attempts {
		outs[i] = a.Outcome
	}
	if len(outs) != 2 || outs[0] != afloat.OutcomeUnavailable || outs[1] != afloat.OutcomeOK {
		t.Errorf("attempts %v: p1, which cannot continue, must not be asked", outs)
	}

	// Without a tier that can continue, the stream ends with the clear error.
	_, r = newRoute(t, nil, nil, nil, &streamer{recv: cutAfter("Hel", "lo")}, &streamer{recv: words("never")})
	var c2 collector
	if _, err := r.Stream(context.Background(), hi, c2.emit); !errors.As(err, new(*StreamError)) || c2.text.String() != "Hello" {
		t.Fatalf("err %v after %q, want a StreamError", err, c2.text.String())
	}
}

// capturing is a Streamer that keeps the last request it was asked to stream.
type capturing struct {
	afloat.Streamer
	got **afloat.Request
}

func (c *capturing) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	return nil, errors.New("not used")
}

func (c *capturing) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	*c.got = req
	return c.Streamer.Stream(ctx, req)
}

// TestStreamWithoutEndMarkerEndsOnceFinished: a stream that sent its finish reason but never
// its end marker, holding the connection open, is whole: it ends half a second later instead
// of being cut at the idle timeout.
func TestStreamWithoutEndMarkerEndsOnceFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		held := &streamer{recv: func(ctx context.Context, n int) (afloat.Chunk, error) {
			switch n {
			case 0:
				return afloat.Chunk{Delta: "Hi"}, nil
			case 1:
				return afloat.Chunk{FinishReason: "stop", Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 1}}, nil
			}
			<-ctx.Done()
			return afloat.Chunk{}, &afloat.ProviderError{Provider: "p0", Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
		}}
		_, r := newRoute(t, nil, nil, nil, held)
		start := time.Now()
		var c collector
		rep, err := r.Stream(context.Background(), hi, c.emit)
		if err != nil || c.text.String() != "Hi" || rep.Response.Usage.OutputTokens != 1 {
			t.Fatalf("%q %+v %v", c.text.String(), rep, err)
		}
		if took := time.Since(start); took != finishGrace {
			t.Errorf("the stream ended after %v, want %v", took, finishGrace)
		}
	})
}

// TestRetryAfterWithinMaxWait: a 429 whose Retry-After fits retry.max_wait (2s by default) is
// waited out and retried on the same provider; a longer one fails over at once.
func TestRetryAfterWithinMaxWait(t *testing.T) {
	for _, tt := range []struct {
		wait    time.Duration
		retried bool
	}{{2 * time.Second, true}, {3 * time.Second, false}} {
		t.Run(tt.wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				limited := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
					if n == 0 {
						return nil, &afloat.ProviderError{Provider: "p0", Status: 429, Kind: afloat.Throttled, RetryAfter: tt.wait}
					}
					return answer(validAnswer)(ctx, req, n)
				}
				fx := newFixture(t, realClock, limited, answer(validAnswer))
				res, err := fx.task(t, func(c *TaskConfig) { c.Budget = 5 * time.Second }).RunJSON(context.Background(), ticket)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tt.retried && (res.Provider != "p0" || res.Latency != tt.wait):
					t.Errorf("answered by %s after %v, want p0 after the %v wait", res.Provider, res.Latency, tt.wait)
				case !tt.retried && (res.Provider != "p1" || res.Latency != 0):
					t.Errorf("answered by %s after %v, want p1 at once", res.Provider, res.Latency)
				}
			})
		})
	}
}

// TestFirstTokenTimeoutApartFromStreamIdle: a stream's first chunk is waited for by its own
// timeout (FirstToken, here 300ms), the gaps after it by StreamIdle (here 5s): a slow first
// chunk fails over at 300ms, while 1s gaps later are fine.
func TestFirstTokenTimeoutApartFromStreamIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gaps := func(first, gap time.Duration) func(context.Context, int) (afloat.Chunk, error) {
			return func(ctx context.Context, n int) (afloat.Chunk, error) {
				d := gap
				if n == 0 {
					d = first
				}
				select {
				case <-ctx.Done():
					return afloat.Chunk{}, &afloat.ProviderError{Provider: "p", Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
				case <-time.After(d):
				}
				if n < 3 {
					return afloat.Chunk{Delta: "x"}, nil
				}
				return afloat.Chunk{}, io.EOF
			}
		}
		slowFirst, slowGaps := &streamer{recv: gaps(time.Second, 0)}, &streamer{recv: gaps(0, time.Second)}
		e, err := New(Config{Providers: []ProviderConfig{
			{Name: "p0", Provider: slowFirst, FirstToken: latency.Config{Initial: 300 * time.Millisecond, Min: 100 * time.Millisecond}, StreamIdle: 5 * time.Second},
			{Name: "p1", Provider: slowGaps, FirstToken: latency.Config{Initial: 300 * time.Millisecond, Min: 100 * time.Millisecond}, StreamIdle: 5 * time.Second},
		}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance, Cascade: []RouteTier{{Provider: "p0"}, {Provider: "p1"}}})
		if err != nil {
			t.Fatal(err)
		}
		var c collector
		rep, err := r.Stream(context.Background(), hi, c.emit)
		if err != nil || rep.Provider != "p1" || c.text.String() != "xxx" {
			t.Fatalf("%+v %q %v", rep, c.text.String(), err)
		}
		if a := rep.Attempts[0]; a.Outcome != afloat.OutcomeTimeout || a.Latency != 300*time.Millisecond {
			t.Errorf("slow first chunk: %+v, want a timeout at 300ms", a)
		}
	})
}

// TestRescueLimits: a refusal mid-stream is never continued (that would finish what the
// provider's policy stopped); an answer that had finished is whole even when its stream then
// breaks; a continuation cut in turn, with nothing below to continue it, ends with a
// StreamError that names the tier whose chunks the client read last.
func TestRescueLimits(t *testing.T) {
	continuing := func(t *testing.T, first afloat.Provider, cont *streamer) (*Engine, *Route) {
		e, r := newRoute(t, nil, nil, nil, first, cont)
		e.upstreams["p1"].continues = true
		return e, r
	}
	t.Run("refusal", func(t *testing.T) {
		refused := &streamer{recv: func(_ context.Context, n int) (afloat.Chunk, error) {
			if n == 0 {
				return afloat.Chunk{Delta: "Step 1: "}, nil
			}
			return afloat.Chunk{}, &afloat.ProviderError{Provider: "p0", Status: 200, Kind: afloat.Refused, Code: "content_filter"}
		}}
		cont := &streamer{recv: words("do the forbidden thing")}
		_, r := continuing(t, refused, cont)
		var c collector
		_, err := r.Stream(context.Background(), hi, c.emit)
		if !errors.As(err, new(*StreamError)) || cont.calls.Load() != 0 || c.text.String() != "Step 1: " {
			t.Fatalf("err %v, client read %q, continuations %d; want the refusal to end the stream", err, c.text.String(), cont.calls.Load())
		}
	})
	t.Run("finished, then reset", func(t *testing.T) {
		done := &streamer{recv: func(_ context.Context, n int) (afloat.Chunk, error) {
			switch n {
			case 0:
				return afloat.Chunk{Delta: "Hi"}, nil
			case 1:
				return afloat.Chunk{FinishReason: "stop"}, nil
			}
			return afloat.Chunk{}, &afloat.ProviderError{Provider: "p0", Kind: afloat.Unavailable, Err: syscall.ECONNRESET}
		}}
		cont := &streamer{recv: words(" there")}
		_, r := continuing(t, done, cont)
		var c collector
		rep, err := r.Stream(context.Background(), hi, c.emit)
		if err != nil || c.text.String() != "Hi" || cont.calls.Load() != 0 || rep.Provider != "p0" {
			t.Fatalf("err %v, client read %q, continuations %d", err, c.text.String(), cont.calls.Load())
		}
	})
	t.Run("continuation cut too", func(t *testing.T) {
		cont := &streamer{recv: cutAfter(" wor")}
		_, r := continuing(t, &streamer{recv: cutAfter("Hel", "lo")}, cont)
		var c collector
		rep, err := r.Stream(context.Background(), hi, c.emit)
		var se *StreamError
		if !errors.As(err, &se) || se.Provider != "p1" || rep.Provider != "p1" || rep.Response.Content != "Hello wor" {
			t.Fatalf("err %v, reply from %s with %q; want a StreamError of p1 over \"Hello wor\"", err, rep.Provider, rep.Response.Content)
		}
	})
}

// TestHealthySaturationOpensNoBreaker: 64 callers for a minute against two healthy providers:
// the primary (capped at 16 in flight, so that the overflow goes to the backup) answers in
// 0.6–1.1 s, a third of its answers off the contract (re-asked, which squeezes what is left of
// the 1.5 s budget); the backup answers in 300–900 ms. Whatever the budget cuts, no breaker
// opens (before, the backup's squeezed attempts counted as its timeouts and opened it).
func TestHealthySaturationOpensNoBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		jittered := func(seed uint64, lo, hi int, offContract int) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(seed, seed))
			return func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
				mu.Lock()
				d := time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond
				bad := offContract > 0 && rng.IntN(offContract) == 0
				mu.Unlock()
				text := validAnswer
				if bad {
					text = "Sorry, I cannot classify this ticket."
				}
				return after(d, answer(text))(ctx, req, n)
			}
		}
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			c.Providers[0].MaxInFlight = 16
		}, jittered(1, 600, 1100, 3), jittered(2, 300, 900, 0))
		task := fx.task(t, nil)
		var wg sync.WaitGroup
		var cut, ok atomic.Int64
		end := time.Now().Add(time.Minute)
		for range 64 {
			wg.Go(func() {
				for time.Now().Before(end) {
					res, err := task.RunJSON(context.Background(), ticket)
					if err != nil {
						t.Error(err)
						return
					}
					for _, a := range res.Attempts {
						switch a.Outcome {
						case afloat.OutcomeDeadline:
							cut.Add(1)
						case afloat.OutcomeOK:
							ok.Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		t.Logf("a minute of saturation: %d answered attempts, %d cut or skipped by the budget", ok.Load(), cut.Load())
		for _, p := range []string{"p0", "p1"} {
			if n := opened(fx, p); n != 0 {
				t.Errorf("healthy %s's breaker opened %v times under saturation", p, n)
			}
		}
	})
}

// TestBudgetSpentBeforeTheCallGoesToThePolicy: a call whose context's deadline passed before
// it began (its budget spent waiting, as for a turn) is answered by its policy at once,
// reason deadline, with no tier asked; a call whose caller left (cancelled) returns the
// context's error.
func TestBudgetSpentBeforeTheCallGoesToThePolicy(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	task := fx.task(t, nil)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	res, err := task.RunJSON(expired, ticket)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != afloat.SourceHeuristic || res.Reason != afloat.Reason(afloat.OutcomeDeadline) || fx.fakes["p0"].calls.Load() != 0 {
		t.Errorf("source %s, reason %s, p0 called %d times; want the heuristic, reason deadline, no call", res.Source, res.Reason, fx.fakes["p0"].calls.Load())
	}
	left, leave := context.WithCancel(context.Background())
	leave()
	if _, err := task.RunJSON(left, ticket); !errors.Is(err, context.Canceled) {
		t.Errorf("a call whose caller left: %v; want context.Canceled", err)
	}
}
