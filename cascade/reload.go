package cascade

import (
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
	"github.com/prometheus/client_golang/prometheus"
)

// A config reload builds a new Engine over the old one (Config.Previous) instead of changing
// the old one in place: the calls in flight finish on the tasks, routes and providers they
// started with, and a reload that fails half way leaves the old engine as it was. What the
// new engine carries over it shares with the old one, by pointer:
//
//   - a provider whose adapter and settings are the same: the upstream whole (breaker,
//     bulkhead count, retry budget, background probe), and the latency estimates of each
//     of its tasks and routes that remain;
//   - each task's and route's fallback-share and spend windows, by name;
//   - a task's canary (its figures and decision) when its settings are the same.
//
// TakeOver then puts the new engine in service: the providers' series read its breakers,
// those of providers and tasks the reload took out are dropped, and the old engine closes
// (its probes of providers the new one did not carry over stop).

// inheritance is what an engine built over Previous still reads of it while its tasks and
// routes are built. It holds none of Previous's engine, so that an engine carried over by
// many reloads keeps no chain of engines alive.
type inheritance struct {
	upstreams map[string]*upstream
	latency   *latency.Set
	shares    *shareBook
	spends    *spendBook
	canaries  *canaryBook
}

func (e *Engine) inheritance() *inheritance {
	return &inheritance{upstreams: e.upstreams, latency: e.latency, shares: &e.shares, spends: &e.spends, canaries: &e.canaries}
}

// carryOver returns e's upstream for pc when pc has the same adapter and settings, or nil.
// It is safe on a nil e.
func (e *Engine) carryOver(pc ProviderConfig) *upstream {
	if e == nil {
		return nil
	}
	u := e.upstreams[pc.Name]
	if u == nil || !sameAdapter(u.p, pc.Provider) || !reflect.DeepEqual(u.settings, comparable(pc)) {
		return nil
	}
	return u
}

// sameAdapter reports whether a and b are the same adapter value; an adapter whose type
// cannot be compared is never the same.
func sameAdapter(a, b afloat.Provider) bool {
	if a == nil || b == nil || reflect.TypeOf(a) != reflect.TypeOf(b) || !reflect.TypeOf(a).Comparable() {
		return false
	}
	return a == b
}

// comparable returns pc less what carryOver does not compare: the adapter (compared by
// identity), and the breaker's hooks, clock, random source and store, which are functions
// and connections rather than settings.
func comparable(pc ProviderConfig) ProviderConfig {
	pc.Provider = nil
	pc.Breaker.OnStateChange, pc.Breaker.Clock, pc.Breaker.Rand, pc.Breaker.Store = nil, nil, nil, nil
	return pc
}

// estimator returns the estimator of u for scope: the previous engine's when u was carried
// over and had one, else one made with cfg.
func (e *Engine) estimator(u *upstream, scope string, cfg latency.Config) (*latency.Estimator, error) {
	if from := e.from.Load(); from != nil && from.upstreams[u.name] == u {
		if est, ok := from.latency.Lookup(u.name, scope); ok {
			return e.latency.Adopt(u.name, scope, est), nil
		}
	}
	return e.latency.Estimator(u.name, scope, cfg)
}

// shareOf returns the fallback-share window of the task or route name: the previous
// engine's, when it had one, else a new one.
func (e *Engine) shareOf(name string) *shareWindow {
	var prev *shareWindow
	if from := e.from.Load(); from != nil {
		prev = from.shares.lookup(name)
	}
	return e.shares.of(name, func() *shareWindow {
		if prev != nil {
			return prev
		}
		return newShareWindow(e.clock)
	})
}

// spendOf returns the spend window of scope, as spendBook.of does, taking the previous
// engine's when it had one.
func (e *Engine) spendOf(scope, currency string) *spendWindow {
	if from := e.from.Load(); from != nil {
		e.spends.adopt(scope, from.spends)
	}
	return e.spends.of(scope, currency)
}

// TakeOver puts e in service in place of prev, the engine it was built over
// (Config.Previous), once e's tasks and routes are what is served: the providers' series
// (afloat_circuit_state) read e's breakers, the gauges of the providers, tasks and routes
// that e does not have are dropped, and prev is closed, so that its background probes of the
// providers e did not carry over stop. The calls in flight on prev's tasks and routes finish
// there. Tasks and routes built on e after TakeOver take nothing more from prev. Call it once.
func (e *Engine) TakeOver(prev *Engine) {
	e.from.Store(nil)
	e.exportProviders()
	m := e.metrics
	for _, name := range prev.order {
		if _, ok := e.upstreams[name]; !ok {
			m.CircuitState.Remove(name)
			m.ConcurrencyLimit.DeleteLabelValues(name)
			m.ConcurrencyQueued.DeleteLabelValues(name)
		}
	}
	before, now := prev.scopesNow(), e.scopesNow()
	for scope, providers := range before {
		kept, ok := now[scope]
		for _, p := range providers {
			if !slices.Contains(kept, p) {
				m.ReadTimeout.DeleteLabelValues(p, scope)
			}
		}
		if !ok {
			m.FallbackShare.DeleteLabelValues(scope)
			m.Shed.DeleteLabelValues(scope)
			m.SourceShare.DeletePartialMatch(prometheus.Labels{"task": scope})
		}
	}
	prev.canaries.mu.Lock()
	old := maps.Clone(prev.canaries.runs)
	prev.canaries.mu.Unlock()
	for name, run := range old {
		if now := e.canaries.lookup(name); now != run {
			// The reload dropped or renewed the canary: the old one decides nothing any more
			// (the calls still in flight on prev only count), and a dropped one's series go.
			run.c.OnDecision(nil)
			if now == nil {
				m.CanaryShare.DeleteLabelValues(name)
				m.CanaryDecisions.DeletePartialMatch(prometheus.Labels{"task": name})
			}
		}
	}
	_ = prev.Close()
}

// scopesNow returns a copy of the providers of each task and route.
func (e *Engine) scopesNow() map[string][]string {
	e.namesMu.Lock()
	defer e.namesMu.Unlock()
	out := make(map[string][]string, len(e.scopes))
	for scope, providers := range e.scopes {
		out[scope] = slices.Clone(providers)
	}
	return out
}

// shareBook holds the fallback-share windows of an engine's tasks and routes, by name. The
// zero value is ready; it is safe for concurrent use.
type shareBook struct {
	mu      sync.Mutex
	windows map[string]*shareWindow
}

// of returns name's window, made by make on first use.
func (b *shareBook) of(name string, make func() *shareWindow) *shareWindow {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.windows[name]; w != nil {
		return w
	}
	if b.windows == nil {
		b.windows = map[string]*shareWindow{}
	}
	w := make()
	b.windows[name] = w
	return w
}

func (b *shareBook) lookup(name string) *shareWindow {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.windows[name]
}
