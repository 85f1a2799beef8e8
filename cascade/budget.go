package cascade

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// retryBudget caps retries at a share of calls over a sliding window, so that a sustained
// outage cannot multiply the load on a provider that is already failing; a floor of retries
// is always allowed, so that a quiet service still retries one failure. It counts in ten
// buckets of Window/10. Safe for concurrent use.
type retryBudget struct {
	clock   clockwork.Clock
	ratio   float64
	floor   int
	bucket  time.Duration
	mu      sync.Mutex
	start   time.Time // start of buckets[head]
	head    int
	calls   [10]int
	retries [10]int
}

func newRetryBudget(clock clockwork.Clock, cfg RetryConfig) *retryBudget {
	return &retryBudget{clock: clock, ratio: cfg.BudgetRatio, floor: cfg.BudgetFloor, bucket: cfg.Window / 10, start: clock.Now()}
}

// advance moves the window to now. Callers hold mu.
func (b *retryBudget) advance(now time.Time) {
	if b.bucket <= 0 {
		return
	}
	steps := int(now.Sub(b.start) / b.bucket)
	if steps <= 0 {
		return
	}
	if steps > len(b.calls) {
		steps = len(b.calls)
		b.start = now
	} else {
		b.start = b.start.Add(time.Duration(steps) * b.bucket)
	}
	for range steps {
		b.head = (b.head + 1) % len(b.calls)
		b.calls[b.head], b.retries[b.head] = 0, 0
	}
}

// call counts a first attempt.
func (b *retryBudget) call() {
	b.mu.Lock()
	b.advance(b.clock.Now())
	b.calls[b.head]++
	b.mu.Unlock()
}

// give returns the retry that take reserved at at, for an attempt that never went out (a
// hedge its tier did not admit), while the window still holds it: a retry whose bucket has
// left the window counts no more anyway, and giving back another's would let retries pass the
// ratio.
func (b *retryBudget) give(at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(b.clock.Now())
	k := 0 // buckets back from the head
	if at.Before(b.start) && b.bucket > 0 {
		k = int((b.start.Sub(at)-1)/b.bucket) + 1
	}
	if k >= len(b.retries) {
		return
	}
	if j := (b.head - k + len(b.retries)) % len(b.retries); b.retries[j] > 0 {
		b.retries[j]--
	}
}

// take reserves one retry if the window's retries stay within max(floor, ratio × calls); at
// is when, for give.
func (b *retryBudget) take() (at time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at = b.clock.Now()
	b.advance(at)
	var calls, retries int
	for i := range b.calls {
		calls += b.calls[i]
		retries += b.retries[i]
	}
	if retries+1 > b.floor && float64(retries+1) > b.ratio*float64(calls) {
		return at, false
	}
	b.retries[b.head]++
	return at, true
}
