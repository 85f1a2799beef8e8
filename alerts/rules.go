package alerts

import (
	"context"
	"strings"
	"time"

	"github.com/afloat-dev/afloat/review"
)

// maxReviewPages bounds the pages of one task's items that reviewSLA reads at one
// evaluation: past that many items (of the largest page size), the count it reports is a
// floor.
const maxReviewPages = 10

// reviewSLA reads, for each task with a review SLA, how many of its items not answered yet
// (pending, lapsed claims included, or claimed) were queued longer ago than the SLA. The
// store's per-task stats answer most evaluations alone: only a task whose oldest item is
// overdue has its items listed, oldest first, up to the first one still within its SLA.
func (e *Evaluator) reviewSLA(ctx context.Context, r Rule, now time.Time) ([]reading, bool) {
	stats, err := e.cfg.Reviews.Stats(ctx)
	if err != nil {
		e.log.Warn("alerts: review_sla: reading the review queue", "err", err)
		return nil, false
	}
	var out []reading
	for _, t := range e.cfg.Tasks {
		if t.ReviewSLA <= 0 {
			continue
		}
		due := now.Add(-t.ReviewSLA)
		n := 0
		if st := stats[t.Name]; !st.Oldest.IsZero() && st.Oldest.Before(due) {
			for _, status := range []review.Status{review.StatusPending, review.StatusClaimed} {
				c, err := overdue(ctx, e.cfg.Reviews, t.Name, status, due)
				if err != nil {
					e.log.Warn("alerts: review_sla: listing the review queue", "task", t.Name, "err", err)
					return nil, false
				}
				n += c
			}
		}
		out = append(out, reading{scope: Scope{Task: t.Name}, value: float64(n), threshold: r.Above, holds: float64(n) > r.Above})
	}
	return out, true
}

// overdue counts the task's items in status queued before due.
func overdue(ctx context.Context, q Reviews, task string, status review.Status, due time.Time) (int, error) {
	n := 0
	f := review.Filter{Status: status, Task: task, Limit: 500}
	for range maxReviewPages {
		page, err := q.List(ctx, f)
		if err != nil {
			return 0, err
		}
		for _, it := range page.Items {
			if !it.CreatedAt.Before(due) {
				return n, nil // oldest first: the rest are within their SLA
			}
			n++
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	return n, nil
}

// drillStale reads each drilled task's and route's drill age: stale when its last passing
// drill is older than the max age, or when none of its drills passed.
func (e *Evaluator) drillStale(now time.Time) []reading {
	var out []reading
	limit := e.cfg.DrillMaxAge
	for scope, ds := range e.cfg.Drills.Drills() {
		if ds.Last == nil {
			continue
		}
		_, name, _ := strings.Cut(scope, ":")
		rd := reading{scope: Scope{Task: name}, threshold: limit.Seconds()}
		if p := ds.LastPassed; p != nil {
			age := now.Sub(p.FinishedAt)
			rd.value, rd.holds = age.Seconds(), age > limit
		} else {
			rd.value, rd.holds = now.Sub(ds.Last.FinishedAt).Seconds(), true
		}
		out = append(out, rd)
	}
	return out
}
