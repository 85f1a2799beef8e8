package cascade

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/limit"
)

// longTail answers like then: one call in twenty after 3 s, the others after 80 to 120 ms.
func longTail(then func(context.Context, *afloat.Request, int) (*afloat.Response, error)) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
		d := 80*time.Millisecond + time.Duration(n*7%41)*time.Millisecond
		if n%20 == 19 {
			d = 3 * time.Second
		}
		return after(d, then)(ctx, req, n)
	}
}

// latencies runs n calls of task in turn and returns their latencies, sorted, with the
// attempts of every call.
func latencies(t *testing.T, task *Task, n int) ([]time.Duration, [][]afloat.Attempt) {
	t.Helper()
	var out []time.Duration
	var attempts [][]afloat.Attempt
	for range n {
		start := time.Now()
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != afloat.SourceModel {
			t.Fatalf("a call was not answered by a model: %+v", res)
		}
		out = append(out, time.Since(start))
		attempts = append(attempts, res.Attempts)
	}
	slices.Sort(out)
	return out, attempts
}

func pct(sorted []time.Duration, p int) time.Duration { return sorted[(len(sorted)*p+99)/100-1] }

// TestHedgingCutsTheTail: a primary whose every twentieth call takes 3 s instead of 100 ms,
// a backup that answers in 100 ms. Without hedging the p99 is the 3 s tail; hedged at the
// primary's p95, the slow calls are answered by the backup about 100 ms after the hedge, the
// primary's attempt cancelled, and the hedges stay within the retry budget.
func TestHedgingCutsTheTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The read timeout waits the tail out (min 5 s): what hedging cuts here, nothing else does.
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			c.Providers[0].Timeouts = latency.Config{Min: 5 * time.Second, Max: 10 * time.Second}
		}, longTail(answer(validAnswer)), after(100*time.Millisecond, answer(validAnswer)))
		plain := fx.task(t, func(c *TaskConfig) { c.Name, c.Budget = "plain", 10*time.Second })
		hedged := fx.task(t, func(c *TaskConfig) { c.Name, c.Budget, c.Hedge = "hedged", 10*time.Second, Hedge{P95: true, Max: 1} })
		const n = 1000
		without, _ := latencies(t, plain, n)
		p1Before := fx.fakes["p1"].calls.Load()
		with, attempts := latencies(t, hedged, n)
		extra := fx.fakes["p1"].calls.Load() - p1Before

		p95, p99, hp99 := pct(without, 95), pct(without, 99), pct(with, 99)
		t.Logf("without hedging: p50 %s p95 %s p99 %s; with: p50 %s p95 %s p99 %s (%.2f× the p95 without); %d hedges in %d calls",
			pct(without, 50), p95, p99, pct(with, 50), pct(with, 95), hp99, float64(hp99)/float64(p95), extra, n)
		if p99 < 3*time.Second {
			t.Fatalf("p99 without hedging %s; the fixture's tail is 3 s", p99)
		}
		// The hedge goes out at the primary's p95 (about 100 ms) and the backup takes 100 ms.
		if hp99 > 2*p95+20*time.Millisecond {
			t.Errorf("p99 with hedging %s; want at most the p95 without (%s) plus the backup's 100 ms", hp99, p95)
		}
		if budget := int64(0.2 * n); extra > budget {
			t.Errorf("%d hedges in %d calls; the retry budget allows %d", extra, n, budget)
		}
		if extra < n/20*9/10 {
			t.Errorf("%d hedges; want about one for each of the %d slow calls", extra, n/20)
		}
		if got := testutil.ToFloat64(fx.eng.Metrics().Hedges.WithLabelValues("hedged", "p0")); got != float64(extra) {
			t.Errorf("afloat_hedges_total %v; want %d, the backup's extra calls", got, extra)
		}
		// A hedged call shows both attempts: one answered, the other cancelled by the hedge.
		// Every slow call was answered by the backup.
		byBackup := 0
		for _, as := range attempts {
			if len(as) == 2 {
				ok, lost := 0, 0
				for _, a := range as {
					switch {
					case a.Outcome == afloat.OutcomeOK:
						ok++
					case a.Outcome == afloat.OutcomeDeadline && a.Error == errHedgeLost.Error():
						lost++
					}
				}
				if ok != 1 || lost != 1 || as[0].Provider != "p0" || as[1].Provider != "p1" {
					t.Errorf("a hedged call's attempts: %+v; want p0's then p1's, one answered, the other cancelled by the hedge", as)
				}
				if as[1].Outcome == afloat.OutcomeOK {
					byBackup++
				}
			}
		}
		if byBackup < n/20-1 {
			// The first slow call comes before the primary's p95 is measured: it is not hedged.
			t.Errorf("%d calls answered by the backup; want at least the %d slow ones but the first", byBackup, n/20-1)
		}
		// The cancelled attempts never counted against the primary.
		if got := opened(fx, "p0"); got != 0 {
			t.Errorf("p0's breaker opened %v times; a hedge's cancel is no failure", got)
		}
	})
}

// TestHedgePrimaryMayStillWin: when the primary answers after the hedge went out but
// before the backup, the primary's answer wins and the backup's attempt is the one cancelled.
func TestHedgePrimaryMayStillWin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock, after(150*time.Millisecond, answer(validAnswer)), after(time.Second, answer(validAnswer)))
		task := fx.task(t, func(c *TaskConfig) { c.Budget, c.Hedge = 5*time.Second, Hedge{After: 100 * time.Millisecond, Max: 1} })
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Provider != "p0" || res.Degraded {
			t.Fatalf("answered by %s (degraded %v); want p0, which answered first", res.Provider, res.Degraded)
		}
		if len(res.Attempts) != 2 || res.Attempts[1].Provider != "p1" || res.Attempts[1].Error != errHedgeLost.Error() {
			t.Errorf("attempts %+v; want p0 ok, then p1 cancelled by the hedge", res.Attempts)
		}
		if res.Latency != 150*time.Millisecond {
			t.Errorf("latency %s; want the primary's 150ms", res.Latency)
		}
	})
}

// TestHedgeLoserThatAnsweredIsWastedInSpend: the hedge goes out at 100 ms and both answer at
// 150 ms: the answer not used is wasted in the task's Spend as in afloat_wasted_cost_total
// (Spend counted it as used while the metric counted it wasted).
func TestHedgeLoserThatAnsweredIsWastedInSpend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock, after(150*time.Millisecond, answer(validAnswer)), after(50*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, func(c *TaskConfig) { c.Budget, c.Hedge = 5*time.Second, Hedge{After: 100 * time.Millisecond, Max: 1} })
		if _, err := task.RunJSON(context.Background(), ticket); err != nil {
			t.Fatal(err)
		}
		metric := 0.0
		for _, p := range []string{"p0", "p1"} {
			metric += testutil.ToFloat64(fx.eng.Metrics().WastedCost.WithLabelValues(p, "triage"))
		}
		sp := task.Spend()
		if metric <= 0 || sp.Wasted != metric || sp.Total != 2*metric {
			t.Errorf("spend %+v, wasted metric %v; want one of the two answers wasted in both", sp, metric)
		}
	})
}

// TestAbandonedHedgeAskIsCounted: the primary's ask, cancelled because the hedge answered
// first, costs its prompt (the provider had it): estimated, it is in afloat_cost_total, as
// wasted in afloat_wasted_cost_total and the task's Spend, and in the envelope's usage.
func TestAbandonedHedgeAskIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock, after(time.Second, answer(validAnswer)), after(50*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, func(c *TaskConfig) { c.Budget, c.Hedge = 5*time.Second, Hedge{After: 100 * time.Millisecond, Max: 1} })
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Provider != "p1" {
			t.Fatalf("answered by %q; want the hedge, p1", res.Provider)
		}
		prompt := estimateUsage(fx.fakes["p0"].reqs[0], nil)
		if prompt.InputTokens == 0 || prompt.OutputTokens != 0 {
			t.Fatalf("estimate of the prompt %+v; want its input tokens only", prompt)
		}
		want := float64(prompt.InputTokens) / 1e6 // p0's input price: 1 a million
		cost := testutil.ToFloat64(fx.eng.Metrics().Cost.WithLabelValues("p0", "triage"))
		wasted := testutil.ToFloat64(fx.eng.Metrics().WastedCost.WithLabelValues("p0", "triage"))
		if cost != want || wasted != want {
			t.Errorf("p0's cost %v and wasted %v; want both the prompt's estimate %v", cost, wasted, want)
		}
		answerCost := (100*1 + 20*2) / 1e6
		if sp := task.Spend(); sp.Wasted != want || sp.Total != want+answerCost || sp.Answers != 1 {
			t.Errorf("spend %+v; want total %v (the answer and the abandoned prompt), wasted %v, 1 answer", sp, want+answerCost, want)
		}
		if res.Usage.InputTokens != 100+prompt.InputTokens || res.Usage.Cost != want+answerCost {
			t.Errorf("envelope usage %+v; want the answer's and the abandoned ask's", res.Usage)
		}
	})
}

// TestHedgeRefusedAtItsGateTakesNothing: a hedge whose tier does not admit it (here the
// backup's one bulkhead slot is taken, and the primary answers while the hedge waits for it)
// goes out to no provider: it is not counted in afloat_hedges_total and takes nothing from
// the retry budget.
func TestHedgeRefusedAtItsGateTakesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, func(c *Config) { realClock(c); c.Providers[1].MaxInFlight = 1 },
			after(300*time.Millisecond, answer(validAnswer)), answer(validAnswer))
		task := fx.task(t, func(c *TaskConfig) { c.Budget, c.Hedge = 5*time.Second, Hedge{After: 100 * time.Millisecond, Max: 1} })
		slot, err := fx.eng.upstreams["p1"].lim.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer slot.Release(limit.Ignore)
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Provider != "p0" || fx.fakes["p1"].calls.Load() != 0 {
			t.Fatalf("answered by %q, p1 called %d times; want p0, and the hedge still waiting for p1's slot (attempts %+v)",
				res.Provider, fx.fakes["p1"].calls.Load(), res.Attempts)
		}
		if !slices.ContainsFunc(res.Attempts, func(a afloat.Attempt) bool { return a.Provider == "p1" && a.Outcome == afloat.OutcomeDeadline }) {
			t.Fatalf("attempts %+v; want the hedge's, on p1, ended in the queue (deadline)", res.Attempts)
		}
		if n := testutil.ToFloat64(fx.eng.Metrics().Hedges.WithLabelValues("triage", "p0")); n != 0 {
			t.Errorf("afloat_hedges_total %v; want 0: no hedge went out", n)
		}
		b := fx.eng.upstreams["p0"].budget
		b.mu.Lock()
		taken := 0
		for _, r := range b.retries {
			taken += r
		}
		b.mu.Unlock()
		if taken != 0 {
			t.Errorf("%d retries taken from p0's budget; want the refused hedge's given back", taken)
		}
	})
}

// TestHedgeBothFailGoesOn: both the primary and its hedge fail: the cascade goes on to the
// third tier.
func TestHedgeBothFailGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock, after(200*time.Millisecond, failWith(500, afloat.Unavailable)),
			after(50*time.Millisecond, failWith(500, afloat.Unavailable)), answer(validAnswer))
		task := fx.task(t, func(c *TaskConfig) { c.Budget, c.Hedge = 5*time.Second, Hedge{After: 100 * time.Millisecond, Max: 1} })
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Provider != "p2" {
			t.Fatalf("answered by %q; want p2 after both hedged tiers failed (attempts %+v)", res.Provider, res.Attempts)
		}
	})
}

// TestHedgeWonIsDegradedWithAReason: the hedge answered: degraded, and the reason is the
// first tier's outcome (its attempt cancelled: deadline), as for any lower tier's answer.
func TestHedgeWonIsDegradedWithAReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, realClock, after(time.Second, answer(validAnswer)), after(50*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, func(c *TaskConfig) { c.Budget, c.Hedge = 5*time.Second, Hedge{After: 100 * time.Millisecond, Max: 1} })
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Provider != "p1" || !res.Degraded || res.Reason != afloat.Reason(afloat.OutcomeDeadline) {
			t.Errorf("answered by %s, degraded %v, reason %q; want p1, degraded, reason deadline", res.Provider, res.Degraded, res.Reason)
		}
		if res.Latency != 150*time.Millisecond {
			t.Errorf("latency %s; want the hedge's 100ms delay plus p1's 50ms", res.Latency)
		}
	})
}

// TestHedgedProviderPanicReachesTheCaller: a provider that panics in a hedged ask panics on
// the caller's goroutine, where the gateway recovers it, not in a goroutine of the hedge's.
func TestHedgedProviderPanicReachesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := func(context.Context, *afloat.Request, int) (*afloat.Response, error) { panic("provider bug") }
		fx := newFixture(t, realClock, after(200*time.Millisecond, boom), after(time.Second, answer(validAnswer)))
		task := fx.task(t, func(c *TaskConfig) { c.Budget, c.Hedge = 5*time.Second, Hedge{After: 100 * time.Millisecond, Max: 1} })
		defer func() {
			if v := recover(); v != "provider bug" {
				t.Errorf("recovered %v; want the provider's panic on the caller's goroutine", v)
			}
			if n := fx.eng.InFlight("p0") + fx.eng.InFlight("p1"); n != 0 {
				t.Errorf("%d slots held after the panic; want every slot returned", n)
			}
		}()
		_, _ = task.RunJSON(context.Background(), ticket)
		t.Error("RunJSON returned; want the panic")
	})
}
