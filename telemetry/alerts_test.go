package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAlertsFiringExportedAtZero: every alert the config turns on has its series from the
// start, at 0; registering twice on one registry is an error.
func TestAlertsFiringExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	g, err := NewAlertsFiring(reg, []string{"fallback_share", "unusable"})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP afloat_alerts_firing Scopes (tasks, providers) of each alert firing now.
# TYPE afloat_alerts_firing gauge
afloat_alerts_firing{alert="fallback_share"} 0
afloat_alerts_firing{alert="unusable"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	g.WithLabelValues("unusable").Set(1)
	if v := testutil.ToFloat64(g.WithLabelValues("unusable")); v != 1 {
		t.Fatalf("gauge %v", v)
	}
	if _, err := NewAlertsFiring(reg, nil); err == nil {
		t.Fatal("registering twice succeeded")
	}
}
