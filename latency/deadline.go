package latency

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Deadline is the moment a call's total budget runs out: every attempt, retry and re-ask of
// the call draws from it (DESIGN.md §2 step 2.2). The zero Deadline has already passed.
// A Deadline is a value and safe for concurrent use.
type Deadline struct {
	at  time.Time
	clk clockwork.Clock
}

type deadlineKey struct{}

// WithBudget returns a copy of parent that carries the call's Deadline and is cancelled
// when it passes: now+budget on clk, or parent's deadline when that is earlier (a parent's
// deadline is read as a time on clk). A budget ≤ 0 returns a context already done.
// FromContext retrieves the Deadline. Call cancel as soon as the call is over, as with
// context.WithDeadline. A nil clk is the real clock.
//
// On a real clock this is context.WithDeadline. On a *clockwork.FakeClock the deadline
// passes when the clock is advanced past it; the context is then cancelled from another
// goroutine, so a test waits on Done rather than polling Err. (clockwork.WithDeadline is not
// used: in v0.5.0 its Err blocks until the context is done, and it ignores a parent
// cancelled with DeadlineExceeded.)
func WithBudget(parent context.Context, clk clockwork.Clock, budget time.Duration) (context.Context, context.CancelFunc) {
	if clk == nil {
		clk = clockwork.NewRealClock()
	}
	now := clk.Now()
	at := now.Add(budget)
	if pd, ok := parent.Deadline(); ok && pd.Before(at) {
		at = pd
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if fc, ok := clk.(*clockwork.FakeClock); ok {
		ctx, cancel = withFakeDeadline(parent, fc, now, at)
	} else {
		ctx, cancel = context.WithDeadline(parent, at)
	}
	return context.WithValue(ctx, deadlineKey{}, Deadline{at: at, clk: clk}), cancel
}

// FromContext returns the Deadline that WithBudget put in ctx, moved earlier when a context
// derived from it has an earlier deadline. It returns false when ctx carries none, or no
// longer has any deadline (context.WithoutCancel).
func FromContext(ctx context.Context) (Deadline, bool) {
	d, ok := ctx.Value(deadlineKey{}).(Deadline)
	if !ok {
		return Deadline{}, false
	}
	at, ok := ctx.Deadline()
	if !ok {
		return Deadline{}, false
	}
	if at.Before(d.at) {
		d.at = at
	}
	return d, true
}

// At returns the moment the budget runs out.
func (d Deadline) At() time.Time { return d.at }

// Remaining returns the budget left now, never negative.
func (d Deadline) Remaining() time.Duration {
	clk := d.clk
	if clk == nil {
		clk = clockwork.NewRealClock()
	}
	return max(0, d.at.Sub(clk.Now()))
}

// fakeDeadlineCtx is a context cancelled when a fake clock passes its deadline.
type fakeDeadlineCtx struct {
	parent context.Context
	at     time.Time
	done   chan struct{}

	mu    sync.Mutex
	err   error
	stops []func() bool // the timer and the parent's propagation, stopped on cancel
	// stopped is closed once the first cancel has stopped them: a later cancel waits for it,
	// so that when a cancel returns the fake clock holds no timer of the context's (a test
	// counting the clock's timers sees none left behind).
	stopped chan struct{}
}

func withFakeDeadline(parent context.Context, clk *clockwork.FakeClock, now, at time.Time) (context.Context, context.CancelFunc) {
	c := &fakeDeadlineCtx{parent: parent, at: at, done: make(chan struct{}), stopped: make(chan struct{})}
	cancel := func() { c.cancel(context.Canceled) }
	if !at.After(now) {
		c.cancel(context.DeadlineExceeded)
		return c, cancel
	}
	// Both callbacks run on their own goroutines, never inside these calls.
	stopParent := context.AfterFunc(parent, func() { c.cancel(parent.Err()) })
	timer := clk.AfterFunc(at.Sub(now), func() { c.cancel(context.DeadlineExceeded) })
	c.mu.Lock()
	c.stops = []func() bool{stopParent, timer.Stop}
	late := c.err != nil
	c.mu.Unlock()
	if late { // cancelled while being set up
		stopParent()
		timer.Stop()
	}
	return c, cancel
}

// testAfterDone is a test's, run by the first cancel between closing done and stopping the
// timer.
var testAfterDone func()

func (c *fakeDeadlineCtx) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		<-c.stopped // neither stop waits for a callback: this cannot wait on itself
		return
	}
	c.err = err
	close(c.done)
	stops := c.stops
	c.mu.Unlock()
	if testAfterDone != nil {
		testAfterDone()
	}
	for _, stop := range stops {
		stop()
	}
	close(c.stopped)
}

func (c *fakeDeadlineCtx) Deadline() (time.Time, bool) { return c.at, true }
func (c *fakeDeadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *fakeDeadlineCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *fakeDeadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *fakeDeadlineCtx) String() string { return "latency.WithBudget(fake clock)" }

// WithTimeout returns a copy of parent cancelled after d on clk, like context.WithTimeout
// but driven by a fake clock in tests. Unlike WithBudget it puts no Deadline in the
// context: it is for one attempt inside a call's budget.
func WithTimeout(parent context.Context, clk clockwork.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if fc, ok := clk.(*clockwork.FakeClock); ok {
		now := fc.Now()
		at := now.Add(d)
		if pd, ok := parent.Deadline(); ok && pd.Before(at) {
			at = pd
		}
		return withFakeDeadline(parent, fc, now, at)
	}
	return context.WithTimeout(parent, d)
}
