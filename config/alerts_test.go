package config

import (
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/provider/fault"
)

// TestAlertsLoad: a written alert is on, with the defaults of its absent keys; a left-out one
// is off.
func TestAlertsLoad(t *testing.T) {
	f := mustParse(t, "alerts:\n  fallback_share: {above: 0.3, for: 10m}\n  unusable: {}\n"+minimal)
	a := f.Alerts
	switch {
	case !a.FallbackShare.On || a.FallbackShare.Window != 5*time.Minute || a.FallbackShare.MinCalls != 20 || a.FallbackShare.For != 10*time.Minute:
		t.Errorf("fallback_share %+v", a.FallbackShare)
	case !a.Unusable.On || a.Unusable.Window != 0:
		t.Errorf("unusable %+v", a.Unusable)
	case a.PrimaryOpen.On || a.ReviewSLA.On || a.ContractViolationRate.On || a.DrillStale.On:
		t.Errorf("alerts left out are on: %+v", a)
	case a.EvaluateEvery != 5*time.Second:
		t.Errorf("evaluate_every %v", a.EvaluateEvery)
	}
}

// TestAlertsLoadErrors: each key an alert cannot take as written is an error at its path.
func TestAlertsLoadErrors(t *testing.T) {
	tests := []struct {
		snippet, path, msg string
	}{
		{"fallback_share: {above: 1.5}", "alerts.fallback_share.above", "outside [0, 1]"},
		{"primary_open: {above: 0.5}", "alerts.primary_open.above", "has no threshold"},
		{"review_sla: {above: 0.5}", "alerts.review_sla.above", "not a number of items"},
		{"drill_stale: {window: 5m}", "alerts.drill_stale.window", "applies to fallback_share and contract_violation_rate only"},
		{"contract_violation_rate: {min_calls: 0}", "alerts.contract_violation_rate.min_calls", "at least 1"},
		{"fallback_share: {for: -1m}", "alerts.fallback_share.for", "must not be negative"},
		{"unusable: {webhook: \"ftp://hooks.example\"}", "alerts.unusable.webhook", "invalid url"},
		{"unusable: {secret: s3cret}", "alerts.unusable.secret", "there is none"},
		{"evaluate_every: 0s", "alerts.evaluate_every", "must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			_, err := Parse([]byte("alerts:\n  "+tc.snippet+"\n"+minimal), "/cfg", noEnv)
			if findError(asErrors(t, err), tc.path, tc.msg) == nil {
				t.Fatalf("no error at %s with %q in %v", tc.path, tc.msg, err)
			}
		})
	}
}

// TestAlertsBuild: Build makes the evaluator of the alerts on, exports afloat_alerts_firing
// at 0 for each from the start, and wires the breakers to it: a primary whose key is refused
// (401) opens its breaker as unusable, and both unusable and primary_open fire.
func TestAlertsBuild(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	rt := buildTree(t, "alerts:\n  primary_open: {}\n  unusable: {}\n  fallback_share: {above: 0.3}\n"+minimal, fc)
	if rt.Alerts == nil {
		t.Fatal("no evaluator")
	}
	want := `
# HELP afloat_alerts_firing Scopes (tasks, providers) of each alert firing now.
# TYPE afloat_alerts_firing gauge
afloat_alerts_firing{alert="fallback_share"} 0
afloat_alerts_firing{alert="primary_open"} 0
afloat_alerts_firing{alert="unusable"} 0
`
	if err := testutil.GatherAndCompare(rt.Registry, strings.NewReader(want), "afloat_alerts_firing"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Faults["primary"].Set(fault.Fault{Mode: fault.ModeUnavailable, Status: 401}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Tasks["triage"].RunJSON(ctx, afloat.Input{"subject": "s", "message": "m"})
	if err != nil || res.Provider != "backup" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	rt.Alerts.Evaluate(ctx)
	var got []string
	for _, s := range rt.Alerts.Firing() {
		got = append(got, string(s.Alert)+" "+s.Scope.String())
	}
	if strings.Join(got, "; ") != "primary_open task triage, provider primary; unusable provider primary" {
		t.Fatalf("firing %q", got)
	}
	firing := strings.NewReplacer(`primary_open"} 0`, `primary_open"} 1`, `unusable"} 0`, `unusable"} 1`).Replace(want)
	if err := testutil.GatherAndCompare(rt.Registry, strings.NewReader(firing), "afloat_alerts_firing"); err != nil {
		t.Fatal(err)
	}

	none := buildTree(t, minimal, fc)
	if none.Alerts != nil {
		t.Error("an evaluator without alerts")
	}
	if n, err := testutil.GatherAndCount(none.Registry, "afloat_alerts_firing"); err != nil || n != 0 {
		t.Errorf("%d afloat_alerts_firing series without alerts (%v)", n, err)
	}
}
