package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/shed"
)

// TestShedByCriticality: with the process saturated, an enrichment task is answered at once
// by its heuristic (reason shed, no attempt) while a critical one still calls its providers;
// overloaded, an assistance route fails with ErrShed. No provider is blamed for either.
func TestShedByCriticality(t *testing.T) {
	var pressure time.Duration
	fx := newFixture(t, func(c *Config) { c.Shed = shed.New(10*time.Millisecond, func() time.Duration { return pressure }) },
		answer(validAnswer), answer(validAnswer))
	enrich := fx.task(t, nil)
	critical := fx.task(t, func(c *TaskConfig) { c.Name, c.Criticality = "moderation", afloat.Critical })
	route, err := fx.eng.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance, Cascade: []RouteTier{{Provider: "p0"}, {Provider: "p1"}}})
	if err != nil {
		t.Fatal(err)
	}
	chat := &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hi"}}}

	pressure = 15 * time.Millisecond // saturated: enrichment is shed
	res, err := enrich.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != afloat.SourceHeuristic || !res.Degraded || res.Reason != afloat.ReasonShed || len(res.Attempts) != 0 {
		t.Errorf("shed enrichment: source %s degraded %v reason %q attempts %v; want the heuristic, degraded, reason shed, no attempt",
			res.Source, res.Degraded, res.Reason, res.Attempts)
	}
	if res, err := critical.RunJSON(context.Background(), ticket); err != nil || res.Source != afloat.SourceModel {
		t.Errorf("critical while saturated: %v, %v; want a model's answer: critical calls are never shed", res.Source, err)
	}
	if rep, err := route.Complete(context.Background(), chat); err != nil || rep.Source != afloat.SourceModel {
		t.Errorf("assistance route while saturated: %v; want it served: only enrichment is shed at this level", err)
	}

	pressure = 25 * time.Millisecond // overloaded: assistance is shed too
	rep, err := route.Complete(context.Background(), chat)
	if !errors.Is(err, ErrShed) || !errors.Is(err, ErrExhausted) || rep == nil || rep.Reason != afloat.ReasonShed {
		t.Errorf("overloaded route: %v (reply %+v); want ErrShed, an ErrExhausted with reason shed", err, rep)
	}
	if res, err := critical.RunJSON(context.Background(), ticket); err != nil || res.Source != afloat.SourceModel {
		t.Errorf("critical while overloaded: %v, %v; want a model's answer", res.Source, err)
	}
	if got := testutil.ToFloat64(fx.eng.Metrics().Shed.WithLabelValues("triage")); got != 1 {
		t.Errorf("afloat_shed_total{task=triage} %v; want 1", got)
	}
	if got := testutil.ToFloat64(fx.eng.Metrics().Shed.WithLabelValues("chat")); got != 1 {
		t.Errorf("afloat_shed_total{task=chat} %v; want 1", got)
	}
	if calls := fx.fakes["p0"].calls.Load(); calls != 3 {
		t.Errorf("p0 got %d calls; want 3 (critical twice, the route once): a shed call asks no provider", calls)
	}
	if got := opened(fx, "p0"); got != 0 {
		t.Errorf("p0's breaker opened: a shed call is no provider failure")
	}
}

// TestSaturationBlamesNoProvider: while afloat itself is saturated, an attempt cut by its
// timeout is afloat's queueing as much as the provider's: outcome deadline, and ten of them
// in a row do not open the breaker (five would, blamed).
func TestSaturationBlamesNoProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pressure := 15 * time.Millisecond // saturated: enrichment shed, critical served
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			c.Shed = shed.New(10*time.Millisecond, func() time.Duration { return pressure })
		}, after(time.Minute, answer(validAnswer)), answer(validAnswer))
		critical := fx.task(t, func(c *TaskConfig) { c.Name, c.Criticality, c.Budget = "moderation", afloat.Critical, 5*time.Second })
		for range 10 {
			res, err := critical.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Attempts) == 0 || res.Attempts[0].Outcome != afloat.OutcomeDeadline || res.Attempts[0].Error != "cut while afloat itself was saturated" {
				t.Fatalf("attempts %+v; want p0 cut while afloat was saturated (deadline)", res.Attempts)
			}
		}
		if got := opened(fx, "p0"); got != 0 {
			t.Errorf("p0's breaker opened %v times while afloat was saturated; want 0", got)
		}
	})
}

// TestSaturationBlamesNoConnectTimeout: a timeout of the provider's client itself (a connect
// that timed out after a second) while afloat is saturated moves no breaker either: the
// connection may have been made while afloat's goroutines waited to run. The same timeouts in
// a process at ease are the provider's, and its breaker opens.
func TestSaturationBlamesNoConnectTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pressure := 2 * time.Second
		connectTimeout := func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
			time.Sleep(time.Second)
			return nil, &afloat.ProviderError{Provider: "p0", Kind: afloat.Unavailable, Timeout: true, Err: errors.New("dial tcp: i/o timeout")}
		}
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			c.Shed = shed.New(0, func() time.Duration { return pressure }) // shedding off, the pressure still read
		}, connectTimeout, answer(validAnswer))
		task := fx.task(t, func(c *TaskConfig) { c.Budget = 5 * time.Second })
		for range 10 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if a := res.Attempts[0]; a.Outcome != afloat.OutcomeDeadline || !strings.HasPrefix(a.Error, "timed out while afloat itself was saturated") {
				t.Fatalf("attempts %+v; want p0's connect timeout read as afloat's saturation (deadline)", res.Attempts)
			}
		}
		if got := opened(fx, "p0"); got != 0 {
			t.Errorf("p0's breaker opened %v times on connect timeouts while afloat was saturated; want 0", got)
		}
		pressure = time.Millisecond
		for range 10 {
			if _, err := task.RunJSON(context.Background(), ticket); err != nil {
				t.Fatal(err)
			}
		}
		if got := opened(fx, "p0"); got != 1 {
			t.Errorf("p0's breaker opened %v times on connect timeouts in a process at ease; want 1", got)
		}
	})
}

// TestSaturationLengthensAnAttemptsPatience: while afloat itself is saturated, an attempt may
// wait up to the longest read timeout, within its budget: a provider that answers in 3s, past
// its 2s read timeout, still answers a critical call; unsaturated, the attempt is cut at 2s
// and the backup answers.
func TestSaturationLengthensAnAttemptsPatience(t *testing.T) {
	for _, saturated := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			pressure := time.Duration(0)
			if saturated {
				pressure = 15 * time.Millisecond // enrichment shed, critical served
			}
			fx := newFixture(t, func(c *Config) {
				realClock(c)
				c.Shed = shed.New(10*time.Millisecond, func() time.Duration { return pressure })
			}, after(3*time.Second, answer(validAnswer)), answer(validAnswer))
			critical := fx.task(t, func(c *TaskConfig) { c.Name, c.Criticality, c.Budget = "moderation", afloat.Critical, 8*time.Second })
			res, err := critical.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case saturated && (res.Provider != "p0" || res.Degraded):
				t.Fatalf("saturated: answered by %s, degraded %v, attempts %+v; want p0 waited for", res.Provider, res.Degraded, res.Attempts)
			case !saturated && (res.Provider != "p1" || res.Attempts[0].Outcome != afloat.OutcomeTimeout):
				t.Fatalf("not saturated: answered by %s, attempts %+v; want p0 cut at its read timeout, p1's answer", res.Provider, res.Attempts)
			}
		})
	}
}

// TestSaturationWithSheddingOff: with shedding off, afloat's own saturation is still never
// blamed on a provider: goroutines waiting to run for a quarter of an attempt's timeout or
// more make a cut afloat's, not the provider's.
func TestSaturationWithSheddingOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pressure := 1500 * time.Millisecond // three quarters of the 2s read timeout
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			c.Shed = shed.New(0, func() time.Duration { return pressure }) // shedding off
		}, after(time.Minute, answer(validAnswer)), answer(validAnswer))
		task := fx.task(t, func(c *TaskConfig) { c.Budget = 3 * time.Second }) // the attempt's patience: under 3s
		for range 10 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason == afloat.ReasonShed || res.Attempts[0].Outcome != afloat.OutcomeDeadline {
				t.Fatalf("reason %s, attempts %+v; want nothing shed and p0 cut while afloat was saturated", res.Reason, res.Attempts)
			}
		}
		if got := opened(fx, "p0"); got != 0 {
			t.Errorf("p0's breaker opened %v times while afloat was saturated, shedding off; want 0", got)
		}
		pressure = time.Millisecond // the process is fine: the next cuts are the provider's
		for range 5 {
			if _, err := task.RunJSON(context.Background(), ticket); err != nil {
				t.Fatal(err)
			}
		}
		if got := opened(fx, "p0"); got != 1 {
			t.Errorf("p0's breaker opened %v times after five timeouts of its own; want 1", got)
		}
	})
}

// TestModerateLoadStillBlamesAHangingProvider: a process moderately loaded (goroutines wait
// 20 ms to run, a tenth of a 200 ms read timeout) is not saturated: a provider that hangs is
// cut at its read timeout and blamed, its breaker opens, and the calls after it fail fast.
func TestModerateLoadStillBlamesAHangingProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			c.Shed = shed.New(0, func() time.Duration { return 20 * time.Millisecond })
			c.Providers[0].Timeouts = latency.Config{Min: 200 * time.Millisecond, Initial: 200 * time.Millisecond}
		}, hang, answer(validAnswer))
		task := fx.task(t, func(c *TaskConfig) {
			c.Criticality, c.OnExhausted, c.Name, c.Budget = afloat.Critical, PolicyBlock, "moderation", 5*time.Second
		})
		var last afloat.Result[json.RawMessage]
		for range 30 {
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			last = res
		}
		if got := opened(fx, "p0"); got != 1 {
			t.Fatalf("p0's breaker opened %v times; want once: its hangs are its own", got)
		}
		if last.Attempts[0].Outcome != afloat.OutcomeCircuitOpen || last.Latency > time.Second {
			t.Fatalf("the last call: %+v in %v; want p0 skipped, fast", last.Attempts, last.Latency)
		}
	})
}

// TestSaturationLeavesTheConcurrencyLimit: answers and streams' first chunks slowed from
// 1 ms to 180 ms while afloat's goroutines wait 30 ms to run (afloat's own queueing may be
// the rise) say nothing of the provider: its concurrency limit holds, and no call is refused
// a slot; the same slowdown in a process at ease lowers it.
func TestSaturationLeavesTheConcurrencyLimit(t *testing.T) {
	for _, c := range []struct {
		name     string
		pressure time.Duration
		falls    bool
	}{{"saturated", 30 * time.Millisecond, false}, {"at ease", 0, true}} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streamed=%v", c.name, streamed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { saturatedLimit(t, c.pressure, streamed, c.falls) })
			})
		}
	}
}

func saturatedLimit(t *testing.T, pressure time.Duration, streamed, falls bool) {
	var slow atomic.Bool
	wait := func() {
		if slow.Load() {
			time.Sleep(180 * time.Millisecond) // under the 200 ms shortest read timeout: no cut
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	p := &streamer{
		complete: func(context.Context, *afloat.Request) (*afloat.Response, error) {
			wait()
			return &afloat.Response{Content: "Hello"}, nil
		},
		recv: func(_ context.Context, n int) (afloat.Chunk, error) {
			if n == 0 {
				wait()
				return afloat.Chunk{Delta: "Hello"}, nil
			}
			return afloat.Chunk{}, io.EOF
		},
	}
	var now atomic.Int64 // the pressure, read by the shedder
	e, err := New(Config{
		Providers: []ProviderConfig{{Name: "p0", Provider: p, Retry: RetryConfig{Max: -1}, MaxInFlight: 100}},
		Shed:      shed.New(0, func() time.Duration { return time.Duration(now.Load()) }), // shedding off
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance, Budget: time.Minute, Cascade: []RouteTier{{Provider: "p0"}}})
	if err != nil {
		t.Fatal(err)
	}
	lim := e.upstreams["p0"].lim
	var failed atomic.Int64
	rounds := func(n int) {
		for range n { // 60 calls at once: more than half the limit, so a window is evidence
			var wg sync.WaitGroup
			for range 60 {
				wg.Go(func() {
					var err error
					if streamed {
						_, err = r.Stream(context.Background(), hi, func(string, int, afloat.Chunk) error { return nil })
					} else {
						_, err = r.Complete(context.Background(), hi)
					}
					if err != nil {
						failed.Add(1)
					}
				})
			}
			wg.Wait()
		}
	}
	rounds(50) // the long run: 1 ms, the process at ease
	before := lim.Limit()
	slow.Store(true)
	now.Store(int64(pressure))
	rounds(20)
	if fell := lim.Limit() < before; fell != falls {
		t.Errorf("answers 1 ms → 180 ms with goroutines waiting %v to run: limit %d → %d; want it to fall: %v", pressure, before, lim.Limit(), falls)
	}
	if !falls && failed.Load() > 0 {
		t.Errorf("%d calls failed; want none", failed.Load())
	}
}
