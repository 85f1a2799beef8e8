package main

import (
	"slices"
	"testing"
	"time"
)

// TestDrillChecksFail: each check of the report fails on the one thing it watches, from a
// drill that passes every check: a credential in an answer or in the log (no_credentials),
// calls after the opening that still paid the provider or were slow (fail_fast), and
// metrics that did not count the opening (metrics_moved).
func TestDrillChecksFail(t *testing.T) {
	const apiKey = "ck-drill-0123456789"
	healthy := func(at time.Duration) drillCall {
		return drillCall{Phase: "healthy", At: at, Latency: 20 * time.Millisecond, Status: 200, Source: "model", Provider: "primary", body: []byte(`{"source":"model"}`)}
	}
	faulted := func(at time.Duration, skipped bool) drillCall {
		return drillCall{Phase: "fault", At: at, Latency: 25 * time.Millisecond, Status: 200, Source: "model", Provider: "backup",
			Degraded: true, Skipped: skipped, body: []byte(`{"source":"model","degraded":true}`)}
	}
	recovered := func(at time.Duration) drillCall {
		c := healthy(at)
		c.Phase = "recovery"
		return c
	}
	const opened, cleared, closed = 2 * time.Second, 5 * time.Second, 6 * time.Second
	baseline := func() []drillCall {
		var calls []drillCall
		for i := range 10 {
			calls = append(calls, healthy(time.Duration(i)*100*time.Millisecond))
		}
		for i := range 20 {
			at := time.Second + time.Duration(i)*200*time.Millisecond
			calls = append(calls, faulted(at, at >= opened))
		}
		for i := range 5 {
			calls = append(calls, recovered(closed+time.Duration(i)*100*time.Millisecond))
		}
		return calls
	}
	before, after := drillMetrics{Read: true, Degraded: 3, Opened: 1}, drillMetrics{Read: true, Degraded: 23, Opened: 2}
	tests := []struct {
		name   string
		mutate func(calls []drillCall, after *drillMetrics, logLeaks *[]string)
		fails  string // "" for none
	}{
		{"a drill that passes", func([]drillCall, *drillMetrics, *[]string) {}, ""},
		{"a credential in an answer", func(calls []drillCall, _ *drillMetrics, _ *[]string) {
			calls[15].body = []byte(`{"error":"upstream said ` + apiKey + `"}`)
		}, "no_credentials"},
		{"a credential in the log", func(_ []drillCall, _ *drillMetrics, leaks *[]string) {
			*leaks = []string{"credential #1 (19 bytes)"}
		}, "no_credentials"},
		{"calls after the opening still paid the provider", func(calls []drillCall, _ *drillMetrics, _ *[]string) {
			for i := range calls {
				if calls[i].Phase == "fault" && calls[i].At >= opened+time.Second {
					calls[i].Skipped = false
				}
			}
		}, "fail_fast"},
		{"slow calls after the opening", func(calls []drillCall, _ *drillMetrics, _ *[]string) {
			for i := range calls {
				if calls[i].Phase == "fault" && calls[i].At >= opened {
					calls[i].Latency = 2 * time.Second
				}
			}
		}, "fail_fast"},
		{"no opening counted", func(_ []drillCall, after *drillMetrics, _ *[]string) { after.Opened = 1 }, "metrics_moved"},
		{"no degraded answer counted", func(_ []drillCall, after *drillMetrics, _ *[]string) { after.Degraded = 3 }, "metrics_moved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls, a := baseline(), after
			var logLeaks []string
			tc.mutate(calls, &a, &logLeaks)
			o := drillOptions{provider: "primary", fault: map[string]any{"mode": "unavailable"}, apiKey: apiKey, recover: time.Minute}
			var r drillReport
			r.check(o, "enrichment", calls, opened, closed, cleared, before, a, logLeaks)
			var want []string
			if tc.fails != "" {
				want = []string{tc.fails}
			}
			if got := r.failedNames(); !slices.Equal(got, want) {
				t.Errorf("failed checks %q, want %q; checks: %+v", got, want, r.Checks)
			}
		})
	}
}
