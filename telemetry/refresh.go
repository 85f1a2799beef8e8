package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// RefreshedCounterVec is a CounterVec brought up to date each time it is collected: its
// refresh func runs first (afloat_review_sla_breaches_total counts the review items whose SLA
// ran out since the last scrape, with no goroutine of its own). A nil refresh collects the
// counters as they are. It is safe for concurrent use.
type RefreshedCounterVec struct {
	*prometheus.CounterVec

	mu      sync.Mutex
	refresh func()
}

// NewRefreshedCounterVec returns a RefreshedCounterVec without a refresh.
func NewRefreshedCounterVec(opts prometheus.CounterOpts, labels []string) *RefreshedCounterVec {
	return &RefreshedCounterVec{CounterVec: prometheus.NewCounterVec(opts, labels)}
}

// SetRefresh makes fn run before each collection; nil runs nothing. fn must be safe for
// concurrent use, and should bound its own time: a scrape waits for it.
func (c *RefreshedCounterVec) SetRefresh(fn func()) {
	c.mu.Lock()
	c.refresh = fn
	c.mu.Unlock()
}

// Collect runs the refresh, then collects the counters.
func (c *RefreshedCounterVec) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fn := c.refresh
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
	c.CounterVec.Collect(ch)
}
