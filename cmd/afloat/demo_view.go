package main

// The demo's two views: the live screen on a terminal and the plain-text summary.

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
)

// draw redraws the live view, or prints the plain progress.
func (d *demoRun) draw() {
	if d.opts.Progress == nil {
		return
	}
	rep := d.report()
	if d.opts.Live {
		var b strings.Builder
		b.WriteString("\x1b[H")
		writeDemoLive(&b, rep)
		b.WriteString("\x1b[J")
		d.write(b.String())
		return
	}
	d.printEvents()
	d.progress(demoStatusLine(rep))
}

// printEvents prints the events not printed yet, in plain mode.
func (d *demoRun) printEvents() {
	if d.opts.Live {
		return
	}
	for _, ev := range d.rep.Events[d.printed:] {
		d.write(fmt.Sprintf("%7s  %s\n", fmtAt(ev.At), ev.Text))
	}
	d.printed = len(d.rep.Events)
}

// progress prints one plain line stamped with the time since the start.
func (d *demoRun) progress(line string) {
	if d.opts.Live {
		return
	}
	d.write(fmt.Sprintf("%7s  %s\n", fmtAt(d.clock.Since(d.start)), line))
}

func (d *demoRun) write(s string) {
	if d.opts.Progress != nil {
		_, _ = io.WriteString(d.opts.Progress, s)
	}
}

// demoStatusLine is the plain progress line: the phase, and each task's answers in it.
func demoStatusLine(rep *demoReport) string {
	var b strings.Builder
	b.WriteString(rep.Phase.String())
	for _, t := range rep.Tasks {
		n := t.Calls(rep.Phase)
		fmt.Fprintf(&b, " · %s %d calls (", t.Name, n)
		sep := ""
		for a := range numAnswers {
			if c := t.Answers(rep.Phase, a); c > 0 {
				fmt.Fprintf(&b, "%s%s %s", sep, a, pct(c, n))
				sep = ", "
			}
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " · %d in flight", rep.InFlight)
	return b.String()
}

// ANSI escapes of the live view.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiEOL    = "\x1b[K" // clear the rest of the line: the previous frame's may be longer
)

func stateColor(s breaker.State) string {
	switch s {
	case breaker.StateOpen:
		return ansiRed
	case breaker.StateHalfOpen:
		return ansiYellow
	}
	return ansiGreen
}

var phaseColors = [numPhases]string{ansiGreen, ansiRed, ansiYellow}

// writeDemoLive writes one frame of the live view: demoHeight lines, the last without a
// newline (a newline there would scroll the screen), each cut to demoWidth-1 columns and
// ended with the clear-line escape.
func writeDemoLive(b *strings.Builder, rep *demoReport) {
	var lines []string
	line := func(format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	phase := phaseColors[rep.Phase] + rep.Phase.String() + ansiReset
	if rep.Draining {
		phase += fmt.Sprintf(" · traffic stopped, %d calls finishing", rep.InFlight)
	}
	line("%safloat demo%s  %s / %s  %s", ansiBold, ansiReset, fmtAt(rep.Elapsed), fmtAt(rep.Duration), phase)
	line("%s%g calls/s · primary down %s–%s · breakers probe every %s · %d in flight%s",
		ansiDim, rep.Rate, fmtAt(rep.FaultAt), fmtAt(rep.ClearAt), fmtDur(rep.Recovery), rep.InFlight, ansiReset)
	line("")

	var tasks []string
	for _, t := range rep.Tasks {
		tasks = append(tasks, t.Name)
	}
	head := fmt.Sprintf("%-10s %-16s %-7s", "provider", "breaker", "flight")
	for _, t := range tasks {
		head += fmt.Sprintf("  %-18s", t+" p95/tmo")
	}
	line("%s%s%s", ansiBold, head, ansiReset)
	for _, p := range rep.Providers {
		state := p.State.String()
		if p.Since > 0 {
			state += " " + fmtDur(rep.Elapsed-p.Since)
		}
		row := fmt.Sprintf("%-10s %s%-16s%s %-7s", p.Name, stateColor(p.State), state, ansiReset, fmt.Sprintf("%d/%d", p.InFlight, p.Slot))
		for _, t := range tasks {
			cell := "—"
			for _, l := range p.Latency {
				if l.Task != t {
					continue
				}
				p95 := "—"
				if l.Measured {
					p95 = fmtDur(l.P95)
				}
				cell = p95 + " / " + fmtDur(l.ReadTimeout)
			}
			row += fmt.Sprintf("  %-18s", cell)
		}
		line("%s", strings.TrimRight(row, " "))
	}
	line("")

	// One row per task: its answers in the current phase, its p95 over the run.
	line("%sanswers while %s%s%s, p95 over the run%s", ansiDim, ansiReset+phaseColors[rep.Phase], rep.Phase, ansiReset+ansiDim, ansiReset)
	head = fmt.Sprintf("%-10s %5s", "task", "calls")
	for a := range numAnswers {
		head += fmt.Sprintf(" %8s", shortAnswer[a])
	}
	head += fmt.Sprintf(" %7s", "p95")
	line("%s%s%s", ansiBold, head, ansiReset)
	for _, t := range rep.Tasks {
		n := t.Calls(rep.Phase)
		row := fmt.Sprintf("%-10s %5d", t.Name, n)
		for a := range numAnswers {
			row += fmt.Sprintf(" %8s", pct(t.Answers(rep.Phase, a), n))
		}
		row += fmt.Sprintf(" %7s", fmtDur(t.P95))
		line("%s", row)
	}
	if rep.AlertRule != "" || len(rep.Alerts) > 0 {
		line("%s", alertLine(rep))
	}
	line("")

	rows := demoHeight - len(lines) - 1
	shown := shownEvents(rep.Events, rows)
	title := ansiBold + "events" + ansiReset
	if hidden := len(rep.Events) - len(shown); hidden > 0 {
		title += fmt.Sprintf(" %s(%d earlier not shown)%s", ansiDim, hidden, ansiReset)
	}
	line("%s", title)
	for _, ev := range shown {
		line("%7s  %s", fmtAt(ev.At), ev.Text)
	}
	for len(lines) < demoHeight {
		line("")
	}
	for i, l := range lines[:demoHeight] {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(fitLine(l, demoWidth-1) + ansiEOL)
	}
}

// shownEvents picks at most n events for the live view, in order: every pinned one (the
// latest n when there are more) and, in the rows left, the latest others.
func shownEvents(events []demoEvent, n int) []demoEvent {
	if n <= 0 {
		return nil
	}
	if len(events) <= n {
		return events
	}
	keep := make([]bool, len(events))
	left := n
	for i := len(events) - 1; i >= 0 && left > 0; i-- {
		if events[i].Pinned {
			keep[i] = true
			left--
		}
	}
	for i := len(events) - 1; i >= 0 && left > 0; i-- {
		if !keep[i] {
			keep[i] = true
			left--
		}
	}
	var out []demoEvent
	for i, ev := range events {
		if keep[i] {
			out = append(out, ev)
		}
	}
	return out
}

// fitLine cuts s to at most width visible runes, keeping its escape sequences; a cut line
// ends with "…". A line holding escapes ends with a reset, so that no colour leaks.
func fitLine(s string, width int) string {
	var b strings.Builder
	cols, escaped := 0, false
	for i := 0; i < len(s); {
		if s[i] == '\x1b' {
			j := escapeEnd(s, i)
			b.WriteString(s[i:j])
			i, escaped = j, true
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if cols == width-1 && visibleWidth(s[i:]) > 1 {
			b.WriteRune('…')
			cols++
			escaped = escaped || strings.Contains(s[i:], "\x1b")
			break
		}
		if cols == width {
			break
		}
		b.WriteRune(r)
		cols++
		i += size
	}
	if escaped && !strings.HasSuffix(b.String(), ansiReset) {
		b.WriteString(ansiReset)
	}
	return b.String()
}

// escapeEnd returns the end of the escape sequence that starts at s[i]: a CSI sequence up
// to its final byte, or the escape and the byte after it.
func escapeEnd(s string, i int) int {
	j := i + 1
	if j < len(s) && s[j] == '[' {
		for j++; j < len(s); j++ {
			if s[j] >= 0x40 && s[j] <= 0x7e {
				return j + 1
			}
		}
		return len(s)
	}
	return min(j+1, len(s))
}

// visibleWidth counts the runes of s outside escape sequences.
func visibleWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == '\x1b' {
			i = escapeEnd(s, i)
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		n++
		i += size
	}
	return n
}

var shortAnswer = [numAnswers]string{"model", "degraded", "heurist.", "unavail.", "human", "error"}

// writeDemoSummary writes the plain-text summary of a run.
func writeDemoSummary(w io.Writer, rep *demoReport) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nafloat demo: %s at %g calls/s (seed %d)", fmtAt(rep.Elapsed), rep.Rate, rep.Seed)
	if rep.Interrupted {
		fmt.Fprintf(&b, ", interrupted before %s", fmtAt(rep.Duration))
	}
	b.WriteString("\n")
	b.WriteString("phases: steady from 0s")
	if rep.Faulted {
		fmt.Fprintf(&b, "; primary down from %s", fmtAt(rep.FaultAt))
	}
	if rep.Cleared {
		fmt.Fprintf(&b, "; recovering from %s", fmtAt(rep.ClearAt))
	}
	b.WriteString("\n")
	b.WriteString("primary breaker: " + breakerSentence(rep) + "\n")
	if rep.Shed > 0 {
		fmt.Fprintf(&b, "load generator: %d calls not started (too many in flight)\n", rep.Shed)
	}

	cols := [...]struct {
		phase demoPhase
		width int
	}{{numPhases, 8}, {phaseSteady, 8}, {phaseDown, 13}, {phaseRecovering, 11}}
	for _, t := range rep.Tasks {
		fmt.Fprintf(&b, "\n%s (%s, budget %s): %d calls\n", t.Name, t.Criticality, fmtDur(t.Budget), t.Calls(numPhases))
		fmt.Fprintf(&b, "  %-16s %8s %8s %13s %11s\n", "source", "all", "steady", "primary down", "recovering")
		for a := range numAnswers {
			if a == answerError && t.Answers(numPhases, a) == 0 {
				continue
			}
			fmt.Fprintf(&b, "  %-16s", a)
			for _, c := range cols {
				fmt.Fprintf(&b, " %*d", c.width, t.Answers(c.phase, a))
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "  degraded: %d of %d (%s)", t.Degraded, t.Calls(numPhases), pct(t.Degraded, t.Calls(numPhases)))
		if len(t.Reasons) > 0 {
			b.WriteString("; reasons: " + reasonList(t.Reasons))
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "  latency: p50 %s, p95 %s, p99 %s, max %s (budget %s",
			fmtDur(t.P50), fmtDur(t.P95), fmtDur(t.P99), fmtDur(t.Max), fmtDur(t.Budget))
		if t.MaxOverrun >= time.Millisecond {
			fmt.Fprintf(&b, ", overrun by %s at most", fmtDur(t.MaxOverrun))
		}
		b.WriteString(")\n")
		if t.FirstError != "" {
			fmt.Fprintf(&b, "  first error: %s\n", t.FirstError)
		}
	}
	writeAlertSummary(&b, rep)
	if len(rep.Events) > 0 {
		b.WriteString("\nevents:\n")
		for _, ev := range rep.Events {
			fmt.Fprintf(&b, "  %7s  %s\n", fmtAt(ev.At), ev.Text)
		}
	}
	b.WriteString("\nwhat it showed: " + demoConclusion(rep) + "\n")
	_, _ = io.WriteString(w, b.String())
}

func breakerSentence(rep *demoReport) string {
	switch {
	case !rep.Faulted:
		return "the run ended before the outage"
	case !rep.Opened:
		return "did not open during the outage"
	case !rep.Cleared:
		return fmt.Sprintf("opened %s after the fault; the run ended before the primary came back", fmtDur(rep.OpenedAfter))
	case !rep.Closed:
		return fmt.Sprintf("opened %s after the fault; not closed yet when the run ended (it probes every %s)",
			fmtDur(rep.OpenedAfter), fmtDur(rep.Recovery))
	}
	return fmt.Sprintf("opened %s after the fault; closed by itself %s after the fault was cleared (it probes every %s)",
		fmtDur(rep.OpenedAfter), fmtDur(rep.ClosedAfter), fmtDur(rep.Recovery))
}

// demoConclusion is the one line that says what the run showed.
func demoConclusion(rep *demoReport) string {
	var parts []string
	if rep.Faulted {
		s := "the primary went down at " + fmtAt(rep.FaultAt)
		if rep.Cleared {
			s += " and came back at " + fmtAt(rep.ClearAt)
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "the run ended before the primary went down")
	}
	for _, t := range rep.Tasks {
		p := phaseDown
		if !rep.Faulted {
			p = phaseSteady
		}
		n := t.Calls(p)
		if n == 0 {
			continue
		}
		model := t.Answers(p, answerModel) + t.Answers(p, answerDegraded)
		var s string
		switch t.Criticality {
		case afloat.Critical:
			s = fmt.Sprintf("%s queued %d items for human review", t.Name, t.Answers(numPhases, answerHuman))
			if rep.Faulted {
				s += fmt.Sprintf(" (%s of its calls during the outage)", pct(t.Answers(phaseDown, answerHuman), n))
			}
		default:
			answered := model + t.Answers(p, answerHeuristic)
			verb := "kept answering"
			if answered < n {
				verb = fmt.Sprintf("answered %s of its calls", pct(answered, n))
			}
			s = fmt.Sprintf("%s %s: %s model (%s from a lower tier), %s heuristic", t.Name, verb,
				pct(model, n), pct(t.Answers(p, answerDegraded), n), pct(t.Answers(p, answerHeuristic), n))
			if rep.Faulted {
				s += " during the outage"
			}
		}
		parts = append(parts, s)
	}
	var over time.Duration
	for _, t := range rep.Tasks {
		over = max(over, t.MaxOverrun)
	}
	if over <= demoBudgetSlack {
		parts = append(parts, "no call waited longer than its budget")
	} else {
		parts = append(parts, fmt.Sprintf("the slowest call overran its budget by %s", fmtDur(over)))
	}
	return strings.Join(parts, "; ")
}

func reasonList(m map[afloat.Reason]int) string {
	reasons := slices.Collect(maps.Keys(m))
	// Most frequent first; ties by name, so that the line is stable.
	slices.SortFunc(reasons, func(a, b afloat.Reason) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		name := string(r)
		if name == "" {
			name = "none"
		}
		parts[i] = fmt.Sprintf("%s %d", name, m[r])
	}
	return strings.Join(parts, ", ")
}

func pct(n, total int) string {
	if total == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(total))
}

// fmtDur writes a duration short: 310ms, 1.5s, 2m3s.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// fmtAt writes an offset from the start: 15.0s, 2m3s.
func fmtAt(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", max(d, 0).Seconds())
	}
	return d.Round(time.Second).String()
}
