package review

import (
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/jonboulle/clockwork"
)

// meter publishes a store's metrics; a nil *telemetry.Metrics makes every method a no-op.
// Safe for concurrent use (the collectors are).
type meter struct {
	m *telemetry.Metrics
}

func newMeter(m *telemetry.Metrics, clock clockwork.Clock) meter {
	if m != nil {
		m.ReviewOldestPending.SetClock(clock.Now)
		m.ReviewStoreHealthy.Set(1)
	}
	return meter{m: m}
}

func (mt meter) enqueued(task string) {
	if mt.m != nil {
		mt.m.ReviewEnqueued.WithLabelValues(task).Inc()
	}
}

func (mt meter) answered(it *Item) {
	if mt.m == nil {
		return
	}
	switch it.Status {
	case StatusResolved:
		mt.m.ReviewResolved.WithLabelValues(it.Task).Inc()
	case StatusRejected:
		mt.m.ReviewRejected.WithLabelValues(it.Task).Inc()
	}
}

func (mt meter) purged(task string, n int) {
	if mt.m != nil && n > 0 {
		mt.m.ReviewPurged.WithLabelValues(task).Add(float64(n))
	}
}

func (mt meter) healthy(ok bool) {
	if mt.m == nil {
		return
	}
	if ok {
		mt.m.ReviewStoreHealthy.Set(1)
	} else {
		mt.m.ReviewStoreHealthy.Set(0)
	}
}

// depth publishes one task's unanswered items: the queue depth and the age of the oldest
// (computed when scraped).
func (mt meter) depth(task string, st TaskStats) {
	if mt.m == nil {
		return
	}
	mt.m.ReviewQueueDepth.WithLabelValues(task).Set(float64(st.Pending + st.Claimed))
	mt.m.ReviewOldestPending.Set(task, st.Oldest)
}
