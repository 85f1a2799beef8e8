package limit

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Slack is the latency rise under which the limit never falls (see next): noise for a model
// call. A caller whose own queueing may add this much to a latency (a saturated process)
// should report its answers as Ignore, or its overload would shrink the provider's limit.
const Slack = 100 * time.Millisecond

// ErrLimited is Acquire's answer when the limit is reached and the call could not wait: the
// queue is full, the wait ran out, or no wait was allowed.
var ErrLimited = errors.New("limit: concurrency limit reached")

// Config configures a Limiter. Zero values take the defaults.
type Config struct {
	// Initial is the limit before any answer was measured. 0 means half of Max, or 20 (at
	// most Max) when that is more: model calls take seconds, so a window of answers takes
	// seconds too, and a limit that starts low would spill a burst before it has grown.
	Initial int
	// Min and Max bound the limit. 0 means 1 and 256. Max is the hard cap (a provider's
	// max_in_flight).
	Min, Max int
	// Queue is how many calls may wait for a slot at once. 0 means Max; negative means none
	// (a call beyond the limit is refused at once).
	Queue int
	// Tolerance is how much slower than the long-run latency a window may be before the limit
	// falls. 0 means 1.5.
	Tolerance float64
	// Clock drives the windows and the waits; nil means real time.
	Clock clockwork.Clock
}

// Outcome is what a call that held a slot says of the provider.
type Outcome int

const (
	// Ignore: the call says nothing of the provider's capacity (the caller went away, the
	// budget cut it, the answer broke the contract). No sample.
	Ignore Outcome = iota
	// Success: the provider answered; its latency is a sample.
	Success
	// Dropped: the provider timed out or answered that it is overloaded (429, 503, 529).
	Dropped
)

// Limiter is an adaptive concurrency limit. It is safe for concurrent use.
type Limiter struct {
	clock     clockwork.Clock
	min, max  float64
	queueCap  int
	tolerance float64

	mu       sync.Mutex
	limit    float64
	inFlight int
	// ahead and queue hold the waiters in arrival order, those of AcquireAhead and the others:
	// ahead is served first. One that gave up is marked gone and skipped. queued counts those
	// still waiting in both, aheadQueued those in ahead.
	ahead, queue fifo
	queued       int
	aheadQueued  int
	// longRTT is the long-run latency (an exponential average over about 600 windows), 0
	// before the first window.
	longRTT float64
	win     window
}

// window gathers the answers since the limit last moved.
type window struct {
	start    time.Time
	count    int
	sum      time.Duration
	dropped  bool
	maxInUse int
	// maxQueued is the most calls that waited at once: demand the limit did not admit.
	maxQueued int
}

type waiter struct {
	ready   chan struct{} // closed when the waiter got its slot
	granted bool
	gone    bool
	ahead   bool // in the queue ahead
}

// fifo is a queue of waiters, the oldest at head.
type fifo struct {
	items []*waiter
	head  int
}

// pop returns the oldest waiter that has not given up, or nil, and drops the ones before it.
func (q *fifo) pop() *waiter {
	var w *waiter
	for w == nil && q.head < len(q.items) {
		if next := q.items[q.head]; !next.gone {
			w = next
		}
		q.items[q.head] = nil
		q.head++
	}
	switch {
	case q.head == len(q.items): // empty: reuse the array from its start
		q.items, q.head = q.items[:0], 0
	case q.head > len(q.items)/2: // mostly served or gone: drop the dead prefix
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return w
}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	if cfg.Max <= 0 {
		cfg.Max = 256
	}
	if cfg.Min <= 0 {
		cfg.Min = 1
	}
	cfg.Min = min(cfg.Min, cfg.Max)
	if cfg.Initial <= 0 {
		cfg.Initial = max(cfg.Max/2, min(cfg.Max, 20))
	}
	cfg.Initial = max(cfg.Min, min(cfg.Initial, cfg.Max))
	switch {
	case cfg.Queue == 0:
		cfg.Queue = cfg.Max
	case cfg.Queue < 0:
		cfg.Queue = 0
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = 1.5
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	l := &Limiter{clock: cfg.Clock, min: float64(cfg.Min), max: float64(cfg.Max), queueCap: cfg.Queue,
		tolerance: cfg.Tolerance, limit: float64(cfg.Initial)}
	l.win.start = l.clock.Now()
	return l
}

// Permit is a slot held. Release it exactly once.
type Permit struct {
	l     *Limiter
	start time.Time
	// observed: Observe already counted the call's latency.
	observed bool
}

// Observe counts the call's latency so far as its sample now, before the slot is released:
// for a stream, whose time to the first chunk says how fast the provider is while the slot
// is held as long as the stream lasts: o is Success, or Ignore when that latency says
// nothing of the provider (no sample). Release then counts no second sample, whatever its
// outcome.
func (p *Permit) Observe(o Outcome) {
	l := p.l
	if l == nil || p.observed {
		return
	}
	p.observed = true
	if o == Ignore {
		return
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.win.count++
	l.win.sum += now.Sub(p.start)
	l.win.maxInUse = max(l.win.maxInUse, l.inFlight)
	l.endWindow(now)
	l.grant()
}

// Acquire takes a slot. When the limit is reached it waits, in arrival order, up to wait
// (and not past ctx) for one to free; it returns ErrLimited when the queue is full or the
// wait ran out, and ctx's error when ctx ended first.
func (l *Limiter) Acquire(ctx context.Context, wait time.Duration) (Permit, error) {
	return l.acquire(ctx, wait, false)
}

// AcquireAhead is Acquire for a call that must not wait behind the others (a critical one):
// it waits ahead of every waiter of Acquire's, behind only the earlier ones of its own, and a
// full queue does not refuse it (their number is that of such calls, which the queue's bound
// is not there to cut).
func (l *Limiter) AcquireAhead(ctx context.Context, wait time.Duration) (Permit, error) {
	return l.acquire(ctx, wait, true)
}

func (l *Limiter) acquire(ctx context.Context, wait time.Duration, ahead bool) (Permit, error) {
	l.mu.Lock()
	if l.inFlight < l.slots() && (l.queued == 0 || ahead && l.aheadQueued == 0) {
		l.inFlight++
		l.mu.Unlock()
		return Permit{l: l, start: l.clock.Now()}, nil
	}
	if wait <= 0 || !ahead && l.queued >= l.queueCap {
		l.mu.Unlock()
		return Permit{}, ErrLimited
	}
	w := &waiter{ready: make(chan struct{}), ahead: ahead}
	if ahead {
		l.ahead.items = append(l.ahead.items, w)
		l.aheadQueued++
	} else {
		l.queue.items = append(l.queue.items, w)
	}
	l.queued++
	l.win.maxQueued = max(l.win.maxQueued, l.queued)
	l.mu.Unlock()

	t := l.clock.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return Permit{l: l, start: l.clock.Now()}, nil
	case <-t.Chan():
		err = ErrLimited
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted { // the slot came as the wait ended: take it rather than lose it
		return Permit{l: l, start: l.clock.Now()}, nil
	}
	w.gone = true
	l.queued--
	if w.ahead {
		l.aheadQueued--
	}
	return Permit{}, err
}

// Release frees the permit's slot and counts its outcome.
func (p Permit) Release(o Outcome) {
	l := p.l
	if l == nil {
		return
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	inUse := l.inFlight
	l.inFlight--
	switch {
	case o == Success && !p.observed:
		l.win.count++
		l.win.sum += now.Sub(p.start)
	case o == Dropped:
		l.win.dropped = true
	}
	l.win.maxInUse = max(l.win.maxInUse, inUse)
	l.endWindow(now)
	l.grant()
}

// slots is the limit as a whole number of calls.
func (l *Limiter) slots() int { return int(l.limit) }

// grant hands free slots to the oldest waiters, those ahead first. l.mu is held.
func (l *Limiter) grant() {
	for l.queued > 0 && l.inFlight < l.slots() {
		w := l.ahead.pop()
		if w != nil {
			l.aheadQueued--
		} else {
			w = l.queue.pop()
		}
		if w == nil { // queued counts only waiters still in a queue: not reached
			return
		}
		l.queued--
		l.inFlight++
		w.granted = true
		close(w.ready)
	}
}

// endWindow moves the limit when the window is over: at least 10 answers (or a drop) and
// twice their mean latency, between 100 ms and 1 s, since it began. l.mu is held.
func (l *Limiter) endWindow(now time.Time) {
	w := &l.win
	if w.count < 10 && !w.dropped {
		return
	}
	var mean time.Duration
	if w.count > 0 {
		mean = w.sum / time.Duration(w.count)
	}
	if now.Sub(w.start) < min(max(2*mean, 100*time.Millisecond), time.Second) {
		return
	}
	l.limit = l.next(mean, w.count, w.dropped, w.maxInUse, w.maxQueued)
	*w = window{start: now}
}

// next is the limit after a window of count answers of mean latency, with a drop or not, at
// most inUse calls in flight at once and at most queued waiting.
func (l *Limiter) next(mean time.Duration, count int, dropped bool, inUse, queued int) float64 {
	limit := l.limit
	if dropped {
		return max(l.min, limit*0.9)
	}
	short := float64(mean)
	if count == 0 || short <= 0 {
		return limit
	}
	if l.longRTT == 0 {
		l.longRTT = short
	} else {
		const alpha = 2.0 / (600 + 1)
		l.longRTT += alpha * (short - l.longRTT)
	}
	if l.longRTT/short > 2 {
		// Far faster than the long run (a recovery, a lighter load): let the long run follow
		// quickly, or the limit would grow unchecked on a stale baseline.
		l.longRTT *= 0.95
	}
	if float64(inUse) < limit/2 {
		return limit // the demand, not the provider, held the calls back: no evidence to grow on
	}
	// The gradient: how much slower than the long run the window was, past the tolerance
	// (×1.5) and a slack of 100 ms, under which a change is noise for a model call, which
	// takes 300 ms to 30 s (a stream's first chunk coming in 50 ms instead of 2 while the
	// gateway itself is busy says nothing of the provider). At most halving.
	gradient := max(0.5, min(1.0, (l.tolerance*l.longRTT+float64(Slack))/short))
	// The headroom: the square root of the limit, or, while calls waited for a slot and the
	// latency held, as many as waited (at most the limit: it doubles a window at most), so
	// that a burst on a provider that keeps its latency is admitted within a few windows.
	headroom := math.Sqrt(limit)
	if gradient == 1 {
		headroom = max(headroom, min(float64(queued), limit))
	}
	next := limit*gradient + headroom
	if next < limit {
		// Falls are smoothed (half the step a window), so that one slow window (a burst of
		// long answers) does not halve the limit; rises are not, so that a fast provider's
		// limit meets a burst within a second or two.
		next = (limit + next) / 2
	}
	return max(l.min, min(l.max, next))
}

// Limit is the current limit.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slots()
}

// InFlight is how many slots are held now.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// Queued is how many calls wait for a slot now.
func (l *Limiter) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}
