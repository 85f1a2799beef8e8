package telemetry

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// CircuitStates is the gauge afloat_circuit_state: each provider's breaker state (0 closed,
// 1 half-open, 2 open), read from the provider's state func when collected. A breaker turns
// half-open when its open period ends, not when a call arrives, so a gauge set on state
// changes would read open until the next call; a scrape that reads the breaker sees
// half-open. It is safe for concurrent use: Watch may run while a scrape collects.
type CircuitStates struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	// states holds each provider's state func; nil for a provider exported before it is
	// watched, which reads 0.
	states map[string]func() float64
}

func newCircuitStates() *CircuitStates {
	return &CircuitStates{
		desc: prometheus.NewDesc("afloat_circuit_state",
			"State of a provider's circuit breaker: 0 closed, 1 half-open, 2 open.", []string{"provider"}, nil),
		states: map[string]func() float64{},
	}
}

// Watch makes provider's series read state at each scrape, replacing any func watched
// before; a nil state reads 0. state must be safe to call from any goroutine and should
// return quickly: a scrape waits for it.
func (c *CircuitStates) Watch(provider string, state func() float64) {
	c.mu.Lock()
	c.states[provider] = state
	c.mu.Unlock()
}

// Remove drops provider's series: a config reload took the provider out.
func (c *CircuitStates) Remove(provider string) {
	c.mu.Lock()
	delete(c.states, provider)
	c.mu.Unlock()
}

// Init exports provider's series, at 0 until it is watched; it keeps a func already watched.
func (c *CircuitStates) Init(provider string) {
	c.mu.Lock()
	if _, ok := c.states[provider]; !ok {
		c.states[provider] = nil
	}
	c.mu.Unlock()
}

// Value returns what provider's series reads now: its state func's value, 0 when it has
// none.
func (c *CircuitStates) Value(provider string) float64 {
	c.mu.Lock()
	state := c.states[provider]
	c.mu.Unlock()
	return read(state)
}

func read(state func() float64) float64 {
	if state == nil {
		return 0
	}
	return state()
}

// Describe implements prometheus.Collector.
func (c *CircuitStates) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. The state funcs run after the lock is released,
// so that a slow or re-entrant one never blocks Watch.
func (c *CircuitStates) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	states := maps.Clone(c.states)
	c.mu.Unlock()
	for p, state := range states {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, read(state), p)
	}
}
