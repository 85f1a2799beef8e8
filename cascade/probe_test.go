package cascade

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/jonboulle/clockwork"
)

// The tests in this file run inside testing/synctest bubbles over the fixture's fake clock:
// after each Advance, synctest.Wait lets the probe that a timer started run to its end, and
// the bubble fails a test that leaves a goroutine blocked behind it.

var errDown = &afloat.ProviderError{Provider: "fake", Status: 503, Kind: afloat.Unavailable}

// probed is a fake with a models probe (afloat.Prober) scripted by a function of the probe
// number (from 0). It records when each probe was made.
type probed struct {
	*fake
	clock clockwork.Clock
	fn    func(ctx context.Context, n int) error
	mu    sync.Mutex
	at    []time.Time
}

func (p *probed) Probe(ctx context.Context) error {
	p.mu.Lock()
	n := len(p.at)
	p.at = append(p.at, p.clock.Now())
	p.mu.Unlock()
	return p.fn(ctx, n)
}

// probes returns the times of the probes so far, as offsets from t0.
func (p *probed) probes(t0 time.Time) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Duration
	for _, at := range p.at {
		out = append(out, at.Sub(t0))
	}
	return out
}

// events records a breaker's changes of state.
type events struct {
	mu   sync.Mutex
	list []breaker.Event
}

func (r *events) add(ev breaker.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, ev)
}

// first returns the first event to state to, and whether there was one.
func (r *events) first(to breaker.State) (breaker.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.list {
		if ev.To == to {
			return ev, true
		}
	}
	return breaker.Event{}, false
}

// syncBuffer is a log sink safe for the probe's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type probeFixture struct {
	*fixture
	t0     time.Time
	probed map[string]*probed // the providers with a models probe
	events map[string]*events
	logs   *syncBuffer
}

// newProbeFixture builds a fixture over fns whose provider i has the models probe probes[i]
// (none when nil or beyond probes); each is probed in the background in mode (ProbeModels:
// those with a models probe only). Open periods are
// not jittered and retries are off, so that the schedule is the breaker's alone: 10s, then
// 15s, 22.5s, 33.75s after failed probes.
func newProbeFixture(t *testing.T, mode ProbeMode, probes []func(context.Context, int) error, mod func(*Config), fns ...func(context.Context, *afloat.Request, int) (*afloat.Response, error)) *probeFixture {
	t.Helper()
	pf := &probeFixture{probed: map[string]*probed{}, events: map[string]*events{}, logs: new(syncBuffer)}
	pf.fixture = newFixture(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(pf.logs, nil))
		for i := range c.Providers {
			pc := &c.Providers[i]
			hasProbe := i < len(probes) && probes[i] != nil
			if mode != ProbeModels || hasProbe {
				pc.Probe = mode
			}
			pc.Retry.Max = -1
			pc.Breaker.Rand = func() float64 { return 0.5 }
			ev := new(events)
			pf.events[pc.Name] = ev
			pc.Breaker.OnStateChange = ev.add
			if hasProbe {
				p := &probed{fake: pc.Provider.(*fake), clock: c.Clock, fn: probes[i]}
				pf.probed[pc.Name] = p
				pc.Provider = p
			}
		}
		if mod != nil {
			mod(c)
		}
	}, fns...)
	pf.t0 = pf.clock.Now()
	t.Cleanup(func() { _ = pf.eng.Close() })
	return pf
}

// open trips the provider's breaker with failed calls made straight through it, as the
// tiers make them.
func (pf *probeFixture) open(t *testing.T, provider string) {
	t.Helper()
	br := pf.eng.Breaker(provider)
	ctx := context.Background()
	for range breaker.DefaultConsecutiveFailures {
		p, err := br.Allow(ctx)
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		p.Done(ctx, errDown)
	}
	if st := br.State(ctx); st != breaker.StateOpen {
		t.Fatalf("%s's breaker is %v, want open", provider, st)
	}
}

// advance moves the clock by d and lets what it started run to its end.
func (pf *probeFixture) advance(d time.Duration) {
	pf.clock.Advance(d)
	synctest.Wait()
}

// walkTo moves the clock to t0+at in steps of 100ms, so that every timer fires at its own
// time.
func (pf *probeFixture) walkTo(at time.Duration) {
	for pf.clock.Now().Before(pf.t0.Add(at)) {
		pf.advance(min(100*time.Millisecond, pf.t0.Add(at).Sub(pf.clock.Now())))
	}
}

func (pf *probeFixture) state(provider string) breaker.State {
	return pf.eng.Breaker(provider).State(context.Background())
}

// timers reports whether any timer is armed on the fake clock.
func (pf *probeFixture) timers() bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return pf.clock.BlockUntilContext(ctx, 1) == nil // nil only when one is armed already
}

func durations(ds ...float64) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d * float64(time.Second))
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGoodModelsProbeLetsTheNextCallDecide: an open breaker of a provider probed by models is
// probed once its open period ends, with no user request made. A models list that answers
// proves the provider up, not that it answers chats, so the breaker is left half-open and the
// next call decides: it answers, and the breaker closes.
func TestGoodModelsProbeLetsTheNextCallDecide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := func(context.Context, int) error { return nil }
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{ok}, nil, answer(validAnswer))
		p0 := pf.probed["p0"]
		pf.open(t, "p0")
		pf.advance(breaker.DefaultRecovery - time.Nanosecond)
		if n := len(p0.probes(pf.t0)); n != 0 || pf.state("p0") != breaker.StateOpen {
			t.Fatalf("before the open period ended: %d probes, breaker %v; want none, open", n, pf.state("p0"))
		}
		pf.advance(time.Nanosecond)
		if got, want := p0.probes(pf.t0), durations(10); !equalDurations(got, want) {
			t.Fatalf("probes at %v, want %v", got, want)
		}
		if st := pf.state("p0"); st != breaker.StateHalfOpen {
			t.Fatalf("after a good models probe the breaker is %v, want half-open", st)
		}
		if n := p0.calls.Load(); n != 0 {
			t.Errorf("%d calls to Complete, want none: the probe is the models list", n)
		}
		res, err := pf.task(t, nil).RunJSON(context.Background(), ticket)
		if err != nil || res.Provider != "p0" || pf.state("p0") != breaker.StateClosed {
			t.Fatalf("the next call: %+v %v, breaker %v; want p0's answer and closed", res, err, pf.state("p0"))
		}
		if pf.timers() {
			t.Error("a timer is still armed after the breaker closed")
		}
		if logs := pf.logs.String(); !strings.Contains(logs, `msg="background probe" provider=p0 mode=models ok=true`) {
			t.Errorf("no background probe logged at Info:\n%s", logs)
		}
	})
}

// TestForcedOpeningHoldsItsPeriod: a breaker an administrator forced open for two hours is
// not probed before they end, though a background probe comes at least every maxProbeGap
// after an opening by failures: no good probe ends the maintenance window early.
func TestForcedOpeningHoldsItsPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := func(context.Context, int) error { return nil }
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{ok}, nil, answer(validAnswer))
		p0 := pf.probed["p0"]
		if err := pf.eng.Breaker("p0").ForceOpen(context.Background(), 2*time.Hour); err != nil {
			t.Fatal(err)
		}
		pf.advance(2*time.Hour - time.Nanosecond)
		if n := len(p0.probes(pf.t0)); n != 0 || pf.state("p0") != breaker.StateOpen {
			t.Fatalf("before the two hours ended: %d probes, breaker %v; want none, open", n, pf.state("p0"))
		}
		pf.advance(time.Nanosecond)
		if got, want := p0.probes(pf.t0), durations(7200); !equalDurations(got, want) {
			t.Fatalf("probes at %v, want %v", got, want)
		}
		if st := pf.state("p0"); st != breaker.StateHalfOpen {
			t.Fatalf("after the good probe the breaker is %v, want half-open", st)
		}
	})
}

// TestBackgroundProbeFailureReopens: a failed probe reopens the breaker for the grown period
// (15s, then 22.5s), and the next probe comes when that ends; the good one at +47.5s leaves it
// half-open for the next call.
func TestBackgroundProbeFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failTwice := func(_ context.Context, n int) error {
			if n < 2 {
				return errDown
			}
			return nil
		}
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{failTwice}, nil, answer(validAnswer))
		p0 := pf.probed["p0"]
		br := pf.eng.Breaker("p0")
		pf.open(t, "p0")
		pf.walkTo(10 * time.Second)
		snap := br.Snapshot(context.Background())
		if snap.State != breaker.StateOpen || snap.Until != pf.t0.Add(25*time.Second) || snap.Recovery != 15*time.Second {
			t.Fatalf("after the first failed probe: %+v, want open until +25s (recovery 15s)", snap)
		}
		pf.walkTo(25*time.Second - 100*time.Millisecond)
		if n := len(p0.probes(pf.t0)); n != 1 {
			t.Fatalf("%d probes before +25s, want 1", n)
		}
		pf.walkTo(time.Minute)
		if got, want := p0.probes(pf.t0), durations(10, 25, 47.5); !equalDurations(got, want) {
			t.Errorf("probes at %v, want %v", got, want)
		}
		if st := pf.state("p0"); st != breaker.StateHalfOpen {
			t.Errorf("after the good probe at +47.5s the breaker is %v, want half-open", st)
		}
		if n := p0.calls.Load(); n != 0 {
			t.Errorf("%d calls to Complete, want none", n)
		}
	})
}

// TestBackgroundProbeTimeout: a probe that hangs is cut after the provider's Timeouts.Max
// (here 3s) and counts as a failure.
func TestBackgroundProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cut error
		hangs := func(ctx context.Context, _ int) error {
			<-ctx.Done()
			cut = ctx.Err()
			return ctx.Err()
		}
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{hangs}, func(c *Config) {
			c.Providers[0].Timeouts.Max = 3 * time.Second
		}, answer(validAnswer))
		pf.open(t, "p0")
		pf.walkTo(13 * time.Second)
		snap := pf.eng.Breaker("p0").Snapshot(context.Background())
		if !errors.Is(cut, context.DeadlineExceeded) {
			t.Errorf("the probe's context ended with %v, want its deadline", cut)
		}
		if snap.State != breaker.StateOpen || snap.Since != pf.t0.Add(13*time.Second) || snap.Until != pf.t0.Add(28*time.Second) {
			t.Errorf("after the cut probe: %+v, want open from +13s until +28s", snap)
		}
	})
}

// TestBackgroundProbePanicIsAFailure: a panicking probe does not end the process (it would
// end this test binary): it reopens the breaker like any failure, and the next good probe
// leaves it half-open.
func TestBackgroundProbePanicIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		panicsOnce := func(_ context.Context, n int) error {
			if n == 0 {
				panic("adapter bug")
			}
			return nil
		}
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{panicsOnce}, nil, answer(validAnswer))
		pf.open(t, "p0")
		pf.walkTo(10 * time.Second)
		snap := pf.eng.Breaker("p0").Snapshot(context.Background())
		if snap.State != breaker.StateOpen || snap.Until != pf.t0.Add(25*time.Second) {
			t.Fatalf("after the panicking probe: %+v, want open until +25s", snap)
		}
		pf.walkTo(25 * time.Second)
		if st := pf.state("p0"); st != breaker.StateHalfOpen {
			t.Errorf("after the next probe the breaker is %v, want half-open", st)
		}
		if logs := pf.logs.String(); !strings.Contains(logs, "probe panicked: adapter bug") {
			t.Errorf("the panic was not logged as the probe's failure:\n%s", logs)
		}
	})
}

// TestBackgroundProbeCompletion: ProbeCompletion probes with a one-token Complete.
func TestBackgroundProbeCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pf := newProbeFixture(t, ProbeCompletion, nil, nil, answer(validAnswer))
		p0 := pf.fakes["p0"]
		pf.open(t, "p0")
		pf.advance(breaker.DefaultRecovery)
		if st := pf.state("p0"); st != breaker.StateClosed {
			t.Fatalf("after the probe the breaker is %v, want closed", st)
		}
		p0.mu.Lock()
		defer p0.mu.Unlock()
		if len(p0.reqs) != 1 || p0.reqs[0].MaxTokens != 1 || len(p0.reqs[0].Messages) != 1 {
			t.Fatalf("probe requests %+v, want one of one message and MaxTokens 1", p0.reqs)
		}
	})
}

// TestBackgroundProbeConfig: ProbeModels needs an afloat.Prober; an unknown mode is an error.
func TestBackgroundProbeConfig(t *testing.T) {
	tests := []struct {
		name    string
		mode    ProbeMode
		wantErr string
	}{
		{"models without a prober", ProbeModels, "has no models probe"},
		{"unknown mode", "ping", `unknown probe "ping"`},
		{"completion", ProbeCompletion, ""},
		{"off", ProbeOff, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Providers: []ProviderConfig{{Name: "p0", Provider: &fake{fn: answer(validAnswer)}, Probe: tt.mode}}})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestBackgroundProbeLeavesAUserProbeAlone: when a user request holds the probe, the
// background probe does not call the provider; it looks again one Recovery later, in case
// that request cancelled its permit.
func TestBackgroundProbeLeavesAUserProbeAlone(t *testing.T) {
	for _, settle := range []string{"done", "cancel"} {
		t.Run(settle, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ok := func(context.Context, int) error { return nil }
				pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{ok}, nil, answer(validAnswer))
				p0 := pf.probed["p0"]
				ctx := context.Background()
				br := pf.eng.Breaker("p0")
				if err := br.Force(ctx, breaker.StateHalfOpen); err != nil { // arms nothing
					t.Fatal(err)
				}
				user, err := br.Allow(ctx)
				if err != nil || !user.Probe() {
					t.Fatalf("the user request's Allow = %v (probe %v), want the probe", err, user.Probe())
				}
				pf.eng.upstreams["p0"].probe.arm(pf.clock.Now()) // as at the end of an open period
				synctest.Wait()
				if n := len(p0.probes(pf.t0)); n != 0 {
					t.Fatalf("%d background probes while a user request held the probe, want none", n)
				}
				switch settle {
				case "done":
					user.Done(ctx, nil)
					if pf.timers() {
						t.Error("a timer is still armed after the user's probe closed the breaker")
					}
					pf.advance(time.Minute)
					if n := len(p0.probes(pf.t0)); n != 0 {
						t.Errorf("%d background probes after the user's probe closed the breaker, want none", n)
					}
				case "cancel":
					user.Cancel(ctx)
					pf.advance(breaker.DefaultRecovery)
					if got, want := p0.probes(pf.t0), durations(10); !equalDurations(got, want) {
						t.Errorf("probes at %v, want %v: one Recovery after the refusal", got, want)
					}
					if st := pf.state("p0"); st != breaker.StateHalfOpen {
						t.Errorf("breaker %v, want half-open for the next call", st)
					}
				}
			})
		})
	}
}

// TestPrimaryBackAfterOneMinute is the fault of the brief: the primary is down for 60 s, then
// healthy; twenty calls come over two minutes, one every 6 s, on the cascade [p0, p1]. The
// backup answers meanwhile; the primary answers again soon after it is back; and no user
// call is spent on the dead primary once its breaker opened: while it is down its probes
// fail in the background, and the first call after a good one finds it back.
func TestPrimaryBackAfterOneMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const down = 60 * time.Second
		var (
			clock    *clockwork.FakeClock
			back     time.Time
			mu       sync.Mutex
			deadHits []time.Time // user calls to p0 while it was down
		)
		primary := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			if clock.Now().Before(back) {
				mu.Lock()
				deadHits = append(deadHits, clock.Now())
				mu.Unlock()
				return nil, errDown
			}
			return answer(validAnswer)(ctx, req, n)
		}
		probe := func(context.Context, int) error {
			if clock.Now().Before(back) {
				return errDown
			}
			return nil
		}
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{probe}, nil, primary, answer(validAnswer))
		clock, back = pf.clock, pf.t0.Add(down)
		task := pf.task(t, nil)

		var firstBack time.Duration = -1
		var periodAtBack time.Duration
		for i := range 20 {
			at := time.Duration(i) * 6 * time.Second
			if at >= down && periodAtBack == 0 {
				pf.walkTo(down)
				snap := pf.eng.Breaker("p0").Snapshot(context.Background())
				periodAtBack = snap.Until.Sub(snap.Since)
			}
			pf.walkTo(at)
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatalf("call at +%v: %v", at, err)
			}
			if res.Source != afloat.SourceModel {
				t.Fatalf("call at +%v answered by %v (%v), want a model", at, res.Source, res.Reason)
			}
			switch {
			case res.Provider == "p0" && firstBack < 0:
				firstBack = at
			case res.Provider != "p0" && firstBack >= 0:
				t.Errorf("call at +%v answered by %s after the primary was back at +%v", at, res.Provider, firstBack)
			}
			if at < down && res.Provider != "p1" {
				t.Errorf("call at +%v answered by %s while the primary was down, want the backup", at, res.Provider)
			}
		}
		opened, ok := pf.events["p0"].first(breaker.StateOpen)
		if !ok {
			t.Fatal("the primary's breaker never opened")
		}
		closed, _ := pf.events["p0"].first(breaker.StateClosed)
		probes := pf.probed["p0"].probes(pf.t0)
		t.Logf("breaker opened at +%v; background probes at %v; closed at +%v; first call answered by the primary at +%v",
			opened.At.Sub(pf.t0), probes, closed.At.Sub(pf.t0), firstBack)

		mu.Lock()
		defer mu.Unlock()
		for _, at := range deadHits {
			if !at.Before(opened.At) && !at.Equal(opened.At) {
				t.Errorf("a user call reached the dead primary at +%v, after its breaker opened at +%v", at.Sub(pf.t0), opened.At.Sub(pf.t0))
			}
		}
		if len(deadHits) != breaker.DefaultConsecutiveFailures {
			t.Errorf("%d user calls reached the dead primary, want %d (those that opened its breaker)", len(deadHits), breaker.DefaultConsecutiveFailures)
		}
		if firstBack < 0 || firstBack > down+periodAtBack {
			t.Fatalf("the primary answered again at +%v, want within one open period (%v) after +%v", firstBack, periodAtBack, down)
		}
		if want := 72 * time.Second; firstBack != want {
			t.Errorf("the primary answered again at +%v, want +%v (the first call after the probe at +71.5s)", firstBack, want)
		}
		if want := durations(34, 49, 71.5); !equalDurations(probes, want) {
			t.Errorf("background probes at %v, want %v (opened at +24s: 10s, 15s, 22.5s)", probes, want)
		}
		if closed.At != pf.t0.Add(72*time.Second) {
			t.Errorf("closed at +%v, want +72s: by the first call after the good probe at +71.5s", closed.At.Sub(pf.t0))
		}
	})
}

// TestCloseStopsProbes: Close disarms every timer, cancels a running probe (which then
// reports nothing) and waits for it; nothing is probed after it, and no goroutine is left
// (the bubble would fail the test on one left blocked).
func TestCloseStopsProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cut error
		hangs := func(ctx context.Context, _ int) error {
			<-ctx.Done()
			cut = ctx.Err()
			return ctx.Err()
		}
		ok := func(context.Context, int) error { return nil }
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{hangs, ok}, nil,
			answer(validAnswer), answer(validAnswer))
		pf.open(t, "p0")
		pf.advance(5 * time.Second)
		pf.open(t, "p1")
		pf.advance(5 * time.Second) // p0's probe runs, and hangs; p1's timer is armed for +15s
		if n := len(pf.probed["p0"].probes(pf.t0)); n != 1 {
			t.Fatalf("%d probes of p0 running, want 1", n)
		}
		if !pf.timers() {
			t.Fatal("no timer armed before Close")
		}
		if err := pf.eng.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !errors.Is(cut, context.Canceled) {
			t.Errorf("the running probe ended with %v, want its context cancelled by Close", cut)
		}
		if pf.timers() {
			t.Error("a timer is still armed after Close")
		}
		ctx := context.Background()
		// The cancelled probe reported nothing, and freed its slot for the next caller.
		permit, err := pf.eng.Breaker("p0").Allow(ctx)
		if err != nil || !permit.Probe() {
			t.Fatalf("Allow after Close = %v (probe %v), want the probe free", err, permit.Probe())
		}
		permit.Done(ctx, errDown) // reopens: an opening after Close arms nothing
		if pf.timers() {
			t.Error("an opening after Close armed a timer")
		}
		pf.advance(10 * time.Minute)
		if n, m := len(pf.probed["p0"].probes(pf.t0)), len(pf.probed["p1"].probes(pf.t0)); n != 1 || m != 0 {
			t.Errorf("probes after Close: p0 %d, p1 %d; want 1 (the cancelled one) and 0", n, m)
		}
		if err := pf.eng.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// TestProbeOffDoesNothing: without a background probe mode, an open breaker waits for a
// user request to probe it, even when the adapter could probe.
func TestProbeOffDoesNothing(t *testing.T) {
	for _, mode := range []ProbeMode{"", ProbeOff} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ok := func(context.Context, int) error { return nil }
				pf := newProbeFixture(t, mode, []func(context.Context, int) error{ok}, nil, answer(validAnswer))
				pf.open(t, "p0")
				if pf.timers() {
					t.Error("a timer was armed with probing off")
				}
				pf.advance(10 * time.Minute)
				if n := len(pf.probed["p0"].probes(pf.t0)); n != 0 {
					t.Errorf("%d background probes with probing off, want none", n)
				}
				if st := pf.state("p0"); st != breaker.StateHalfOpen {
					t.Errorf("breaker %v, want half-open: the next user call probes it", st)
				}
			})
		})
	}
}

// TestLiveModelsListDeadChat: the models list answers while every chat fails (a hung GPU
// behind a live front end). The good probes must not close the breaker for five user calls to
// fail each time: the next call decides, and its failure grows the open period. A call every
// 500 ms for two minutes reaches the dead primary a handful of times, as with no probe at all
// (before, 50 calls did).
func TestLiveModelsListDeadChat(t *testing.T) {
	for _, mode := range []ProbeMode{ProbeOff, ProbeModels} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := func(context.Context, int) error { return nil }
				pf := newProbeFixture(t, mode, []func(context.Context, int) error{up}, nil,
					failWith(503, afloat.Unavailable), answer(validAnswer))
				task := pf.task(t, nil)
				for range 240 {
					if _, err := task.RunJSON(context.Background(), ticket); err != nil {
						t.Fatal(err)
					}
					pf.advance(500 * time.Millisecond)
				}
				n := pf.fakes["p0"].calls.Load()
				t.Logf("probe %s: %d calls reached the dead primary in two minutes", mode, n)
				if n > 12 {
					t.Errorf("%d calls reached the dead primary, want at most 12", n)
				}
			})
		})
	}
}

// TestPrimaryBackAfterALongOutage: after nine minutes down, the open period has grown to
// minutes (the schedule caps at 5m); a background probe still comes at least every
// maxProbeGap, so the primary answers again within about 30 s of its recovery, not minutes
// later (before: 3 min 30 s unused). Calls come every 6 s.
func TestPrimaryBackAfterALongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const down = 9 * time.Minute
		var clock *clockwork.FakeClock
		var back time.Time
		dead := func() bool { return clock.Now().Before(back) }
		primary := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			if dead() {
				return nil, errDown
			}
			return answer(validAnswer)(ctx, req, n)
		}
		probe := func(context.Context, int) error {
			if dead() {
				return errDown
			}
			return nil
		}
		pf := newProbeFixture(t, ProbeModels, []func(context.Context, int) error{probe}, nil, primary, answer(validAnswer))
		clock, back = pf.clock, pf.t0.Add(down)
		task := pf.task(t, nil)
		firstBack := time.Duration(-1)
		for i := range 120 { // 12 minutes
			at := time.Duration(i) * 6 * time.Second
			pf.walkTo(at)
			res, err := task.RunJSON(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if res.Provider == "p0" && at >= down && firstBack < 0 {
				firstBack = at
			}
		}
		t.Logf("the primary answered again at +%v, %v after it was back", firstBack, firstBack-down)
		if firstBack < 0 || firstBack-down > maxProbeGap+6*time.Second {
			t.Errorf("the primary answered again at +%v, want within %v of its recovery at +%v", firstBack, maxProbeGap+6*time.Second, down)
		}
		if n := len(pf.probed["p0"].probes(pf.t0)); n > 30 {
			t.Errorf("%d background probes in 12 minutes, want at most about one per 30s", n)
		}
	})
}
