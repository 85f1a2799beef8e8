package cascade

// Who is to blame for a cut: scenarios found by review of the attempt core.

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/latency"
)

// A hung backup opens behind a primary that fails by contract violation (re-asked) after
// 0–300 ms: the backup had more than its fair time.
func TestHungBackupOpensWhateverThePrimaryTook(t *testing.T) {
	for _, d := range []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fx := newFixture(t, realClock, after(d, answer(`not json at all`)), hang)
				task := fx.task(t, nil)
				var slow int
				for range 50 {
					res, err := task.RunJSON(context.Background(), ticket)
					if err != nil {
						t.Fatal(err)
					}
					if res.Latency >= 1400*time.Millisecond {
						slow++
					}
				}
				last, _ := task.RunJSON(context.Background(), ticket)
				if opened(fx, "p1") == 0 || slow > 10 || last.Attempts[len(last.Attempts)-1].Outcome != afloat.OutcomeCircuitOpen {
					t.Errorf("tier 0 after %v: p1 opened %v times; %d of 50 calls waited the whole budget; last %+v", d, opened(fx, "p1"), slow, last.Attempts)
				}
			})
		})
	}
}

// A healthy primary (200–600 ms) under callers whose deadline (1 s) is shorter than the task
// budget (1.5 s), the backup's p95 700 ms: no cut below its p95 is blamed on it, and its
// estimate does not ratchet down.
func TestCallerDeadlineDoesNotOpenAHealthyPrimary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lat := []time.Duration{200, 300, 400, 500, 600}
		p0 := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			return after(lat[n%len(lat)]*time.Millisecond, answer(validAnswer))(ctx, req, n)
		}
		fx := newFixture(t, realClock, p0, after(700*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		warm(task, 1, 700*time.Millisecond)
		for range 100 {
			if res, _ := task.RunJSON(context.Background(), ticket); res.Provider != "p0" {
				t.Fatalf("warm-up %+v", res.Attempts)
			}
		}
		m0, _ := task.tiers[0].est.Median()
		timeouts := 0
		src := map[string]int{}
		for range 400 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			res, _ := task.RunJSON(ctx, ticket)
			cancel()
			if res.Attempts[0].Outcome == afloat.OutcomeTimeout {
				timeouts++
			}
			src[string(res.Source)+"/"+res.Provider]++
		}
		m1, _ := task.tiers[0].est.Median()
		if opened(fx, "p0") != 0 || timeouts != 0 || m1 < m0*95/100 {
			t.Errorf("p0 median %v → %v; %d p0 attempts counted as timeouts; p0 opened %v times", m0, m1, timeouts, opened(fx, "p0"))
		}
	})
}

// A hanging provider's half-open probe under a caller deadline shorter than the budget
// fails and reopens the breaker, instead of being cancelled and leaving it half-open for
// every next call to pay.
func TestHangingProbeReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock, hang)
		task := fx.task(t, nil)
		br := fx.eng.Breaker("p0")
		if err := br.Force(context.Background(), breaker.StateHalfOpen); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 1400*time.Millisecond)
			_, _ = task.RunJSON(ctx, ticket)
			cancel()
		}
		if st := br.State(context.Background()); st != breaker.StateOpen {
			t.Errorf("state %v after 5 hanging probes, want open", st)
		}
	})
}

// A stream that always stalls after its first chunk, on a route whose budget (1.5 s) is
// shorter than the stream's idle timeout: the stall lasted more than its fair time, so it
// opens the breaker.
func TestStalledStreamOpensTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stall := &streamer{recv: func(ctx context.Context, n int) (afloat.Chunk, error) {
			if n == 0 {
				return afloat.Chunk{Delta: "Hello"}, nil
			}
			<-ctx.Done()
			return afloat.Chunk{}, &afloat.ProviderError{Provider: "p0", Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
		}}
		e, err := New(Config{Providers: []ProviderConfig{{Name: "p0", Provider: stall}}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance, Budget: 1500 * time.Millisecond, Cascade: []RouteTier{{Provider: "p0"}}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			var c collector
			if _, err := r.Stream(context.Background(), hi, c.emit); i == 0 && err == nil {
				t.Fatal("a stalled stream ended cleanly")
			}
		}
		if st := e.Breaker("p0").State(context.Background()); st != breaker.StateOpen {
			t.Errorf("p0 %v after 30 stalled streams, want open", st)
		}
	})
}

// Real clock: the gateway turns budget_ms into a deadline before RunJSON sets the task's
// budget; a budget_ms equal to the task's is shorter by the nanoseconds between, which must
// not make a hung provider's cuts the caller's.
func TestEqualCallerDeadlineStillBlamesAHungProvider(t *testing.T) {
	for _, withBudgetMS := range []bool{false, true} {
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			c.Providers[0].Timeouts.Min = 10 * time.Millisecond
			c.Providers[0].Timeouts.Initial = 100 * time.Millisecond
		}, hang)
		task := fx.task(t, func(tc *TaskConfig) { tc.Budget = 50 * time.Millisecond })
		for range 6 {
			ctx := context.Background()
			cancel := func() {}
			if withBudgetMS {
				ctx, cancel = latency.WithBudget(ctx, nil, 50*time.Millisecond)
			}
			task.RunJSON(ctx, ticket)
			cancel()
		}
		if n := opened(fx, "p0"); n != 1 {
			t.Errorf("caller deadline sent %v: the hung provider's breaker opened %v times, want 1", withBudgetMS, n)
		}
	}
}

// A healthy primary answering in 700–1100 ms (median 900) with a 1.5 s budget and a backup
// whose p95 is 700 ms: capping the primary for the reserve would leave the backup less than
// its median anyway, so the primary is not cut, and answers every call.
func TestReserveDoesNotCutAHealthyPrimaryForNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lat := []time.Duration{700, 800, 900, 1000, 1100}
		p0 := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			return after(lat[n%len(lat)]*time.Millisecond, answer(validAnswer))(ctx, req, n)
		}
		fx := newFixture(t, realClock, p0, after(700*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		for range 100 { // warm p0 alone: the backup is unmeasured (reserve = its Min, 200ms)
			task.RunJSON(context.Background(), ticket)
		}
		warm(task, 1, 700*time.Millisecond)
		src := map[string]int{}
		for range 300 {
			res, _ := task.RunJSON(context.Background(), ticket)
			src[string(res.Source)+"/"+res.Provider]++
		}
		m, _ := task.tiers[0].est.Median()
		if opened(fx, "p0") != 0 || src["model/p0"] != 300 || m < 850*time.Millisecond {
			t.Errorf("sources %v; p0 opened %v; p0 median now %v, want 300 from p0 at a median of 900ms", src, opened(fx, "p0"), m)
		}
	})
}
