package openfeature

import (
	"context"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/flags"
)

// TestRoundTrip reads afloat's document through OpenFeature: flags.Source → Provider →
// OpenFeature client → Source. The fallback is the opposite of the document everywhere, so
// that any key the trip loses shows.
func TestRoundTrip(t *testing.T) {
	tasks := []string{"triage", "summarize", "extract", "classify"}
	tests := []struct {
		name string
		doc  *flags.Document
	}{
		{"per task", &flags.Document{Tasks: map[string]flags.TaskFlags{
			"triage":    {Blocklist: []string{"globex", "initech"}, RolloutPct: pct(30)},
			"summarize": {Kill: true},
			"extract":   {RolloutPct: pct(0)},
			// classify: absent, so on
		}}},
		{"global kill", &flags.Document{Kill: true, Tasks: map[string]flags.TaskFlags{
			"triage": {Blocklist: []string{"acme"}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fallback := &flags.Document{Kill: !tt.doc.Kill, Tasks: map[string]flags.TaskFlags{}}
			for _, task := range tasks {
				fallback.Tasks[task] = flags.TaskFlags{Kill: !tt.doc.Tasks[task].Kill, Blocklist: []string{"fallback"}, RolloutPct: pct(77)}
			}
			mem, client := afloatClient(t, tt.doc)
			h := start(t, client, tasks, SourceConfig{Fallback: fallback})

			got := h.doc(t)
			if err := h.src.Err(); err != nil {
				t.Fatalf("Err = %v", err)
			}
			if got.Kill != tt.doc.Kill {
				t.Errorf("Kill = %v, want %v", got.Kill, tt.doc.Kill)
			}
			for _, task := range tasks {
				if !sameTask(got.Tasks[task], tt.doc.Tasks[task]) {
					t.Errorf("%s = %+v, want %+v", task, got.Tasks[task], tt.doc.Tasks[task])
				}
				for _, tenant := range []string{"", "acme", "globex", "initech", "umbrella"} {
					if g, w := got.Allow(task, tenant), tt.doc.Allow(task, tenant); g != w {
						t.Errorf("Allow(%s, %q) = %v, want %v", task, tenant, g, w)
					}
				}
			}

			// The Provider raises no events: a change comes through the refresh interval.
			next := &flags.Document{Kill: !tt.doc.Kill}
			if err := mem.Set(context.Background(), next); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Second)
			h.waitFor(t, "the change", func(d *flags.Document) bool { return d.Kill == next.Kill })
		})
	}
}
