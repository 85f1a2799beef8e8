package latency

import (
	"cmp"
	"slices"
	"sync"
)

// Set holds one Estimator per (provider, task), created on first use: latency estimates are
// per provider × task (DESIGN.md §4), since one provider answers a short classification much
// faster than a long summary.
//
// The zero Set is ready to use. A Set is safe for concurrent use; the lookup of an existing
// Estimator takes a read lock and does not allocate.
type Set struct {
	mu sync.RWMutex
	m  map[setKey]*Estimator
}

type setKey struct{ provider, task string }

// NewSet returns an empty Set.
func NewSet() *Set { return &Set{m: make(map[setKey]*Estimator)} }

// Estimator returns the Estimator for (provider, task), creating it with cfg on first use;
// every later call returns the same pointer and ignores cfg. The error is NewEstimator's for
// an invalid cfg, returned only when the Estimator had to be created (and then none is
// stored, so a corrected cfg can create it later).
func (s *Set) Estimator(provider, task string, cfg Config) (*Estimator, error) {
	k := setKey{provider, task}
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	if ok {
		return e, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[k]; ok { // created since the read lock was released
		return e, nil
	}
	e, err := NewEstimator(cfg)
	if err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = make(map[setKey]*Estimator)
	}
	s.m[k] = e
	return e, nil
}

// Lookup returns the Estimator for (provider, task) when one was created.
func (s *Set) Lookup(provider, task string) (*Estimator, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.m[setKey{provider, task}]
	return e, ok
}

// Adopt stores e for (provider, task) unless the Set holds one already, and returns the one
// it holds: a config reload carries a provider's estimates into the Set of the engine that
// replaces the old one.
func (s *Set) Adopt(provider, task string, e *Estimator) *Estimator {
	k := setKey{provider, task}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[k]; ok {
		return cur
	}
	if s.m == nil {
		s.m = make(map[setKey]*Estimator)
	}
	s.m[k] = e
	return e
}

// Each calls fn for every Estimator, ordered by provider then task, for /admin/status and
// the read-timeout gauges. fn runs without the Set's lock held, so it may call back into the
// Set; Estimators created meanwhile may be missed.
func (s *Set) Each(fn func(provider, task string, e *Estimator)) {
	type entry struct {
		k setKey
		e *Estimator
	}
	s.mu.RLock()
	all := make([]entry, 0, len(s.m))
	for k, e := range s.m {
		all = append(all, entry{k, e})
	}
	s.mu.RUnlock()
	slices.SortFunc(all, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.k.provider, b.k.provider), cmp.Compare(a.k.task, b.k.task))
	})
	for _, x := range all {
		fn(x.k.provider, x.k.task, x.e)
	}
}
