package breaker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// buckets is the number of buckets of a failure window.
const buckets = 10

// MemoryStore is a Store that keeps breaker state in the process. Breakers that share one
// MemoryStore and one name share one state, as replicas share a Redis store. It never
// returns an error. The zero MemoryStore is not usable; call NewMemoryStore. It is safe for
// concurrent use.
type MemoryStore struct {
	mu      sync.RWMutex // guards entries, not what they point to
	entries map[string]*memEntry
	tokens  atomic.Uint64
}

// memEntry is the state of one breaker name.
type memEntry struct {
	mu          sync.Mutex
	rec         Record
	buckets     [buckets]bucket
	consecutive int
	probe       uint64 // token of the probe slot's holder; 0 when free
	probeUntil  time.Time
}

// bucket counts the calls of one slice of a window; index is the slice's start divided by
// its width.
type bucket struct {
	index           int64
	calls, failures int
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{entries: make(map[string]*memEntry)}
}

func (s *MemoryStore) entry(name string) *memEntry {
	s.mu.RLock()
	e := s.entries[name]
	s.mu.RUnlock()
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e = s.entries[name]; e == nil {
		e = new(memEntry)
		s.entries[name] = e
	}
	return e
}

// Load implements Store.
func (s *MemoryStore) Load(ctx context.Context, name string) (Record, error) {
	e := s.entry(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rec, nil
}

// Swap implements Store.
func (s *MemoryStore) Swap(ctx context.Context, name string, revision uint64, next Record) (Record, bool, error) {
	e := s.entry(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.Revision != revision {
		return e.rec, false, nil
	}
	next.Revision = revision + 1
	if next.Epoch != e.rec.Epoch {
		e.buckets = [buckets]bucket{}
		e.consecutive = 0
		e.probe = 0
	}
	e.rec = next
	return next, true, nil
}

// Count implements Store.
func (s *MemoryStore) Count(ctx context.Context, name string, epoch uint64, failed bool, now time.Time, window time.Duration) (Counts, error) {
	e := s.entry(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.Epoch != epoch {
		return Counts{}, nil
	}
	width := max(int64(window/buckets), 1)
	index := now.UnixNano() / width
	b := &e.buckets[(index%buckets+buckets)%buckets]
	if b.index != index {
		*b = bucket{index: index}
	}
	b.calls++
	if failed {
		b.failures++
		e.consecutive++
	} else {
		e.consecutive = 0
	}
	c := Counts{Current: true, Consecutive: e.consecutive}
	for _, b := range e.buckets {
		if b.index > index-buckets && b.index <= index {
			c.Calls += b.calls
			c.Failures += b.failures
		}
	}
	return c, nil
}

// AcquireProbe implements Store.
func (s *MemoryStore) AcquireProbe(ctx context.Context, name string, epoch uint64, now time.Time, ttl time.Duration) (uint64, bool, error) {
	e := s.entry(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.Epoch != epoch || e.probe != 0 && now.Before(e.probeUntil) {
		return 0, false, nil
	}
	e.probe = s.tokens.Add(1)
	e.probeUntil = now.Add(ttl)
	return e.probe, true, nil
}

// ReleaseProbe implements Store.
func (s *MemoryStore) ReleaseProbe(ctx context.Context, name string, epoch, token uint64) error {
	e := s.entry(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.Epoch == epoch && e.probe == token {
		e.probe = 0
	}
	return nil
}
