package review

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat/telemetry"
)

// TestSLAWatch: each item that outlives its task's SLA unanswered (still waiting, or
// answered late) counts once, however often the watch checks; an item answered in time, an
// item of a task without an SLA, and one whose SLA ran out before the watch started (a
// restart) do not count.
func TestSLAWatch(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		m, err := telemetry.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		s := o.open(t, Options{Clock: clk})
		const sla = 10 * time.Minute
		stale := enqueue(t, s, modItem("acme", "queued long before the watch"))
		clk.Advance(20 * time.Minute)
		slas := map[string]time.Duration{"moderation": sla, "triage": 0}
		w := NewSLAWatch(s, slas, Options{Clock: clk, Metrics: m})

		waiting := enqueue(t, s, modItem("acme", "a"))
		inTime := enqueue(t, s, modItem("acme", "b"))
		late := enqueue(t, s, modItem("acme", "c"))
		claimed := enqueue(t, s, modItem("globex", "d"))
		other := modItem("acme", "e")
		other.Task = "gate" // no SLA watched
		enqueue(t, s, other)
		triage := modItem("acme", "f")
		triage.Task = "triage" // an SLA of 0
		enqueue(t, s, triage)
		must(t)(s.Claim(ctx, claimed, "bob"))

		check := func(when string, want map[string]int, total float64) {
			t.Helper()
			got, err := w.Check(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s: counted %v, want %v", when, got, want)
			}
			if v := testutil.ToFloat64(m.ReviewSLABreaches.WithLabelValues("moderation")); v != total {
				t.Errorf("%s: afloat_review_sla_breaches_total %v, want %v", when, v, total)
			}
		}
		clk.Advance(5 * time.Minute)
		must(t)(s.Resolve(ctx, inTime, "alice", json.RawMessage(`{"allowed":true}`)))
		check("within the SLA", map[string]int{}, 0)
		clk.Advance(5 * time.Minute)
		check("as the SLA runs out", map[string]int{}, 0)
		clk.Advance(5 * time.Minute)
		must(t)(s.Resolve(ctx, late, "alice", json.RawMessage(`{"allowed":false}`)))
		clk.Advance(time.Minute)
		check("past the SLA", map[string]int{"moderation": 3}, 3) // waiting, late, claimed
		check("again", map[string]int{}, 3)
		must(t)(s.Reject(ctx, waiting, "alice", "too late to matter"))
		clk.Advance(time.Hour)
		check("an hour on", map[string]int{}, 3)

		next := enqueue(t, s, modItem("acme", "g"))
		clk.Advance(sla + time.Second)
		check("a later item", map[string]int{"moderation": 1}, 4)

		for _, tc := range []struct {
			id   string
			want bool
		}{{stale, true}, {claimed, true}, {next, true}, {inTime, false}, {late, false}} {
			it, err := s.Lookup(ctx, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if got := it.Overdue(sla, clk.Now()); got != tc.want {
				t.Errorf("%s (%s): overdue %v, want %v", tc.id, it.Status, got, tc.want)
			}
		}
		if it, _ := s.Lookup(ctx, next); it.Overdue(sla, it.CreatedAt.Add(sla)) || !it.Overdue(sla, it.CreatedAt.Add(sla+time.Nanosecond)) || it.Overdue(0, clk.Now()) {
			t.Errorf("overdue is not strictly past the SLA")
		}

		// A restart: the watch of the new process counts none of the items overdue before it.
		restarted := NewSLAWatch(s, slas, Options{Clock: clk, Metrics: m})
		if got, err := restarted.Check(ctx); err != nil || len(got) != 0 {
			t.Errorf("after a restart: counted %v, %v; want none", got, err)
		}
	})
}
