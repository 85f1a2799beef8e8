package limit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"
)

// round is one round of closed-loop demand on a fake clock: demand calls try for a slot at
// once (no waiting), those admitted take rtt, then they all answer with o. It returns how
// many were admitted.
func round(t *testing.T, l *Limiter, clock *clockwork.FakeClock, demand int, rtt time.Duration, o Outcome) int {
	t.Helper()
	var held []Permit
	for range demand {
		p, err := l.Acquire(context.Background(), 0)
		if err != nil {
			if !errors.Is(err, ErrLimited) {
				t.Fatalf("Acquire: %v", err)
			}
			continue
		}
		held = append(held, p)
	}
	clock.Advance(rtt)
	for _, p := range held {
		p.Release(o)
	}
	return len(held)
}

func TestLimitGrowsWithDemandOnAFastProvider(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Initial: 20, Max: 256, Clock: clock})
	for range 400 { // 400 rounds of 128 concurrent calls answered in 5 ms: 2 s
		round(t, l, clock, 128, 5*time.Millisecond, Success)
	}
	if got := l.Limit(); got < 128 {
		t.Errorf("limit %d after 2 s of 128 concurrent calls answered in a steady 5 ms; want it grown to at least 128", got)
	}
	if got := l.Limit(); got > 256 {
		t.Errorf("limit %d above the cap 256", got)
	}
	if n := l.InFlight(); n != 0 {
		t.Errorf("%d in flight after every permit was released", n)
	}
}

func TestLimitFallsWhenLatencyRisesTenfold(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Initial: 20, Max: 256, Clock: clock})
	for range 400 {
		round(t, l, clock, 128, 50*time.Millisecond, Success)
	}
	before := l.Limit()
	// The provider slows tenfold under the same demand: 20 s at 500 ms.
	for range 40 {
		round(t, l, clock, 128, 500*time.Millisecond, Success)
	}
	after := l.Limit()
	if after > before/2 {
		t.Errorf("limit %d → %d after 20 s of answers 10× slower; want it at least halved", before, after)
	}
	// And it grows again once the provider is fast again.
	for range 1000 {
		round(t, l, clock, 128, 50*time.Millisecond, Success)
	}
	if again := l.Limit(); again <= after {
		t.Errorf("limit %d → %d after 50 s fast again; want it grown back", after, again)
	}
}

func TestLimitDoesNotGrowWithoutDemand(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Initial: 40, Max: 256, Clock: clock})
	for range 400 { // 10 calls at a time: fewer than half the limit
		round(t, l, clock, 10, 5*time.Millisecond, Success)
	}
	if got := l.Limit(); got != 40 {
		t.Errorf("limit %d after calls that never used half of it; want 40 unchanged", got)
	}
}

func TestADropBacksTheLimitOff(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Initial: 100, Min: 3, Max: 256, Clock: clock})
	clock.Advance(time.Second)
	round(t, l, clock, 1, 5*time.Millisecond, Dropped)
	if got := l.Limit(); got != 90 {
		t.Errorf("limit %d after a window with a drop; want 100 × 0.9 = 90", got)
	}
	for range 200 {
		clock.Advance(time.Second)
		round(t, l, clock, 1, 5*time.Millisecond, Dropped)
	}
	if got := l.Limit(); got != 3 {
		t.Errorf("limit %d after 200 windows of drops; want the floor, Min 3", got)
	}
}

func TestIgnoredOutcomesAreNoSample(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Initial: 20, Clock: clock})
	for range 400 {
		round(t, l, clock, 128, 5*time.Second, Ignore)
	}
	if got := l.Limit(); got != 20 {
		t.Errorf("limit %d after answers that say nothing of the provider; want 20", got)
	}
}

func TestQueueWaitsInOrderAndIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Initial: 1, Min: 1, Max: 1, Queue: 2})
		held, err := l.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		order := make(chan int, 2)
		for i := range 2 {
			go func() {
				p, err := l.Acquire(context.Background(), time.Minute)
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				order <- i
				p.Release(Success)
			}()
			synctest.Wait() // waiter i is queued before the next one comes
		}
		if q := l.Queued(); q != 2 {
			t.Fatalf("queued %d; want 2", q)
		}
		if _, err := l.Acquire(context.Background(), time.Minute); !errors.Is(err, ErrLimited) {
			t.Errorf("Acquire with the queue full: %v; want ErrLimited at once", err)
		}
		held.Release(Success)
		if a, b := <-order, <-order; a != 0 || b != 1 {
			t.Errorf("waiters served %d then %d; want in arrival order, 0 then 1", a, b)
		}
		synctest.Wait()
		if n, q := l.InFlight(), l.Queued(); n != 0 || q != 0 {
			t.Errorf("in flight %d, queued %d at the end; want 0, 0", n, q)
		}
	})
}

// TestAheadWaitsBeforeTheQueue: with the queue full of ordinary waiters, a call of
// AcquireAhead is not refused, and the next free slot is its, before theirs; a second one
// waits behind the first; one that gave up leaves the others in order and the count right.
func TestAheadWaitsBeforeTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Initial: 1, Min: 1, Max: 1, Queue: 2})
		held, err := l.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		order := make(chan string, 5)
		wait := func(name string, ctx context.Context, acquire func(context.Context, time.Duration) (Permit, error)) {
			go func() {
				p, err := acquire(ctx, time.Minute)
				if err != nil {
					order <- name + " " + err.Error()
					return
				}
				order <- name
				p.Release(Success)
			}()
			synctest.Wait()
		}
		wait("queued 1", context.Background(), l.Acquire)
		wait("queued 2", context.Background(), l.Acquire)
		gone, leave := context.WithCancel(context.Background())
		wait("ahead gone", gone, l.AcquireAhead)
		wait("ahead 1", context.Background(), l.AcquireAhead)
		wait("ahead 2", context.Background(), l.AcquireAhead)
		if q := l.Queued(); q != 5 {
			t.Fatalf("queued %d; want 5 (a full queue does not refuse a call ahead)", q)
		}
		leave()
		if got := <-order; got != "ahead gone context canceled" {
			t.Fatalf("%q; want the cancelled one out first", got)
		}
		held.Release(Success)
		var got []string
		for range 4 {
			got = append(got, <-order)
		}
		if want := []string{"ahead 1", "ahead 2", "queued 1", "queued 2"}; !slices.Equal(got, want) {
			t.Errorf("served %v; want %v", got, want)
		}
		synctest.Wait()
		if n, q := l.InFlight(), l.Queued(); n != 0 || q != 0 {
			t.Errorf("in flight %d, queued %d at the end; want 0, 0", n, q)
		}
		// Nothing waiting ahead (the one that left included): a free slot is taken at once.
		p, err := l.AcquireAhead(context.Background(), 0)
		if err != nil {
			t.Fatalf("AcquireAhead with a free slot: %v", err)
		}
		p.Release(Success)
	})
}

func TestQueueWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Initial: 1, Min: 1, Max: 1})
		held, err := l.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := l.Acquire(context.Background(), 50*time.Millisecond); !errors.Is(err, ErrLimited) {
			t.Errorf("Acquire past its wait: %v; want ErrLimited", err)
		}
		if waited := time.Since(start); waited != 50*time.Millisecond {
			t.Errorf("waited %s; want the 50ms given", waited)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			synctest.Wait()
			cancel()
		}()
		if _, err := l.Acquire(ctx, time.Minute); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire whose context ended: %v; want context.Canceled", err)
		}
		if q := l.Queued(); q != 0 {
			t.Errorf("queued %d after both waiters gave up; want 0", q)
		}
		held.Release(Success)
		// The waiters that left hold nothing: the slot is free for the next call.
		p, err := l.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatalf("Acquire after the release: %v", err)
		}
		p.Release(Success)
	})
}

func TestZeroPermitReleaseIsANoOp(t *testing.T) {
	Permit{}.Release(Success) // must not panic
}

func TestFastPathAllocatesNothing(t *testing.T) {
	l := New(Config{})
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		p, err := l.Acquire(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(Success)
	}); n != 0 {
		t.Errorf("%v allocations per acquire and release below the limit; want 0", n)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	l := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := l.Acquire(ctx, 0)
			if err != nil {
				continue
			}
			p.Release(Success)
		}
	})
}

// TestObserveSamplesAStreamAtItsFirstChunk: streams that hold their slots for long count
// their time to the first chunk, so the limit grows while they are still open; their release
// adds no second sample.
func TestObserveSamplesAStreamAtItsFirstChunk(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Initial: 20, Max: 4000, Clock: clock})
	var open []Permit
	for range 10 { // 10 windows: new streams as many as fit, their first chunk after 2 ms
		fresh := len(open)
		for range 20 {
			p, err := l.Acquire(context.Background(), 0)
			if err != nil {
				break
			}
			open = append(open, p)
		}
		clock.Advance(2 * time.Millisecond)
		for i := fresh; i < len(open); i++ {
			open[i].Observe(Success)
		}
		clock.Advance(100 * time.Millisecond)
		// One stream ends: the window closes on it (observed already, it adds no sample).
		open[0].Release(Success)
		open = open[1:]
	}
	grown := l.Limit()
	if grown <= 20 {
		t.Fatalf("limit %d with %d streams open and sampled; want it grown past 20", grown, len(open))
	}
	clock.Advance(time.Minute) // the streams end, a minute later: no sample of a minute
	for _, p := range open {
		p.Release(Success)
	}
	if l.Limit() < grown {
		t.Errorf("limit %d → %d when the streams ended; their release must add no sample", grown, l.Limit())
	}
}

// TestSmallRisesAreNoise: a latency rising from 1 to 50 ms (under the 100 ms slack) keeps
// the limit; from 1 to 300 ms it falls.
func TestSmallRisesAreNoise(t *testing.T) {
	for _, c := range []struct {
		after time.Duration
		falls bool
	}{{50 * time.Millisecond, false}, {300 * time.Millisecond, true}} {
		clock := clockwork.NewFakeClock()
		l := New(Config{Initial: 100, Max: 100, Clock: clock})
		for range 100 {
			round(t, l, clock, 100, time.Millisecond, Success)
		}
		for range 20 {
			round(t, l, clock, 100, c.after, Success)
		}
		if fell := l.Limit() < 100; fell != c.falls {
			t.Errorf("1ms → %s: limit %d; want it to fall: %v", c.after, l.Limit(), c.falls)
		}
	}
}

// TestObserveIgnoredCountsNoSample: streams whose first chunks came late while the caller
// itself was saturated (observed as Ignore) do not move the limit, neither then nor when
// they end; the same first chunks observed as Success make it fall.
func TestObserveIgnoredCountsNoSample(t *testing.T) {
	for _, c := range []struct {
		o     Outcome
		falls bool
	}{{Ignore, false}, {Success, true}} {
		clock := clockwork.NewFakeClock()
		l := New(Config{Initial: 100, Max: 100, Clock: clock})
		for range 100 { // the long run: 1 ms
			round(t, l, clock, 100, time.Millisecond, Success)
		}
		var open []Permit
		for range 20 { // 20 windows of 60 streams whose first chunk comes after 400 ms
			for range 60 {
				p, err := l.Acquire(context.Background(), 0)
				if err != nil {
					break // the limit fell under 60
				}
				open = append(open, p)
			}
			clock.Advance(400 * time.Millisecond)
			for i := range open {
				open[i].Observe(c.o)
			}
			clock.Advance(time.Second)
			for _, p := range open {
				p.Release(Success) // observed already: no second sample
			}
			open = open[:0]
		}
		if fell := l.Limit() < 100; fell != c.falls {
			t.Errorf("first chunks at 400 ms observed as %d: limit %d; want it to fall: %v", c.o, l.Limit(), c.falls)
		}
	}
}
