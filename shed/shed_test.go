package shed

import (
	"context"
	"fmt"
	"math"
	"runtime/metrics"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
)

func TestShedsTheLeastCriticalFirst(t *testing.T) {
	var p time.Duration
	s := New(10*time.Millisecond, func() time.Duration { return p })
	for _, c := range []struct {
		pressure             time.Duration
		level                Level
		enrich, assist, crit bool
	}{
		{0, Normal, false, false, false},
		{9 * time.Millisecond, Normal, false, false, false},
		{10 * time.Millisecond, Saturated, true, false, false},
		{19 * time.Millisecond, Saturated, true, false, false},
		{20 * time.Millisecond, Overloaded, true, true, false},
		{time.Hour, Overloaded, true, true, false},
	} {
		p = c.pressure
		if got := s.Level(); got != c.level {
			t.Errorf("pressure %s: level %d, want %d", c.pressure, got, c.level)
		}
		if got := [3]bool{s.Shed(afloat.Enrichment), s.Shed(afloat.Assistance), s.Shed(afloat.Critical)}; got != [3]bool{c.enrich, c.assist, c.crit} {
			t.Errorf("pressure %s: shed enrichment, assistance, critical = %v; want %v", c.pressure, got, [3]bool{c.enrich, c.assist, c.crit})
		}
	}
}

func TestOffSheddsNothing(t *testing.T) {
	for _, s := range []*Shedder{nil, {}, New(0, func() time.Duration { return time.Hour }), New(time.Millisecond, nil)} {
		if s.Shed(afloat.Enrichment) || s.Level() != Normal {
			t.Errorf("%+v sheds; want nothing shed when off", s)
		}
	}
}

func TestQuantileOfTheWindow(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0.001, 0.002, 0.004, 0.008, math.Inf(1)}
	last := []uint64{0, 0, 0, 0, 0}
	// 100 samples: 98 under 1 ms, 1 in [2, 4) ms, 1 in [4, 8) ms → p99 is the 99th: [2, 4).
	counts := []uint64{98, 0, 1, 1, 0}
	if got := quantile(buckets, counts, last, 0.99); got != 2*time.Millisecond {
		t.Errorf("p99 %s; want 2ms, the lower bound of the 99th sample's bucket", got)
	}
	// The next window counts only what was added: 10 samples in [4, 8) ms.
	counts = []uint64{98, 0, 1, 11, 0}
	if got := quantile(buckets, counts, last, 0.99); got != 4*time.Millisecond {
		t.Errorf("p99 of the second window %s; want 4ms", got)
	}
	if got := quantile(buckets, counts, last, 0.99); got != 0 {
		t.Errorf("p99 of an empty window %s; want 0", got)
	}
}

func TestSamplerReadsTheRuntime(t *testing.T) {
	s := &Sampler{sample: []metrics.Sample{{Name: schedLatencies}}}
	s.read()
	if len(s.last) == 0 {
		t.Fatalf("the runtime has no %s histogram", schedLatencies)
	}
	if l := s.read(); l < 0 || l > time.Minute {
		t.Errorf("scheduling latency %s; want a sane figure", l)
	}
	running := NewSampler(context.Background(), time.Millisecond, true)
	running.Close() // stops its goroutine: Close returns only once it has
	if got := running.latencyAt(time.Hour); got > time.Minute {
		t.Errorf("latency %s of a closed sampler an hour on; its lateness must not count", got)
	}
	running.Close() // and a second Close is harmless
}

// TestSamplerSkipsTheKeptTick: a tick that comes right after a late one (the ticker kept it
// while the sampler waited to run) does not close an empty window, which would read as no
// latency just as goroutines come out of a long wait.
func TestSamplerSkipsTheKeptTick(t *testing.T) {
	const period = 250 * time.Millisecond
	s := &Sampler{period: period}
	figure := func(d time.Duration) func() time.Duration { return func() time.Duration { return d } }
	s.tick(2*time.Second, figure(1500*time.Millisecond)) // late by 1.75 s: a long window
	if got := s.latencyAt(2 * time.Second); got != 1500*time.Millisecond {
		t.Fatalf("latency %s after the late window; want its p99, 1.5s", got)
	}
	s.tick(2*time.Second+time.Millisecond, figure(0)) // the kept tick, at once
	if got := s.latencyAt(2*time.Second + time.Millisecond); got != 1500*time.Millisecond {
		t.Errorf("latency %s after the kept tick; want the late window's 1.5s still", got)
	}
	s.tick(2*time.Second+period, figure(3*time.Millisecond)) // the next tick on time
	if got := s.latencyAt(2*time.Second + period); got != 3*time.Millisecond {
		t.Errorf("latency %s after a window on time; want its p99, 3ms", got)
	}
}

// TestSamplerLatenessIsLatency: while the sampler is late to close its next window (its
// goroutine waits to run, or the process is frozen under a CPU quota), the latency is at
// least how late it is; once it is closed, its lateness means nothing.
func TestSamplerLatenessIsLatency(t *testing.T) {
	const period = 250 * time.Millisecond
	s := &Sampler{period: period}
	s.tick(period, func() time.Duration { return 2 * time.Millisecond })
	cases := []struct {
		now  time.Duration
		want time.Duration
	}{
		{period + 100*time.Millisecond, 2 * time.Millisecond},     // within its period
		{2*period + time.Millisecond, 2 * time.Millisecond},       // late by less than the p99
		{2*period + 400*time.Millisecond, 400 * time.Millisecond}, // late by 400 ms
	}
	for _, c := range cases {
		if got := s.latencyAt(c.now); got != c.want {
			t.Errorf("latency at %s: %s; want %s", c.now, got, c.want)
		}
	}
	s.closed.Store(true)
	if got := s.latencyAt(10 * time.Second); got != 2*time.Millisecond {
		t.Errorf("latency of a closed sampler %s; want its last p99, 2ms", got)
	}
}

// TestSamplerUnreadProbeIsLatency: while the loopback datagram waits to be read (its reader,
// woken by the network poller, waits behind the runnable goroutines), its age is the latency.
func TestSamplerUnreadProbeIsLatency(t *testing.T) {
	const period = 250 * time.Millisecond
	s := &Sampler{period: period}
	s.tick(time.Second, func() time.Duration { return 3 * time.Millisecond })
	s.sent.Store(int64(time.Second))
	if got := s.latencyAt(time.Second + 100*time.Millisecond); got != 100*time.Millisecond {
		t.Errorf("latency %s with the datagram unread for 100ms; want 100ms", got)
	}
	s.sent.Store(0) // read
	if got := s.latencyAt(time.Second + 100*time.Millisecond); got != 3*time.Millisecond {
		t.Errorf("latency %s once the datagram was read; want the p99, 3ms", got)
	}
}

// TestSamplerReadsItsProbes: a running sampler sends its datagrams and reads them, so that an
// idle process reads no latency from them.
func TestSamplerReadsItsProbes(t *testing.T) {
	probed := make(chan struct{})
	s := newSampler(context.Background(), 20*time.Millisecond, true, probed)
	defer s.Close()
	if s.probe == nil {
		t.Fatal("no loopback UDP socket: the sampler cannot probe the network poller")
	}
	for range 3 {
		select {
		case <-probed:
		case <-time.After(10 * time.Second):
			t.Fatal("no datagram read in 10s")
		}
	}
	if l := s.Latency(); l > 5*time.Second {
		t.Errorf("latency %s of an idle process; want its datagrams read", l)
	}
}

// TestTurns: a few turns at once; the others wait, the newest first, at most the threshold;
// a critical call never waits; off, nobody does.
func TestTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(300*time.Millisecond, func() time.Duration { return 0 })
		s.turns.n = 2
		ctx := context.Background()
		var held []func()
		for range 2 {
			leave, ok := s.Enter(ctx, afloat.Enrichment, 0)
			if !ok {
				t.Fatal("a free turn was refused")
			}
			held = append(held, leave)
		}
		if leave, ok := s.Enter(ctx, afloat.Critical, 0); !ok {
			t.Fatal("a critical call waited for a turn")
		} else {
			leave()
		}

		// Two calls wait, the second newer; a turn that ends goes to the newer.
		got := make(chan string, 2)
		var done sync.WaitGroup
		wait := func(name string) {
			done.Go(func() {
				leave, ok := s.Enter(ctx, afloat.Assistance, 0)
				if !ok {
					got <- name + " refused"
					return
				}
				got <- name
				time.Sleep(10 * time.Millisecond) // its turn's work
				leave()
				leave() // a second call of it gives nothing back
			})
			synctest.Wait()
		}
		wait("older")
		wait("newer")
		start := time.Now()
		held[0]()
		if first := <-got; first != "newer" {
			t.Fatalf("the turn went to %q; want the newest waiting", first)
		}
		if second := <-got; second != "older" {
			t.Fatalf("the next turn went to %q; want the older call once the newer's work ended", second)
		}
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("the older call entered %s after the turn ended; want 10ms, as the newer left", d)
		}

		// Both left: one turn is free again. With it taken too, a call waits the threshold and
		// is refused, and the turns stay counted right.
		done.Wait()
		if s.turns.busy != 1 || s.turns.waiters() != 0 {
			t.Fatalf("%d turns taken, %d calls waiting once both left; want 1 and 0", s.turns.busy, s.turns.waiters())
		}
		extra, ok := s.Enter(ctx, afloat.Enrichment, 0)
		if !ok {
			t.Fatal("the turn the waiting calls left was not freed")
		}
		start = time.Now()
		if _, ok := s.Enter(ctx, afloat.Enrichment, 0); ok {
			t.Fatal("a call entered with every turn taken")
		}
		if d := time.Since(start); d != 300*time.Millisecond {
			t.Errorf("refused after %s; want the threshold, 300ms", d)
		}
		start = time.Now()
		if _, ok := s.Enter(ctx, afloat.Enrichment, 40*time.Millisecond); ok || time.Since(start) != 40*time.Millisecond {
			t.Errorf("a call given 40ms: entered %v after %s; want it refused after 40ms, its budget, not the threshold", ok, time.Since(start))
		}
		if low := New(time.Millisecond, nil); low.turns.wait != minTurnWait {
			t.Errorf("with a 1ms threshold a call waits %s for a turn; want %s", low.turns.wait, minTurnWait)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		start = time.Now()
		if _, ok := s.Enter(cancelled, afloat.Enrichment, 0); ok || time.Since(start) != 0 {
			t.Errorf("a call whose context ended: entered %v after %s; want it refused at once with every turn taken", ok, time.Since(start))
		}
		held[1]()
		extra()
		for range 2 {
			if _, ok := s.Enter(ctx, afloat.Enrichment, 0); !ok {
				t.Fatal("a turn left was not freed")
			}
		}
		if _, ok := s.Enter(cancelled, afloat.Enrichment, 0); ok {
			t.Error("a third turn was given with two")
		}

		for _, off := range []*Shedder{nil, {}, New(0, nil)} {
			for range 5 {
				if _, ok := off.Enter(cancelled, afloat.Enrichment, 0); !ok {
					t.Fatalf("%+v refused a turn; want every call entering at once with shedding off", off)
				}
			}
		}
	})
}

// TestTurnHandedAsTheWaitEnds: a turn handed to a call just as its wait ended is passed on,
// not lost.
func TestTurnHandedAsTheWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(100*time.Millisecond, nil)
		s.turns.n = 1
		leave, _ := s.Enter(context.Background(), afloat.Enrichment, 0) // the one turn, held
		s.turns.testGiveUp = leave                                      // it ends between the waiting call's timeout and its giving up
		if _, ok := s.Enter(context.Background(), afloat.Enrichment, 0); ok {
			t.Fatal("a call entered after its wait ended")
		}
		s.turns.testGiveUp = nil
		if _, ok := s.Enter(context.Background(), afloat.Enrichment, 0); !ok {
			t.Fatal("the turn handed to a call that gave up was lost")
		}
		if s.turns.waiters() != 0 || s.turns.busy != 1 {
			t.Errorf("%d waiting, %d busy; want none waiting and the one turn taken", s.turns.waiters(), s.turns.busy)
		}
	})
}

// TestAssistanceTurnsBeforeEnrichment: saturated (enrichment is shed, assistance served), an
// assistance call waits for the one turn, then a newer enrichment call does: the turn that
// ends goes to the assistance call, which would be served, and not to the newer enrichment
// call, which would be decoded only to be shed.
func TestAssistanceTurnsBeforeEnrichment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const th = 300 * time.Millisecond
		s := New(th, func() time.Duration { return th }) // Saturated
		s.turns.n = 1
		ctx := context.Background()
		leave, _ := s.Enter(ctx, afloat.Enrichment, 0) // the one turn, held
		got := make(chan string, 2)
		var done sync.WaitGroup
		wait := func(name string, c afloat.Criticality) {
			done.Go(func() {
				leave, ok := s.Enter(ctx, c, 0)
				if ok {
					got <- name
					time.Sleep(10 * time.Millisecond) // its turn's work
					leave()
					return
				}
				got <- name + " refused"
			})
			synctest.Wait()
		}
		wait("assistance", afloat.Assistance)
		wait("enrichment", afloat.Enrichment)
		leave()
		if first := <-got; first != "assistance" {
			t.Errorf("the turn went to %q; want the assistance call", first)
		}
		if second := <-got; second != "enrichment" {
			t.Errorf("then %q; want the enrichment call, once the assistance call's work ended", second)
		}
		done.Wait()
		if n := s.turns.waiters(); n != 0 || s.turns.busy != 0 {
			t.Errorf("%d waiting, %d busy at the end; want 0, 0", n, s.turns.busy)
		}
	})
}

// TestOlderWaitEndsFirst: the oldest waiting call, the first to give up, leaves the newer ones
// waiting, and the next turn goes to the newest of them.
func TestOlderWaitEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(300*time.Millisecond, nil)
		s.turns.n = 1
		ctx := context.Background()
		leave, _ := s.Enter(ctx, afloat.Enrichment, 0) // the one turn, held
		entered := make(chan string, 3)
		for i, name := range []string{"oldest", "middle", "newest"} {
			go func() {
				_, ok := s.Enter(ctx, afloat.Enrichment, 0)
				entered <- fmt.Sprintf("%s %v", name, ok)
			}()
			time.Sleep(time.Duration(100*(i+1)) * time.Millisecond / 2) // the next comes later
			synctest.Wait()
		}
		if got := <-entered; got != "oldest false" {
			t.Fatalf("first out: %q; want the oldest, refused when its wait ended", got)
		}
		if s.turns.waiters() != 2 {
			t.Fatalf("%d calls waiting after the oldest gave up; want 2", s.turns.waiters())
		}
		leave()
		if got := <-entered; got != "newest true" {
			t.Fatalf("the turn went to %q; want the newest", got)
		}
		if got := <-entered; got != "middle false" {
			t.Fatalf("then %q; want the middle one refused when its wait ended", got)
		}
		if s.turns.busy != 1 || s.turns.waiters() != 0 {
			t.Errorf("%d turns taken, %d waiting; want the newest's turn and none waiting", s.turns.busy, s.turns.waiters())
		}
	})
}

// TestTurnsFollowTheirCount: when the number of turns grows (GOMAXPROCS rose), a call that
// enters wakes the waiting ones into the new turns at once; when it falls, turns that end are
// not handed on until the turns in use are down to it.
func TestTurnsFollowTheirCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(300*time.Millisecond, func() time.Duration { return 0 })
		s.turns.n = 2
		ctx := context.Background()
		var held []func()
		enter := func() {
			leave, ok := s.Enter(ctx, afloat.Enrichment, 0)
			if !ok {
				t.Fatal("a call was refused a turn")
			}
			held = append(held, leave)
		}
		entered := make(chan func(), 8)
		wait := func() {
			go func() {
				if leave, ok := s.Enter(ctx, afloat.Enrichment, 0); ok {
					entered <- leave
				}
			}()
			synctest.Wait()
		}
		enter()
		enter()
		wait()
		wait()
		s.turns.n = 5 // grown: three more
		start := time.Now()
		enter()
		for range 2 {
			held = append(held, <-entered)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the waiting calls entered %v after the turns grew; want at once", d)
		}
		if s.turns.busy != 5 || s.turns.waiters() != 0 {
			t.Fatalf("%d busy, %d waiting; want 5 and 0", s.turns.busy, s.turns.waiters())
		}

		s.turns.n = 1 // fallen: four too many in use
		for range 3 {
			wait()
		}
		for _, leave := range held {
			leave()
		}
		synctest.Wait()
		if s.turns.busy != 1 || s.turns.waiters() != 2 {
			t.Errorf("%d busy, %d waiting after the five left; want 1 (the count) and 2", s.turns.busy, s.turns.waiters())
		}
		(<-entered)()
		synctest.Wait()
		(<-entered)()
		synctest.Wait()
		(<-entered)()
		if s.turns.busy != 0 || s.turns.waiters() != 0 {
			t.Errorf("%d busy, %d waiting at the end; want 0 and 0", s.turns.busy, s.turns.waiters())
		}
	})
}

// waiters counts the calls waiting for a turn, of both criticalities.
func (t *turns) waiters() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiting[0]) + len(t.waiting[1])
}
