package breaker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

var (
	errUnavailable = &afloat.ProviderError{Provider: "p", Status: 503, Kind: afloat.Unavailable}
	errUnusable    = &afloat.ProviderError{Provider: "p", Status: 402, Kind: afloat.Unusable}
	errBadRequest  = &afloat.ProviderError{Provider: "p", Status: 400, Kind: afloat.Contract}
	errViolation   = &afloat.ContractError{Stage: "schema", Details: []string{"department: missing"}}
)

func throttled(retryAfter time.Duration) error {
	return &afloat.ProviderError{Provider: "p", Status: 429, Kind: afloat.Throttled, RetryAfter: retryAfter}
}

// recorder keeps the events a breaker emits.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) list() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// noJitter is a Config.Rand that puts every open period at its middle: no jitter at all.
func noJitter() float64 { return 0.5 }

// newTest returns a breaker named "p" on a fake clock, recording its events. Unless cfg
// sets Rand, its open periods are not jittered, so that tests can name them.
func newTest(t *testing.T, cfg Config) (*Breaker, *clockwork.FakeClock, *recorder) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	rec := new(recorder)
	cfg.Clock = clock
	if cfg.Rand == nil {
		cfg.Rand = noJitter
	}
	if cfg.OnStateChange == nil {
		cfg.OnStateChange = rec.add
	}
	b, err := New("p", cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b, clock, rec
}

// call runs one call through b that ends with err, and returns Allow's error.
func call(b *Breaker, err error) error {
	ctx := context.Background()
	p, aerr := b.Allow(ctx)
	if aerr != nil {
		return aerr
	}
	p.Done(ctx, err)
	return nil
}

// calls runs n calls that end with err and fails the test if one was not admitted.
func calls(t *testing.T, b *Breaker, n int, err error) {
	t.Helper()
	for i := range n {
		if aerr := call(b, err); aerr != nil {
			t.Fatalf("call %d of %d: Allow: %v", i+1, n, aerr)
		}
	}
}

func wantState(t *testing.T, b *Breaker, want State) {
	t.Helper()
	if got := b.State(context.Background()); got != want {
		t.Fatalf("state = %v, want %v", got, want)
	}
}

// flakyStore is a MemoryStore that fails while fail is set, and whenever ctx is done (as a
// network store would).
type flakyStore struct {
	*MemoryStore
	fail atomic.Bool
}

var errStoreDown = errors.New("store down")

func (s *flakyStore) check(ctx context.Context) error {
	if s.fail.Load() {
		return errStoreDown
	}
	return ctx.Err()
}

func (s *flakyStore) Load(ctx context.Context, name string) (Record, error) {
	if err := s.check(ctx); err != nil {
		return Record{}, err
	}
	return s.MemoryStore.Load(ctx, name)
}

func (s *flakyStore) Swap(ctx context.Context, name string, revision uint64, next Record) (Record, bool, error) {
	if err := s.check(ctx); err != nil {
		return Record{}, false, err
	}
	return s.MemoryStore.Swap(ctx, name, revision, next)
}

func (s *flakyStore) Count(ctx context.Context, name string, epoch uint64, failed bool, now time.Time, window time.Duration) (Counts, error) {
	if err := s.check(ctx); err != nil {
		return Counts{}, err
	}
	return s.MemoryStore.Count(ctx, name, epoch, failed, now, window)
}

func (s *flakyStore) AcquireProbe(ctx context.Context, name string, epoch uint64, now time.Time, ttl time.Duration) (uint64, bool, error) {
	if err := s.check(ctx); err != nil {
		return 0, false, err
	}
	return s.MemoryStore.AcquireProbe(ctx, name, epoch, now, ttl)
}

func (s *flakyStore) ReleaseProbe(ctx context.Context, name string, epoch, token uint64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.MemoryStore.ReleaseProbe(ctx, name, epoch, token)
}

func newTestClock() *clockwork.FakeClock { return clockwork.NewFakeClockAt(start) }
