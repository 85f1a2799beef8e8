// Package shed decides which calls afloat sheds when it is itself saturated: not when a
// provider is slow (the cascade and its breakers handle that, and a slow provider holds
// calls in flight without costing CPU), but when the process has more runnable work than
// cores, which shows first as goroutines waiting to be scheduled.
//
// The signal is the Go scheduler's own: the 99th percentile of the time goroutines spent
// runnable before they ran (runtime/metrics "/sched/latencies:seconds"), over the last
// window. While the sampler is itself late to close the next window, how late it is counts as
// well, and so does the age of a loopback datagram it sends itself while that waits to be
// read: the runtime's histogram does not see a process frozen under its CPU quota, nor the
// goroutines still waiting when the window closed, and its p99 stays low while the few woken
// by the network poller wait behind the many runnable. Above the threshold the process is
// saturated and enrichment calls are shed; above twice the threshold assistance calls are
// shed too; critical calls are never shed, so that they never wait behind enrichment. A shed
// call costs no provider call and says nothing of any provider.
//
// Shedding decides once a call is decoded; the decoding (a gateway's of each call's body) it
// orders with turns (Enter): while the process is saturated those turns are what it runs, a
// few at a time, assistance before enrichment and the newest waiting first, so that a
// critical call, which never waits for one, does not queue behind the decoding of every call
// that arrived.
package shed

import (
	"context"
	"math"
	"net"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
)

// Level is how saturated the process is.
type Level int

const (
	// Normal: nothing is shed.
	Normal Level = iota
	// Saturated: enrichment is shed.
	Saturated
	// Overloaded: enrichment and assistance are shed.
	Overloaded
)

// Shedder admits or sheds calls by their criticality. The zero value and nil admit every
// call. It is safe for concurrent use.
type Shedder struct {
	threshold time.Duration
	pressure  func() time.Duration
	turns     turns
}

// New returns a Shedder that reads the scheduling latency from pressure (a Sampler's
// Latency, or a test's) and sheds above threshold. A threshold ≤ 0 turns shedding off, and
// turns with it; Pressure still reads the latency. It gives twice GOMAXPROCS turns at once,
// and a call waits for one the threshold, at least minTurnWait.
func New(threshold time.Duration, pressure func() time.Duration) *Shedder {
	return &Shedder{threshold: threshold, pressure: pressure, turns: turns{wait: max(threshold, minTurnWait)}}
}

// minTurnWait is the shortest wait for a turn: the sampler's window. A wait shorter than the
// scheduler's own hiccups would refuse calls that a busy moment only delayed.
const minTurnWait = 250 * time.Millisecond

// Level is the saturation now.
func (s *Shedder) Level() Level {
	if s == nil || s.threshold <= 0 || s.pressure == nil {
		return Normal
	}
	switch p := s.pressure(); {
	case p >= 2*s.threshold:
		return Overloaded
	case p >= s.threshold:
		return Saturated
	}
	return Normal
}

// Pressure is the scheduling latency now (the 99th percentile of the time goroutines waited
// to run), whether or not shedding is on; 0 without a pressure source. The engine reads it to
// tell its own queueing from a provider's slowness, shedding or not.
func (s *Shedder) Pressure() time.Duration {
	if s == nil || s.pressure == nil {
		return 0
	}
	return s.pressure()
}

// Shed reports whether a call of criticality c is shed now.
func (s *Shedder) Shed(c afloat.Criticality) bool {
	switch s.Level() {
	case Overloaded:
		return c != afloat.Critical
	case Saturated:
		return c == afloat.Enrichment
	}
	return false
}

// Enter waits for a turn at the CPU work that comes before a call of criticality c runs
// (decoding it) and returns the function that ends the turn; call it once that work is done,
// not after the call, which may wait on a provider (a second call of it does nothing). A
// critical call never waits. Others take one of a few turns: at once while one is free, else
// they wait, assistance before enrichment and the newest first, for the shedding threshold (a
// quarter second at least), and never longer than within (the call's budget, which the wait
// is part of; ≤ 0: no bound but the threshold's). ok is false when no turn came by then, or
// ctx ended first: afloat is too busy to even start the call, and the caller answers it
// overloaded (503 with Retry-After), the one answer that costs nothing to give. With shedding
// off every call enters at once.
func (s *Shedder) Enter(ctx context.Context, c afloat.Criticality, within time.Duration) (leave func(), ok bool) {
	if s == nil || s.threshold <= 0 || c == afloat.Critical {
		return func() {}, true
	}
	return s.turns.enter(ctx, c, within)
}

// turns gives n turns at once (0: twice GOMAXPROCS, read at each call and each turn's end,
// since it can change at run time: a rise wakes waiting calls into the new turns, a fall
// hands no ended turn on until the turns in use are down to it); the others wait on a stack per criticality, so that assistance goes before
// enrichment (which is the first shed) and, within each, the newest waiting, the most likely
// to still be within its budget, goes first.
type turns struct {
	n    int
	wait time.Duration

	mu   sync.Mutex
	busy int
	// waiting holds assistance's waiters, then enrichment's, the newest last; a turn is
	// handed by closing its channel.
	waiting [2][]chan struct{}

	testGiveUp func() // a test's, run between a wait's end and its giving up
}

func (t *turns) enter(ctx context.Context, c afloat.Criticality, within time.Duration) (leave func(), ok bool) {
	class := 0
	if c == afloat.Enrichment {
		class = 1
	}
	n := t.count()
	t.mu.Lock()
	if t.busy < n {
		t.busy++
		// Turns the count grew by since the calls waiting came go to them too.
		for t.busy < n && t.wake() {
			t.busy++
		}
		t.mu.Unlock()
		return t.leaver(), true
	}
	ch := make(chan struct{})
	t.waiting[class] = append(t.waiting[class], ch)
	t.mu.Unlock()

	wait := t.wait
	if within > 0 {
		wait = min(wait, within)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ch:
		return t.leaver(), true
	case <-timer.C:
	case <-ctx.Done():
	}
	if t.testGiveUp != nil {
		t.testGiveUp()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	stack := t.waiting[class]
	for i, w := range stack {
		if w == ch {
			n := copy(stack[i:], stack[i+1:])
			stack[i+n] = nil
			t.waiting[class] = stack[:i+n]
			return nil, false
		}
	}
	// The turn was handed over as the wait ended: pass it on.
	t.handOver(t.count())
	return nil, false
}

// count is the number of turns now: n, or twice GOMAXPROCS, which can change at run time.
func (t *turns) count() int {
	if t.n > 0 {
		return t.n
	}
	return 2 * runtime.GOMAXPROCS(0)
}

// leaver returns the function that ends a turn, once: the newest waiting call takes it.
func (t *turns) leaver() func() {
	var left atomic.Bool
	return func() {
		if left.Swap(true) {
			return
		}
		n := t.count()
		t.mu.Lock()
		defer t.mu.Unlock()
		t.handOver(n)
	}
}

// handOver gives a turn that ends to the newest waiting call (see wake), or frees it: also
// when more turns are taken than the n there are now (the count fell), so that the turns in
// use come down to it. t.mu is held.
func (t *turns) handOver(n int) {
	if t.busy > n || !t.wake() {
		t.busy--
	}
}

// wake hands a turn to the newest waiting assistance call, else the newest waiting
// enrichment call; false when none waits. t.mu is held.
func (t *turns) wake() bool {
	for class, stack := range t.waiting {
		if n := len(stack); n > 0 {
			close(stack[n-1])
			stack[n-1] = nil
			t.waiting[class] = stack[:n-1]
			return true
		}
	}
	return false
}

// Sampler measures the scheduling latency: every period it reads the runtime's histogram of
// the time goroutines waited to run, and keeps the 99th percentile of what was added since
// the last read. Its own wait to run counts too: while it is late to read (its goroutine
// waits to run, or the whole process is frozen under a CPU quota, which the runtime's
// histogram does not see), how late it is is the latency (Latency). So does the network
// poller's path: each period it sends itself a datagram on loopback, and while one is not
// yet read, its age is a latency too. A goroutine woken by the poller (a connect done, an
// answer arrived) can wait behind the runnable ones for seconds while the p99 of all of them
// stays low: an overloaded gateway's connects to healthy mocks took 1.6–1.9 s while the p99
// read 4–20 ms, and were blamed on the mocks.
type Sampler struct {
	p99    atomic.Int64 // nanoseconds
	period time.Duration
	// base is the monotonic origin of at and sent; at is when the last window closed, since
	// base.
	base   time.Time
	at     atomic.Int64
	closed atomic.Bool // the sampler reads no more: its lateness means nothing
	// probe is the loopback datagram socket the sampler writes to and a goroutine reads from
	// (nil when none could be opened); sent is when the datagram not yet read was written,
	// since base, or 0.
	probe  *net.UDPConn
	sent   atomic.Int64
	probed chan struct{} // a test's: a receive for a datagram read while it waits
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	sample []metrics.Sample
	last   []uint64
}

// schedLatencies is the runtime metric read.
const schedLatencies = "/sched/latencies:seconds"

// NewSampler starts a Sampler reading every period (0 means 250 ms) until Close or ctx ends;
// with probe, it sends itself its loopback datagrams too. A process on a simulated clock goes
// without: the goroutine that waits on the socket is not durably blocked, and would keep a
// testing/synctest bubble from ever advancing its time.
func NewSampler(ctx context.Context, period time.Duration, probe bool) *Sampler {
	return newSampler(ctx, period, probe, nil)
}

// newSampler is NewSampler; probed, when not nil, receives for each datagram read while a
// receiver waits on it.
func newSampler(ctx context.Context, period time.Duration, probe bool, probed chan struct{}) *Sampler {
	if period <= 0 {
		period = 250 * time.Millisecond
	}
	s := &Sampler{period: period, base: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
		sample: []metrics.Sample{{Name: schedLatencies}}, probed: probed}
	s.read() // the baseline: what the runtime counted before now is not this window's
	var reading chan struct{}
	if probe {
		if c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err == nil {
			s.probe, reading = c, make(chan struct{})
			go s.readProbes(reading)
		}
	}
	go func() {
		defer close(s.done)
		defer s.closed.Store(true)
		if s.probe != nil {
			defer func() { _ = s.probe.Close(); <-reading }()
		}
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				now := time.Since(s.base)
				s.tick(now, s.read)
				s.sendProbe(now)
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// sendProbe writes the loopback datagram at now (since base), unless the last one is still
// unread: its age is what Latency reads then.
func (s *Sampler) sendProbe(now time.Duration) {
	if s.probe == nil || s.sent.Load() != 0 {
		return
	}
	s.sent.Store(int64(max(now, 1)))
	if _, err := s.probe.WriteTo([]byte{0}, s.probe.LocalAddr()); err != nil {
		s.sent.Store(0) // not sent: nothing to wait for
	}
}

// readProbes reads the loopback datagrams until the socket is closed, and closes done then.
func (s *Sampler) readProbes(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 1)
	for {
		if _, _, err := s.probe.ReadFrom(buf); err != nil {
			return
		}
		s.sent.Store(0)
		select {
		case s.probed <- struct{}{}: // a test waiting (nil: none)
		default:
		}
	}
}

// tick closes the window at now (since base) with read's figure, unless the last window
// closed less than half a period ago. That is the tick the ticker kept while the sampler
// waited to run: it comes right after the late one, and its window, empty, would read as no
// latency at all just as the goroutines come out of a long wait (an overloaded gateway's
// attempts, cut then, were blamed on healthy providers).
func (s *Sampler) tick(now time.Duration, read func() time.Duration) {
	if now-time.Duration(s.at.Load()) < s.period/2 {
		return
	}
	s.p99.Store(int64(read()))
	s.at.Store(int64(now))
}

// Latency is the 99th percentile of the scheduling latency over the last period, or, when
// that is more, how late the sampler is to close the next window, or how long its loopback
// datagram has waited to be read.
func (s *Sampler) Latency() time.Duration { return s.latencyAt(time.Since(s.base)) }

// latencyAt is Latency at now (since base).
func (s *Sampler) latencyAt(now time.Duration) time.Duration {
	p := time.Duration(s.p99.Load())
	if s.closed.Load() {
		return p
	}
	p = max(p, now-time.Duration(s.at.Load())-s.period)
	if sent := s.sent.Load(); sent != 0 {
		p = max(p, now-time.Duration(sent))
	}
	return p
}

// Close stops the sampler.
func (s *Sampler) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// read returns the 99th percentile of the latencies counted since the last read.
func (s *Sampler) read() time.Duration {
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s.sample[0].Value.Float64Histogram()
	if len(s.last) != len(h.Counts) {
		s.last = make([]uint64, len(h.Counts))
		copy(s.last, h.Counts)
		return 0
	}
	return quantile(h.Buckets, h.Counts, s.last, 0.99)
}

// quantile returns the q quantile of the counts added since last (the lower bound of its
// bucket; a bucket's bounds are buckets[i] and buckets[i+1]) and moves last to counts.
func quantile(buckets []float64, counts, last []uint64, q float64) time.Duration {
	var total uint64
	for i := range counts {
		total += counts[i] - last[i]
	}
	var at time.Duration
	if total > 0 {
		rank := uint64(math.Ceil(q * float64(total)))
		var seen uint64
		for i := range counts {
			seen += counts[i] - last[i]
			if seen >= rank {
				lo := buckets[i]
				if math.IsInf(lo, -1) {
					lo = 0
				}
				at = time.Duration(lo * float64(time.Second))
				break
			}
		}
	}
	copy(last, counts)
	return at
}
