package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPromptSeriesAtStart: Init exports every result of a prompt version at zero, the
// answers cut by the token limit (truncated) among them, so that a dashboard sees them before
// the first one.
func TestPromptSeriesAtStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPromptMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Init("triage", "gigachat-pro", "v3")
	want := []string{"ok", "extract", "repair", "truncated", "schema"}
	if n := testutil.CollectAndCount(m.Answers); n != len(want) {
		t.Fatalf("%d series, want %d", n, len(want))
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "result" {
					have[l.GetValue()] = true
				}
			}
		}
	}
	for _, r := range want {
		if !have[r] {
			t.Errorf("afloat_prompt_answers_total{result=%q} not exported at start", r)
		}
	}
}
