package breaker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// spread returns a Config.Rand that cycles through n values evenly spread over [0, 1): any n
// draws in a row take each value once, so the share of n calls that a ramp-up admits is
// exact whatever was drawn before (the jitter of an opening draws too).
func spread(n int) func() float64 {
	var i atomic.Uint64
	return func() float64 { return (float64((i.Add(1)-1)%uint64(n)) + 0.5) / float64(n) }
}

// admitted counts the calls of n that b admits now; each admitted one succeeds.
func admitted(t *testing.T, b *Breaker, n int) int {
	t.Helper()
	ctx := context.Background()
	got := 0
	for range n {
		p, err := b.Allow(ctx)
		switch err {
		case nil:
			got++
			p.Done(ctx, nil)
		case ErrOpen:
		default:
			t.Fatalf("Allow: %v", err)
		}
	}
	return got
}

// closeByProbe trips b with one failure, waits out the open period and closes it with a good
// probe; it returns when the probe closed it.
func closeByProbe(t *testing.T, b *Breaker, clock interface{ Advance(time.Duration) }) time.Time {
	t.Helper()
	openAndWait(t, b, 1, clock)
	p, err := b.Allow(context.Background())
	if err != nil || !p.Probe() {
		t.Fatalf("Allow after the open period = %+v, %v; want the probe", p, err)
	}
	p.Done(context.Background(), nil)
	wantState(t, b, StateClosed)
	return b.clock.Now()
}

// TestRampUpRaisesTheShareAfterAGoodProbe: with RampUp 10s, the share of calls a breaker
// closed by a good probe admits rises with the time since the close (1s: 10 %, 5s: 50 %,
// 9s: 90 %), and is all of them once the ramp-up is over. The breaker stays closed all along.
func TestRampUpRaisesTheShareAfterAGoodProbe(t *testing.T) {
	const n = 1000
	b, clock, rec := newTest(t, Config{ConsecutiveFailures: 1, RampUp: 10 * time.Second, Rand: spread(n)})
	closed := closeByProbe(t, b, clock)
	if got := admitted(t, b, n); got != 0 {
		t.Errorf("at the close: %d of %d calls admitted, want none", got, n)
	}
	if snap := b.Snapshot(context.Background()); snap.RampUntil != closed.Add(10*time.Second) {
		t.Errorf("snapshot %+v: RampUntil, want %v", snap, closed.Add(10*time.Second))
	}
	last := 0
	for _, at := range []struct {
		after time.Duration
		want  int // of n
	}{
		{1 * time.Second, 100},
		{5 * time.Second, 500},
		{9 * time.Second, 900},
		{11 * time.Second, n},
	} {
		clock.Advance(closed.Add(at.after).Sub(clock.Now()))
		got := admitted(t, b, n)
		t.Logf("%v after the close: %d of %d admitted", at.after, got, n)
		if got < at.want-n/50 || got > at.want+n/50 || got <= last {
			t.Errorf("%v after the close: %d of %d calls admitted, want about %d (and more than the %d before)", at.after, got, n, at.want, last)
		}
		if at.after < 10*time.Second && got == n {
			t.Errorf("%v after the close: every call admitted during the ramp-up", at.after)
		}
		last = got
		wantState(t, b, StateClosed)
	}
	if got := admitted(t, b, n); got != n {
		t.Errorf("after the ramp-up: %d of %d calls admitted, want all", got, n)
	}
	if snap := b.Snapshot(context.Background()); !snap.RampUntil.IsZero() {
		t.Errorf("snapshot after the ramp-up %+v: RampUntil set", snap)
	}
	if evs := rec.list(); len(evs) != 3 || evs[2].To != StateClosed {
		t.Errorf("events %+v, want closed→open→half-open→closed and nothing more", evs)
	}
}

// TestRampUpOnlyAfterAGoodProbe: the ramp-up follows a close by a good probe (a forced
// half-open included: its probe is a real call), not a forced close, not a breaker that
// never opened, and not with RampUp 0.
func TestRampUpOnlyAfterAGoodProbe(t *testing.T) {
	const n = 1000
	ctx := context.Background()
	tests := []struct {
		name   string
		rampUp time.Duration
		close  func(t *testing.T, b *Breaker, clock interface{ Advance(time.Duration) })
		ramps  bool
	}{
		{"good probe", 10 * time.Second, func(t *testing.T, b *Breaker, clock interface{ Advance(time.Duration) }) {
			closeByProbe(t, b, clock)
		}, true},
		{"good probe after a forced half-open", 10 * time.Second, func(t *testing.T, b *Breaker, _ interface{ Advance(time.Duration) }) {
			if err := b.Force(ctx, StateHalfOpen); err != nil {
				t.Fatal(err)
			}
			calls(t, b, 1, nil)
		}, true},
		{"forced close of an open breaker", 10 * time.Second, func(t *testing.T, b *Breaker, _ interface{ Advance(time.Duration) }) {
			calls(t, b, 1, errUnavailable)
			if err := b.Force(ctx, StateClosed); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"forced close of a ramping breaker", 10 * time.Second, func(t *testing.T, b *Breaker, clock interface{ Advance(time.Duration) }) {
			closeByProbe(t, b, clock)
			if err := b.Force(ctx, StateClosed); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"never opened", 10 * time.Second, func(*testing.T, *Breaker, interface{ Advance(time.Duration) }) {}, false},
		{"ramp-up off", 0, func(t *testing.T, b *Breaker, clock interface{ Advance(time.Duration) }) {
			closeByProbe(t, b, clock)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, _ := newTest(t, Config{ConsecutiveFailures: 1, RampUp: tt.rampUp, Rand: spread(n)})
			tt.close(t, b, clock)
			wantState(t, b, StateClosed)
			clock.Advance(time.Second)
			got := admitted(t, b, n)
			snap := b.Snapshot(ctx)
			if tt.ramps {
				if got > n/5 || snap.RampUntil.IsZero() {
					t.Errorf("1s after the close: %d of %d admitted, RampUntil %v; want about a tenth, ramping", got, n, snap.RampUntil)
				}
				return
			}
			if got != n || !snap.RampUntil.IsZero() {
				t.Errorf("1s after the close: %d of %d admitted, RampUntil %v; want all, no ramp-up", got, n, snap.RampUntil)
			}
		})
	}
}

// TestFailureDuringRampUpTrips: the calls admitted during a ramp-up count as in any closed
// state: ConsecutiveFailures of them failing opens the breaker again, and the calls turned
// away count for nothing. The next good probe ramps up again from its own close.
func TestFailureDuringRampUpTrips(t *testing.T) {
	const n = 100
	ctx := context.Background()
	// Draws of 0.25 and 0.75 in turn: at half the ramp-up, the calls are admitted and turned
	// away in turn, so the failures that trip are not in a row of Allow calls.
	b, clock, _ := newTest(t, Config{ConsecutiveFailures: 3, RampUp: 10 * time.Second, Rand: spread(2)})
	calls(t, b, 3, errUnavailable)
	clock.Advance(b.Snapshot(ctx).Until.Sub(clock.Now()))
	calls(t, b, 1, nil) // the probe
	wantState(t, b, StateClosed)
	clock.Advance(5 * time.Second)
	failed, refused := 0, 0
	for b.State(ctx) == StateClosed && failed+refused < 10*n {
		p, err := b.Allow(ctx)
		if err != nil {
			refused++
			continue
		}
		failed++
		p.Done(ctx, errUnavailable)
	}
	if failed != 3 || refused < 2 {
		t.Fatalf("%d admitted calls failed (and %d were turned away) before the breaker left closed (now %v), want 3",
			failed, refused, b.State(ctx))
	}
	wantState(t, b, StateOpen)
	clock.Advance(b.Snapshot(ctx).Until.Sub(clock.Now()))
	calls(t, b, 1, nil)
	reclosed := clock.Now()
	if snap := b.Snapshot(ctx); snap.State != StateClosed || snap.RampUntil != reclosed.Add(10*time.Second) {
		t.Fatalf("after the next good probe: %+v, want closed ramping until %v", snap, reclosed.Add(10*time.Second))
	}
	clock.Advance(time.Second)
	if got := admitted(t, b, n); got > n/5 {
		t.Errorf("1s after the second close: %d of %d admitted, want a few at most", got, n)
	}
}

// TestRampUpIsSharedByReplicas: two breakers of one name over one MemoryStore, as two
// replicas over Redis: the close by one's probe ramps up both, from the same moment.
func TestRampUpIsSharedByReplicas(t *testing.T) {
	const n = 1000
	ctx := context.Background()
	clock := newTestClock()
	store := NewMemoryStore()
	replica := func() *Breaker {
		b, err := New("p", Config{ConsecutiveFailures: 1, RampUp: 10 * time.Second, Rand: spread(n), Clock: clock, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := replica(), replica()
	closed := closeByProbe(t, a, clock)
	if rec, _ := store.Load(ctx, "p"); rec.State != StateClosed || !rec.RampUp || !rec.Since.Equal(closed) {
		t.Fatalf("stored record %+v, want closed at %v with RampUp", rec, closed)
	}
	if sa, sb := a.Snapshot(ctx), b.Snapshot(ctx); sb.RampUntil.IsZero() || sb.RampUntil != sa.RampUntil {
		t.Fatalf("RampUntil: %v on the replica that probed, %v on the other; want the same", sa.RampUntil, sb.RampUntil)
	}
	clock.Advance(5 * time.Second)
	for name, br := range map[string]*Breaker{"the replica that probed": a, "the other": b} {
		if got := admitted(t, br, n); got < n/2-n/50 || got > n/2+n/50 {
			t.Errorf("5s after the close, %s admitted %d of %d calls, want about half", name, got, n)
		}
	}
	clock.Advance(5 * time.Second)
	for name, br := range map[string]*Breaker{"the replica that probed": a, "the other": b} {
		if got := admitted(t, br, n); got != n {
			t.Errorf("after the ramp-up, %s admitted %d of %d calls, want all", name, got, n)
		}
	}
}

func TestRampUpNegativeIsAnError(t *testing.T) {
	_, err := New("p", Config{RampUp: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "ramp up -1s is negative") {
		t.Fatalf("New with RampUp -1s: %v, want an error naming it", err)
	}
}

// BenchmarkAllowRampUp measures Allow early in a ramp-up, where it turns most calls away.
func BenchmarkAllowRampUp(b *testing.B) {
	ctx := context.Background()
	br, err := New("p", Config{RampUp: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Force(ctx, StateHalfOpen); err != nil {
		b.Fatal(err)
	}
	p, err := br.Allow(ctx)
	if err != nil || !p.Probe() {
		b.Fatalf("Allow = %+v, %v; want the probe", p, err)
	}
	p.Done(ctx, nil)
	b.ReportAllocs()
	for b.Loop() {
		if p, err := br.Allow(ctx); err == nil {
			p.Done(ctx, nil)
		}
	}
}
