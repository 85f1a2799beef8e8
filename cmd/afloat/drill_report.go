package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// drillReport is what a drill found: its checks, each with pass or fail and its figure.
type drillReport struct {
	Target      string         `json:"target"`
	Scope       string         `json:"scope"` // task:NAME or route:NAME
	Criticality string         `json:"criticality"`
	Provider    string         `json:"provider"`
	Fault       map[string]any `json:"fault"`
	StartedAt   time.Time      `json:"started_at"`
	FinishedAt  time.Time      `json:"finished_at"`
	Interrupted bool           `json:"interrupted"`
	Passed      bool           `json:"passed"`
	Checks      []drillCheck   `json:"checks"`
	Figures     drillFigures   `json:"figures"`
	// Recorded says whether the gateway took the drill's record (POST /admin/drills).
	Recorded string `json:"recorded"`
}

// drillCheck is one named check.
type drillCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Figure string `json:"figure"`
}

// drillFigures are the measurements behind the checks.
type drillFigures struct {
	Calls         map[string]int `json:"calls"` // by phase
	HealthyP95MS  float64        `json:"healthy_p95_ms"`
	FaultP95MS    float64        `json:"fault_p95_ms"`
	AfterOpenP95  float64        `json:"after_open_p95_ms"`
	OpenedAfterMS float64        `json:"breaker_opened_after_ms"` // from the fault; -1: never
	ClosedAfterMS float64        `json:"breaker_closed_after_ms"` // from the clearing; -1: never
	Sources       map[string]int `json:"sources_during_fault"`
}

func (r *drillReport) failedNames() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c.Name)
		}
	}
	return out
}

func (r *drillReport) add(name string, ok bool, format string, a ...any) {
	r.Checks = append(r.Checks, drillCheck{Name: name, Passed: ok, Figure: fmt.Sprintf(format, a...)})
}

// check runs every check over the calls. opened, closed and cleared are from the start of
// the drill (-1: never seen); the fault began with the first call of the fault phase.
func (r *drillReport) check(o drillOptions, crit string, calls []drillCall, opened, closed, cleared time.Duration, before, after drillMetrics, logLeaks []string) {
	slices.SortFunc(calls, func(a, b drillCall) int { return int(a.At - b.At) })
	by := map[string][]drillCall{}
	for _, c := range calls {
		by[c.Phase] = append(by[c.Phase], c)
	}
	f := &r.Figures
	f.Calls = map[string]int{"healthy": len(by["healthy"]), "fault": len(by["fault"]), "recovery": len(by["recovery"])}
	f.Sources = map[string]int{}
	faultAt := time.Duration(-1)
	if fc := by["fault"]; len(fc) > 0 {
		faultAt = fc[0].At
	}
	f.HealthyP95MS = p95ms(by["healthy"])
	f.FaultP95MS = p95ms(by["fault"])
	f.OpenedAfterMS, f.ClosedAfterMS = -1, -1
	if opened >= 0 && faultAt >= 0 {
		f.OpenedAfterMS = ms(opened - faultAt)
	}
	if closed >= 0 && cleared >= 0 {
		f.ClosedAfterMS = ms(closed - cleared)
	}

	// main_path
	var bad []string
	for _, c := range by["fault"] {
		f.Sources[c.Source]++
		switch {
		case c.Err != nil:
			bad = append(bad, "no answer: "+c.Err.Error())
		case crit == "critical" && c.Status == 202 && c.ReviewID == "":
			bad = append(bad, "202 without a review id")
		case crit == "critical" && c.Status == 503 && c.Code == "blocked":
			// on_exhausted: block fails closed, as designed
		case c.Status >= 400:
			// A 4xx is a call the main path refused: as much a failure as a 5xx.
			bad = append(bad, fmt.Sprintf("%d %s", c.Status, c.Code))
		}
	}
	r.add("main_path", len(bad) == 0 && len(by["fault"]) > 0, "%d of %d calls during the fault failed%s", len(bad), len(by["fault"]), firstOf(bad))

	// degraded_marked. A partial fault (flap's up periods, an error rate under 1) lets some
	// calls through to the provider: its own whole answers are right then, not degraded.
	partial := o.fault["mode"] == "flap" || o.fault["mode"] == "error_rate" && o.fault["rate"] != 1.0
	unmarked, through := 0, 0
	for _, c := range by["fault"] {
		if c.Err != nil || c.Status >= 400 {
			continue
		}
		own := c.Source == "model" && c.Provider == o.provider
		switch {
		case partial && own && !c.Degraded:
			through++
		case !c.Degraded || own:
			unmarked++
		}
	}
	let := ""
	if partial {
		let = fmt.Sprintf(" (%d answered by %s itself, which the partial fault let through)", through, o.provider)
	}
	r.add("degraded_marked", unmarked == 0 && len(by["fault"]) > 0, "%d of %d answers during the fault not marked degraded or from %s%s; sources %v",
		unmarked, len(by["fault"]), o.provider, let, f.Sources)

	bound := f.HealthyP95MS*3 + 100
	if o.fault["mode"] == "malformed" {
		// A contract violation never moves the breaker (DESIGN §2): the gateway is right when
		// the breaker stays closed and each call pays only the re-ask and the next tier.
		r.add("breaker_opened", opened < 0, "%s", ifElse(opened < 0, "stayed closed, as it must: a contract violation never moves the breaker",
			fmt.Sprintf("opened %.0fms after the fault: a contract violation must not open it", f.OpenedAfterMS)))
		r.add("fail_fast", len(by["fault"]) > 0 && f.FaultP95MS <= bound, "p95 %.0fms under the fault (the re-ask and the next tier) vs %.0fms healthy (bound %.0fms)",
			f.FaultP95MS, f.HealthyP95MS, bound)
		moved := before.Read && after.Read && after.Degraded > before.Degraded && after.Opened == before.Opened
		r.add("metrics_moved", moved, "degraded answers +%.0f, circuit openings +%.0f (want none)", after.Degraded-before.Degraded, after.Opened-before.Opened)
	} else {
		never := "never seen open"
		if o.fault["mode"] == "error_rate" && o.fault["rate"] != 1.0 {
			// The breaker sees fewer failures than the fault makes: a retry that succeeds hides
			// one. Under its threshold it is right to stay closed, and the drill says so.
			never += fmt.Sprintf(": an error rate of %v, less what the retries recover, may be under the breaker's threshold (breaker.failure_rate, breaker.consecutive_failures); drill a higher --error-rate, or --mode unavailable", o.fault["rate"])
		}
		r.add("breaker_opened", opened >= 0, "%s", ifElse(opened >= 0, fmt.Sprintf("opened %.0fms after the fault", f.OpenedAfterMS), never))

		// fail_fast: the calls sent once it was seen open. Nearly all of them must have
		// skipped the provider (or been answered from the cache): the breaker's probes pay
		// its time, once per open period. And their p95 within the bound.
		var afterOpen []drillCall
		skipped := 0
		for _, c := range by["fault"] {
			if opened >= 0 && c.At >= opened && c.Err == nil {
				afterOpen = append(afterOpen, c)
				if c.Skipped || c.Source == "cache" {
					skipped++
				}
			}
		}
		f.AfterOpenP95 = p95ms(afterOpen)
		fast := len(afterOpen) > 0 && f.AfterOpenP95 <= bound && 10*skipped >= 9*len(afterOpen)
		r.add("fail_fast", fast, "%d of %d calls after the opening skipped %s (want 9 in 10 at least); p95 %.0fms after it vs %.0fms healthy (bound %.0fms)",
			skipped, len(afterOpen), o.provider, f.AfterOpenP95, f.HealthyP95MS, bound)

		moved := before.Read && after.Read && after.Degraded > before.Degraded && after.Opened > before.Opened
		r.add("metrics_moved", moved, "degraded answers +%.0f, circuit openings +%.0f", after.Degraded-before.Degraded, after.Opened-before.Opened)
	}

	// no_credentials
	creds := (&drillRun{o: o}).credentials()
	var found []string
	for _, c := range calls {
		found = append(found, leaks(c.body, creds)...)
	}
	found = append(found, logLeaks...)
	slices.Sort(found)
	found = slices.Compact(found)
	where := "answers"
	if o.logFile != "" {
		where = "answers and log"
	}
	r.add("no_credentials", len(found) == 0, "%d %s checked in the %s; found: %s", len(creds), ifElse(len(creds) == 1, "credential", "credentials"),
		where, ifElse(len(found) == 0, "none", strings.Join(found, ", ")))

	// breaker_closed, primary_back
	notClosed := "not closed within --recover " + o.recover.String()
	if r.Interrupted {
		notClosed = "not seen closed: the drill was interrupted"
	}
	r.add("breaker_closed", closed >= 0, "%s", ifElse(closed >= 0, fmt.Sprintf("closed %.0fms after the fault was cleared", f.ClosedAfterMS), notClosed))
	back := -1.0
	for _, c := range by["recovery"] {
		if c.Provider == o.provider && c.Source == "model" && c.Status < 300 {
			back = ms(c.At - cleared)
			break
		}
	}
	r.add("primary_back", back >= 0, "%s", ifElse(back >= 0, fmt.Sprintf("%s answered %.0fms after the fault was cleared", o.provider, back), o.provider+" did not answer again"))

	r.Passed = !r.Interrupted
	for _, c := range r.Checks {
		r.Passed = r.Passed && c.Passed
	}
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " (first: " + s[0] + ")"
}

func ifElse(ok bool, a, b string) string {
	if ok {
		return a
	}
	return b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// p95ms returns the 95th percentile of the calls' latencies in ms; 0 without calls.
func p95ms(calls []drillCall) float64 {
	if len(calls) == 0 {
		return 0
	}
	lat := make([]time.Duration, len(calls))
	for i, c := range calls {
		lat[i] = c.Latency
	}
	slices.Sort(lat)
	return ms(lat[min(len(lat)-1, int(float64(len(lat))*0.95))])
}

// writeDrillReport prints the report as a table.
func writeDrillReport(w io.Writer, r *drillReport) {
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	if r.Interrupted {
		verdict += " (interrupted)"
	}
	fmt.Fprintf(w, "afloat drill %s: %s of %s (%s), fault %v\n", verdict, r.Scope, r.Target, r.Criticality, faultText(r.Provider, r.Fault))
	fmt.Fprintf(w, "calls: %d healthy, %d under the fault, %d after it; p95 %.0fms healthy, %.0fms under the fault\n\n",
		r.Figures.Calls["healthy"], r.Figures.Calls["fault"], r.Figures.Calls["recovery"], r.Figures.HealthyP95MS, r.Figures.FaultP95MS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tresult\tfigure")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, ifElse(c.Passed, "pass", "FAIL"), c.Figure)
	}
	_ = tw.Flush()
	if r.Recorded != "" {
		fmt.Fprintf(w, "\ndrill %s in the gateway\n", r.Recorded)
	}
}

func faultText(provider string, f map[string]any) string {
	keys := sortedKeys(f)
	parts := []string{fmt.Sprint(f["mode"])}
	for _, k := range keys {
		if k != "mode" {
			parts = append(parts, fmt.Sprintf("%s=%v", k, f[k]))
		}
	}
	return provider + ": " + strings.Join(parts, " ")
}

// progress shows where the drill is: a redrawn line on a terminal, a line every 5s otherwise.
func (d *drillRun) progress(phase string) {
	if d.o.json && !d.o.live {
		return
	}
	d.mu.Lock()
	n, deg := len(d.calls), 0
	for _, c := range d.calls {
		if c.Degraded {
			deg++
		}
	}
	opened := d.openedAt >= 0
	d.mu.Unlock()
	elapsed := time.Since(d.start)
	line := fmt.Sprintf("%s · %s · %d calls · %d degraded · breaker %s", fmtAt(elapsed), phase, n, deg, ifElse(opened, "opened", "not opened yet"))
	if d.o.live {
		fmt.Fprintf(d.o.out, "\r\x1b[2K%s %s", progressBar(phase, d.sinceFault(), d.o), line)
		return
	}
	d.mu.Lock()
	due := d.printed == 0 || elapsed-d.printed >= 5*time.Second
	if due {
		d.printed = max(elapsed, 1)
	}
	d.mu.Unlock()
	if due {
		fmt.Fprintln(d.o.out, "afloat drill:", line)
	}
}

// progressBar is a bar of 20 cells over the fault's duration.
func progressBar(phase string, elapsed time.Duration, o drillOptions) string {
	total := o.duration
	if o.requests > 0 {
		total = time.Duration(float64(o.requests) / o.rate * float64(time.Second))
	}
	share := 0.0
	switch phase {
	case "fault":
		share = min(1, float64(elapsed)/float64(max(total, time.Second)))
	case "recovery":
		share = 1
	}
	full := int(share * 20)
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", 20-full) + "]"
}

func (d *drillRun) progressDone() {
	if d.o.live {
		fmt.Fprint(d.o.out, "\r\x1b[2K")
	}
}
