package review

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// slaPages bounds the pages of one task's items one SLAWatch.Check reads; what is left
// waits for the next Check.
const slaPages = 10

// SLAWatch counts, in afloat_review_sla_breaches_total{task}, each item that outlives its
// task's review SLA unanswered: still pending or claimed when the SLA ran out, or answered
// after. Check examines the items whose SLA ran out since the last Check, in queue order, and
// remembers where it stopped, so that each item is examined once, when its SLA has run out:
// it counts once, however often Check runs. Nothing is written to the store.
//
// The watch starts at NewSLAWatch: an item whose SLA ran out before (while no watch ran, or
// under the watch of a process since restarted, which counted it) is not counted, so a
// restart counts no item twice, and an item whose SLA runs out while no process runs is not
// counted at all. Each process counts the items of the store it watches: gateways that share
// a store (PostgreSQL) each count every item.
//
// It runs no goroutine: its host calls Check (config.Build does when the metrics are
// scraped). It is safe for concurrent use; Checks run one at a time.
type SLAWatch struct {
	store Store
	sla   map[string]time.Duration
	opts  Options

	mu sync.Mutex
	// next is, per task, the List cursor after the last item examined.
	next map[string]string
}

// NewSLAWatch watches the items of store whose task has an SLA in sla (by task name; a task
// without one, or with 0, is not watched), from now on opts.Clock; opts.Metrics receives the
// count (nil: none) and opts.Logger a line per task and Check that counted breaches.
func NewSLAWatch(store Store, sla map[string]time.Duration, opts Options) *SLAWatch {
	opts = opts.withDefaults()
	w := &SLAWatch{store: store, sla: map[string]time.Duration{}, opts: opts, next: map[string]string{}}
	start := opts.Clock.Now()
	for task, d := range sla {
		if d > 0 {
			w.sla[task] = d
			// Just before the items queued d before now, whose SLA runs out from now on: the
			// id sorts after every id of that nanosecond.
			w.next[task] = encodeCursor(&Item{CreatedAt: start.Add(-d - time.Nanosecond), ID: "~"})
		}
	}
	return w
}

// Check examines the items whose SLA ran out since the last Check and counts those not
// answered within it; it returns the items counted, by task. On an error it keeps what it
// examined before it, and the next Check goes on from there.
func (w *SLAWatch) Check(ctx context.Context) (map[string]int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.opts.Clock.Now()
	out := map[string]int{}
	for _, task := range slices.Sorted(maps.Keys(w.sla)) {
		n, err := w.checkTask(ctx, task, now)
		if n > 0 {
			out[task] = n
			if m := w.opts.Metrics; m != nil {
				m.ReviewSLABreaches.WithLabelValues(task).Add(float64(n))
			}
			w.opts.Logger.Warn("review items past their SLA", "task", task, "items", n, "review_sla", w.sla[task].String())
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// checkTask examines the task's items whose SLA ran out before now, from where the last
// Check stopped, and returns how many it counted.
func (w *SLAWatch) checkTask(ctx context.Context, task string, now time.Time) (int, error) {
	sla := w.sla[task]
	n := 0
	for range slaPages {
		page, err := w.store.List(ctx, Filter{Task: task, Cursor: w.next[task], Limit: maxLimit})
		if err != nil {
			return n, err
		}
		for _, it := range page.Items {
			due := it.CreatedAt.Add(sla)
			if !due.Before(now) {
				return n, nil // queue order: the SLA of the rest has not run out either
			}
			if !it.Answered() || it.ResolvedAt.After(due) {
				n++
			}
			w.next[task] = encodeCursor(it)
		}
		if page.Next == "" {
			break
		}
	}
	return n, nil
}

// Overdue reports whether it has outlived sla unanswered at now: it is not answered and was
// queued longer than sla ago. A zero sla is never overdue.
func (it *Item) Overdue(sla time.Duration, now time.Time) bool {
	return sla > 0 && !it.Answered() && it.CreatedAt.Add(sla).Before(now)
}
