package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/afloat-dev/afloat/config"
)

// metricsExample is the committed /metrics of a short demo run.
var metricsExample = filepath.Join("..", "..", "docs", "metrics-example.txt")

const metricsExampleHeader = `# The /metrics of a short demo run, at its end: afloat demo --duration 20s --rate 10 --seed 1
# (the primary down from 5s to 13s), on a simulated clock. afloat's own metrics only: the Go
# runtime's (go_*) and the process's (process_*) are left out. Regenerate it with
#   go test ./cmd/afloat -run TestMetricsExample -update
`

// demoScrape runs the demo for 20 simulated seconds and returns its afloat_* metrics in
// Prometheus's text format.
func demoScrape(t *testing.T) []byte {
	t.Helper()
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		done := func(rt *config.Runtime) {
			fams, err := rt.Registry.Gather()
			if err != nil {
				t.Error(err)
				return
			}
			enc := expfmt.NewEncoder(&out, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, f := range fams {
				if strings.HasPrefix(f.GetName(), "afloat_") {
					if err := enc.Encode(f); err != nil {
						t.Error(err)
					}
				}
			}
		}
		if _, err := runDemo(t.Context(), demoOptions{Duration: 20 * time.Second, Rate: 10, Seed: 1, Done: done}); err != nil {
			t.Fatal(err)
		}
	})
	if out.Len() == 0 {
		t.Fatal("the demo's registry gave no afloat metric")
	}
	return out.Bytes()
}

func familyNames(t *testing.T, text []byte) []string {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, f := range fams {
		if len(f.GetMetric()) > 0 || f.GetType() == dto.MetricType_UNTYPED {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestMetricsExample: docs/metrics-example.txt holds every afloat metric a short demo run
// exports, and no metric it does not; -update rewrites it from a fresh run.
func TestMetricsExample(t *testing.T) {
	fresh := demoScrape(t)
	if *update {
		if err := os.WriteFile(metricsExample, append([]byte(metricsExampleHeader), fresh...), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(metricsExample)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/afloat -run TestMetricsExample -update writes it)", err)
	}
	have, want := familyNames(t, committed), familyNames(t, fresh)
	for _, name := range want {
		if !slices.Contains(have, name) {
			t.Errorf("%s is exported, but not in %s: regenerate it with -update", name, metricsExample)
		}
	}
	for _, name := range have {
		if !slices.Contains(want, name) {
			t.Errorf("%s is in %s, but a demo run no longer exports it: regenerate it with -update", name, metricsExample)
		}
	}
}
