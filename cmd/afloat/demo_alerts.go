package main

// The demo's alerts: the config's fallback_share alert, scaled to the run, watched as the
// live view polls, shown in the view and the summary.

import (
	"fmt"
	"strings"
	"time"

	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/config"
)

// demoAlert is an alert firing now, as the live view shows it.
type demoAlert struct {
	Name  alerts.Name
	Scope string
	// Since is when it fired, from the start.
	Since            time.Duration
	Value, Threshold float64
}

// demoAlertSpan is one firing of an alert over the run, from the start.
type demoAlertSpan struct {
	Name                alerts.Name
	Scope               string
	FiredAt, ResolvedAt time.Duration
	Resolved            bool
}

// alertTimes scales the demo's alerts to the run: each must hold for a thirtieth of it,
// measured over a fifteenth, evaluated every sixtieth (2s, 4s and 1s for a minute), so that
// the alert fires soon into the outage and resolves well before the run ends.
func (o demoOptions) alertTimes() (hold, window, every time.Duration) {
	return min(max(o.Duration/30, 200*time.Millisecond), time.Minute),
		min(max(o.Duration/15, 400*time.Millisecond), 5*time.Minute),
		min(max(o.Duration/60, 100*time.Millisecond), 5*time.Second)
}

// scaleAlerts sets the timings of every alert the demo's config turns on to the run's.
func scaleAlerts(f *config.File, opts demoOptions) {
	hold, window, every := opts.alertTimes()
	f.Alerts.EvaluateEvery = every
	for _, a := range []*config.Alert{&f.Alerts.FallbackShare, &f.Alerts.ContractViolationRate} {
		if a.On {
			a.For, a.Window = hold, window
		}
	}
}

// alertRule describes the demo's fallback_share rule for the summary; "" without one.
func alertRule(f *config.File) string {
	a := f.Alerts.FallbackShare
	if !a.On {
		return ""
	}
	return fmt.Sprintf("fallback_share above %.0f%% for %s, over %s with %d calls at least",
		100*a.Above, fmtDur(a.For), fmtDur(a.Window), a.MinCalls)
}

func scopeName(s alerts.Scope) string {
	if s.Task != "" {
		return s.Task
	}
	return s.Provider
}

// pollAlerts records the alerts that fired or resolved since the last poll, as pinned events
// and in the run's log of alerts, and keeps the firing ones for the view.
func (d *demoRun) pollAlerts() {
	if d.rt.Alerts == nil {
		return
	}
	now := map[string]bool{}
	d.rep.Alerts = d.rep.Alerts[:0]
	for _, s := range d.rt.Alerts.Firing() { // in a stable order: by alert, then scope
		a := demoAlert{Name: s.Alert, Scope: scopeName(s.Scope), Since: s.Since.Sub(d.start), Value: s.Value, Threshold: s.Threshold}
		d.rep.Alerts = append(d.rep.Alerts, a)
		k := string(a.Name) + "/" + a.Scope
		now[k] = true
		if i, seen := d.alertSpans[k]; seen && !d.rep.AlertLog[i].Resolved {
			continue
		}
		d.alertSpans[k] = len(d.rep.AlertLog)
		d.rep.AlertLog = append(d.rep.AlertLog, demoAlertSpan{Name: a.Name, Scope: a.Scope, FiredAt: a.Since})
		d.pinnedEvent(a.Since, fmt.Sprintf("alert %s firing for %s: %s, above %s", a.Name, a.Scope,
			alertValue(a.Name, a.Value), alertValue(a.Name, a.Threshold)))
	}
	for i := range d.rep.AlertLog {
		sp := &d.rep.AlertLog[i]
		if sp.Resolved || now[string(sp.Name)+"/"+sp.Scope] {
			continue
		}
		sp.Resolved, sp.ResolvedAt = true, d.clock.Since(d.start)
		d.pinnedEvent(sp.ResolvedAt, fmt.Sprintf("alert %s resolved for %s", sp.Name, sp.Scope))
	}
}

// alertValue writes an alert's value: a share as a percentage.
func alertValue(n alerts.Name, v float64) string {
	if n == alerts.FallbackShare || n == alerts.ContractViolationRate {
		return fmt.Sprintf("%.0f%%", 100*v)
	}
	return fmt.Sprintf("%g", v)
}

// alertLine is the live view's line of the alerts firing now.
func alertLine(rep *demoReport) string {
	if len(rep.Alerts) == 0 {
		return ansiDim + "alerts   none firing" + ansiReset
	}
	var parts []string
	for _, a := range rep.Alerts {
		parts = append(parts, fmt.Sprintf("%s %s %s > %s since %s", a.Name, a.Scope,
			alertValue(a.Name, a.Value), alertValue(a.Name, a.Threshold), fmtAt(a.Since)))
	}
	return ansiRed + "alerts   " + strings.Join(parts, " · ") + ansiReset
}

// writeAlertSummary writes the summary's alerts: the rule, and each firing with its
// resolution.
func writeAlertSummary(b *strings.Builder, rep *demoReport) {
	if rep.AlertRule == "" {
		return
	}
	fmt.Fprintf(b, "\nalerts (%s):\n", rep.AlertRule)
	if len(rep.AlertLog) == 0 {
		b.WriteString("  none fired\n")
	}
	for _, sp := range rep.AlertLog {
		fmt.Fprintf(b, "  %s for %s: fired at %s", sp.Name, sp.Scope, fmtAt(sp.FiredAt))
		if sp.Resolved {
			fmt.Fprintf(b, ", resolved at %s\n", fmtAt(sp.ResolvedAt))
		} else {
			b.WriteString(", still firing at the end\n")
		}
	}
}
