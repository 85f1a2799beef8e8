package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRefreshedCounterVec: each collection runs the refresh first, so that a scrape reads
// what it just counted; without a refresh the counters are collected as they are.
func TestRefreshedCounterVec(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewRefreshedCounterVec(prometheus.CounterOpts{Name: "afloat_test_total", Help: "A test."}, []string{"task"})
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	c.WithLabelValues("moderation")
	if got := testutil.ToFloat64(c); got != 0 {
		t.Fatalf("no refresh: %v, want 0", got)
	}
	runs := 0
	c.SetRefresh(func() {
		runs++
		c.WithLabelValues("moderation").Inc()
	})
	for want := 1; want <= 2; want++ {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if got := fams[0].GetMetric()[0].GetCounter().GetValue(); got != float64(want) || runs != want {
			t.Fatalf("gather %d: %v after %d refreshes", want, got, runs)
		}
	}
	c.SetRefresh(nil)
	if got := testutil.ToFloat64(c); got != 2 || runs != 2 {
		t.Fatalf("refresh removed: %v after %d refreshes, want 2 after 2", got, runs)
	}
}
