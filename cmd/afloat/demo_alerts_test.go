package main

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat/alerts"
)

// firedDuring reports whether the fallback_share alert fired for task while the primary was
// down.
func firedDuring(rep *demoReport, task string) bool {
	for _, sp := range rep.AlertLog {
		if sp.Name == alerts.FallbackShare && sp.Scope == task && sp.FiredAt > rep.FaultAt && sp.FiredAt < rep.ClearAt {
			return true
		}
	}
	return false
}

// TestDemoAlertsOnSimulatedTime runs the demo's minute on synctest's clock: the
// fallback_share alert of the demo's config (above 30% for 2s over 4s) fires for triage a
// few seconds into the outage, not before it, and resolves once the primary has its
// traffic back; the summary says so.
func TestDemoAlertsOnSimulatedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rep, err := runDemo(t.Context(), demoOptions{Duration: time.Minute, Rate: 20, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var triage *demoAlertSpan
		for i, sp := range rep.AlertLog {
			if sp.Scope == "triage" && triage == nil {
				triage = &rep.AlertLog[i]
			}
		}
		if triage == nil {
			t.Fatalf("no alert for triage: %+v", rep.AlertLog)
		}
		hold, _, _ := demoOptions{Duration: time.Minute}.alertTimes()
		switch {
		case triage.FiredAt < rep.FaultAt+hold || triage.FiredAt > rep.FaultAt+4*hold:
			t.Errorf("fired at %v, want within a few seconds after %v of the fault at %v", triage.FiredAt, hold, rep.FaultAt)
		case !triage.Resolved || triage.ResolvedAt < rep.ClearAt+hold:
			t.Errorf("span %+v: want resolved %v after the fault cleared at %v at the earliest", triage, hold, rep.ClearAt)
		}
		var b strings.Builder
		writeDemoSummary(&b, rep)
		if want := "fallback_share for triage: fired at " + fmtAt(triage.FiredAt) + ", resolved at " + fmtAt(triage.ResolvedAt); !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
		if !strings.Contains(b.String(), "alerts (fallback_share above 30% for 2.0s, over 4.0s with 5 calls at least):") {
			t.Errorf("summary lacks the alert's rule:\n%s", b.String())
		}
		t.Logf("triage alert: fired at %v, resolved at %v (fault %v–%v)", triage.FiredAt, triage.ResolvedAt, rep.FaultAt, rep.ClearAt)
	})
}

// TestDemoAlertLine: the live view's alert line, with alerts firing and without.
func TestDemoAlertLine(t *testing.T) {
	rep := sampleReport()
	rep.AlertRule = "fallback_share above 30%"
	if got := alertLine(rep); !strings.Contains(got, "alerts   none firing") {
		t.Errorf("line %q", got)
	}
	rep.Alerts = []demoAlert{
		{Name: alerts.FallbackShare, Scope: "triage", Since: 20 * time.Second, Value: 0.93, Threshold: 0.3},
		{Name: alerts.FallbackShare, Scope: "moderation", Since: 20 * time.Second, Value: 0.96, Threshold: 0.3},
	}
	want := ansiRed + "alerts   fallback_share triage 93% > 30% since 20.0s · fallback_share moderation 96% > 30% since 20.0s"
	if got := alertLine(rep); !strings.HasPrefix(got, want) {
		t.Errorf("line %q, want %q", got, want)
	}
}
