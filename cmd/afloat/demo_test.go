package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
)

// The demo runs on the real clock (its simulated providers wait real latencies), so these
// tests assert only what holds on any machine: that the breaker opened and closed, that
// heuristic answers and review items appeared during the outage, never exact counts. The
// long-running tests run in parallel, to keep the package's wall time near one run's.

func TestDemoOutage(t *testing.T) {
	t.Parallel()
	var progress bytes.Buffer
	rep, err := runDemo(t.Context(), demoOptions{Duration: 6 * time.Second, Rate: 30, Seed: 1, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	task := func(name string) *taskReport {
		for i := range rep.Tasks {
			if rep.Tasks[i].Name == name {
				return &rep.Tasks[i]
			}
		}
		t.Fatalf("no task %s in the report", name)
		return nil
	}
	triage, moderation := task("triage"), task("moderation")
	var summary bytes.Buffer
	writeDemoSummary(&summary, rep)
	t.Log("\n" + summary.String())

	tests := []struct {
		name string
		ok   bool
		got  any
	}{
		{"ran the whole duration", !rep.Interrupted && rep.Elapsed >= 6*time.Second, rep.Elapsed},
		{"fault injected and cleared", rep.Faulted && rep.Cleared && rep.FaultAt < rep.ClearAt, [2]time.Duration{rep.FaultAt, rep.ClearAt}},
		{"breaker opened during the outage", rep.Opened && rep.OpenedAfter < rep.ClearAt-rep.FaultAt, rep.OpenedAfter},
		{"breaker closed by itself after it", rep.Closed && rep.ClosedAfter > 0, rep.ClosedAfter},
		{"primary closed at the end", rep.Providers[0].Name == demoPrimary && rep.Providers[0].State == breaker.StateClosed, rep.Providers[0]},
		{"triage answered by tier 0 when steady", triage.Answers(phaseSteady, answerModel) > triage.Calls(phaseSteady)/2, triage.Counts[phaseSteady]},
		{"no tier 0 answer during the outage", triage.Answers(phaseDown, answerModel)+moderation.Answers(phaseDown, answerModel) == 0, [2]any{triage.Counts[phaseDown], moderation.Counts[phaseDown]}},
		{"lower tiers answered during the outage", triage.Answers(phaseDown, answerDegraded) > 0 && moderation.Answers(phaseDown, answerDegraded) > 0, [2]any{triage.Counts[phaseDown], moderation.Counts[phaseDown]}},
		{"heuristic answers during the outage", triage.Answers(phaseDown, answerHeuristic) > 0, triage.Counts[phaseDown]},
		{"human review items during the outage", moderation.Answers(phaseDown, answerHuman) > 0, moderation.Counts[phaseDown]},
		{"triage never unanswered", triage.Answers(numPhases, answerUnavailable)+triage.Answers(numPhases, answerError)+triage.Answers(numPhases, answerHuman) == 0, triage.Counts},
		{"moderation never heuristic nor failed", moderation.Answers(numPhases, answerHeuristic)+moderation.Answers(numPhases, answerUnavailable)+moderation.Answers(numPhases, answerError) == 0, moderation.Counts},
		{"degraded answers have reasons", triage.Degraded > 0 && triage.Reasons[afloat.Reason(afloat.OutcomeCircuitOpen)] > 0, triage.Reasons},
		// Wide: a loaded CI machine may schedule a goroutine late, but never by a budget.
		{"no call far past its budget", triage.MaxOverrun < 500*time.Millisecond && moderation.MaxOverrun < 500*time.Millisecond, [2]time.Duration{triage.MaxOverrun, moderation.MaxOverrun}},
		{"every call started", rep.Shed == 0, rep.Shed},
		{"fallback_share alert fired for triage during the outage", firedDuring(rep, "triage"), rep.AlertLog},
		{"latency percentiles ordered", triage.P50 > 0 && triage.P50 <= triage.P95 && triage.P95 <= triage.P99 && triage.P99 <= triage.Max+triage.Max/50, [4]time.Duration{triage.P50, triage.P95, triage.P99, triage.Max}},
		{"progress is plain text with the events", !strings.Contains(progress.String(), "\x1b") &&
			strings.Contains(progress.String(), "fault injected") && strings.Contains(progress.String(), "primary breaker opened"), progress.String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("got %v", tc.got)
			}
		})
	}
}

func TestDemoCommand(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if err := demo(t.Context(), []string{"--duration", "6s", "--rate", "30"}, &out, &errOut); err != nil {
		t.Fatalf("demo: %v\nstderr: %s", err, errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"triage (enrichment, budget 1.5s):", "moderation (critical, budget 3.0s):",
		"model tier 0", "model degraded", "heuristic", "human", "degraded:", "latency: p50",
		"primary breaker: opened", "closed by itself", "what it showed: the primary went down at 1.5s",
		"triage kept answering", "moderation queued",
	} {
		t.Run(want, func(t *testing.T) {
			if !strings.Contains(got, want) {
				t.Errorf("summary lacks %q:\n%s", want, got)
			}
		})
	}
	t.Run("plain text", func(t *testing.T) {
		if strings.Contains(got, "\x1b") {
			t.Errorf("output to a buffer holds ANSI escapes:\n%q", got)
		}
	})
	t.Run("nothing on stderr", func(t *testing.T) {
		if errOut.Len() > 0 {
			t.Errorf("stderr: %s", errOut.String())
		}
	})
}

func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	// The timeout plays main's signal handler: the run stops long before its duration.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	began := time.Now()
	rep, err := runDemo(ctx, demoOptions{Duration: time.Minute, Rate: 20, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	var summary bytes.Buffer
	writeDemoSummary(&summary, rep)
	calls := 0
	for _, tr := range rep.Tasks {
		calls += tr.Calls(numPhases)
	}
	tests := []struct {
		name string
		ok   bool
		got  any
	}{
		{"interrupted", rep.Interrupted, rep.Interrupted},
		// One second of traffic, then at most the longest budget (3s) for the calls in flight.
		{"returned soon", took < 10*time.Second, took},
		{"calls in flight finished and were counted", calls > 0 && rep.InFlight == 0, [2]int{calls, rep.InFlight}},
		{"no outage yet", !rep.Faulted && !rep.Opened, rep.Faulted},
		{"summary says so", strings.Contains(summary.String(), "interrupted before 1m0s") &&
			strings.Contains(summary.String(), "the run ended before the primary went down"), summary.String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("got %v", tc.got)
			}
		})
	}
}

func TestDemoFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		stderr  string
	}{
		{"unknown flag", []string{"--speed", "2"}, errUsage, "flag provided but not defined"},
		{"bad duration", []string{"--duration", "soon"}, errUsage, "invalid value"},
		{"duration too short", []string{"--duration", "500ms"}, errUsage, "shorter than 1s"},
		{"zero rate", []string{"--rate", "0"}, errUsage, "outside (0, 1000]"},
		{"negative rate", []string{"--rate", "-5"}, errUsage, "outside (0, 1000]"},
		{"rate too high", []string{"--rate", "5000"}, errUsage, "outside (0, 1000]"},
		{"not a number rate", []string{"--rate", "NaN"}, errUsage, "outside (0, 1000]"},
		{"bad seed", []string{"--seed", "-1"}, errUsage, "invalid value"},
		{"stray argument", []string{"now"}, errUsage, `unexpected argument "now"`},
		{"help", []string{"-h"}, nil, "Usage: afloat demo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := demo(t.Context(), tc.args, &out, &errOut)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("demo(%q) = %v, want %v", tc.args, err, tc.wantErr)
			}
			if !strings.Contains(errOut.String(), tc.stderr) || !strings.Contains(errOut.String(), "Usage: afloat demo") {
				t.Errorf("stderr lacks %q and the usage:\n%s", tc.stderr, errOut.String())
			}
			if out.Len() > 0 {
				t.Errorf("stdout: %s", out.String())
			}
		})
	}
}

func TestDemoOptionsDerived(t *testing.T) {
	tests := []struct {
		duration          time.Duration
		rate              float64
		recovery          time.Duration
		backup, emergency int
	}{
		{time.Second, 1, 500 * time.Millisecond, 2, 1},
		{6 * time.Second, 30, 600 * time.Millisecond, 6, 1},
		{60 * time.Second, 20, 6 * time.Second, 4, 1},
		{time.Hour, 100, 30 * time.Second, 20, 4},
	}
	for _, tc := range tests {
		o := demoOptions{Duration: tc.duration, Rate: tc.rate}
		t.Run(fmt.Sprintf("%v at %g per s", tc.duration, tc.rate), func(t *testing.T) {
			if got := o.recovery(); got != tc.recovery {
				t.Errorf("recovery = %v, want %v", got, tc.recovery)
			}
			if b, e := o.bulkheads(); b != tc.backup || e != tc.emergency {
				t.Errorf("bulkheads = %d, %d, want %d, %d", b, e, tc.backup, tc.emergency)
			}
		})
	}
}

// sampleReport is a finished run as the summary and the live view see it.
func sampleReport() *demoReport {
	rep := &demoReport{
		Duration: time.Minute, Rate: 20, Seed: 1, Elapsed: time.Minute, Phase: phaseDown, InFlight: 7,
		Recovery: 6 * time.Second, FaultAt: 15 * time.Second, ClearAt: 40 * time.Second,
		Faulted: true, Cleared: true, Opened: true, OpenedAfter: 120 * time.Millisecond,
		Closed: true, ClosedAfter: 5300 * time.Millisecond,
		Providers: []providerReport{
			{Name: "primary", State: breaker.StateOpen, Since: 15 * time.Second, Slot: 64,
				Latency: []taskLatency{{Task: "triage", P95: 700 * time.Millisecond, Measured: true, ReadTimeout: 1200 * time.Millisecond}}},
			{Name: "backup", State: breaker.StateHalfOpen, InFlight: 4, Slot: 4,
				Latency: []taskLatency{{Task: "triage", ReadTimeout: 2 * time.Second}}},
			{Name: "emergency", State: breaker.StateClosed, InFlight: 1, Slot: 1},
		},
		Tasks: []taskReport{
			{Name: "triage", Criticality: afloat.Enrichment, Budget: 1500 * time.Millisecond,
				Counts: [numPhases][numAnswers]int{
					phaseSteady: {answerModel: 200}, phaseDown: {answerDegraded: 124, answerHeuristic: 76},
					phaseRecovering: {answerModel: 100},
				},
				Degraded: 200, Reasons: map[afloat.Reason]int{"circuit_open": 190, "unavailable": 10},
				P50: 300 * time.Millisecond, P95: 900 * time.Millisecond, P99: 1400 * time.Millisecond, Max: 1500 * time.Millisecond},
			{Name: "moderation", Criticality: afloat.Critical, Budget: 3 * time.Second,
				Counts: [numPhases][numAnswers]int{
					phaseSteady: {answerModel: 60}, phaseDown: {answerDegraded: 30, answerHuman: 41},
				},
				Degraded: 71, Reasons: map[afloat.Reason]int{"circuit_open": 71},
				P50: 310 * time.Millisecond, P95: 800 * time.Millisecond, P99: 1100 * time.Millisecond, Max: 1200 * time.Millisecond},
		},
		Events: []demoEvent{
			{At: 15 * time.Second, Text: "fault injected: the primary answers 503 to every call"},
			{At: 15120 * time.Millisecond, Text: "primary breaker opened: calls skip it at once (120ms after the fault)"},
		},
	}
	return rep
}

func TestDemoConclusion(t *testing.T) {
	tests := []struct {
		name   string
		change func(*demoReport)
		want   []string
		absent []string
	}{
		{
			name: "full run",
			want: []string{
				"the primary went down at 15.0s and came back at 40.0s",
				"triage kept answering: 62% model (62% from a lower tier), 38% heuristic during the outage",
				"moderation queued 41 items for human review (58% of its calls during the outage)",
				"no call waited longer than its budget",
			},
		},
		{
			name:   "some calls unanswered",
			change: func(r *demoReport) { r.Tasks[0].Counts[phaseDown][answerUnavailable] = 200 },
			want:   []string{"triage answered 50% of its calls: 31% model"},
			absent: []string{"kept answering"},
		},
		{
			name:   "a call overran its budget",
			change: func(r *demoReport) { r.Tasks[1].MaxOverrun = 800 * time.Millisecond },
			want:   []string{"the slowest call overran its budget by 800ms"},
			absent: []string{"no call waited longer"},
		},
		{
			name: "ended before the outage",
			change: func(r *demoReport) {
				r.Faulted, r.Cleared, r.Opened, r.Closed = false, false, false, false
			},
			want:   []string{"the run ended before the primary went down", "triage kept answering: 100% model (0% from a lower tier), 0% heuristic"},
			absent: []string{"during the outage"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := sampleReport()
			if tc.change != nil {
				tc.change(rep)
			}
			got := demoConclusion(rep)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("conclusion lacks %q:\n%s", w, got)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(got, a) {
					t.Errorf("conclusion holds %q:\n%s", a, got)
				}
			}
		})
	}
}

func TestDemoSummaryBreaker(t *testing.T) {
	tests := []struct {
		name   string
		change func(*demoReport)
		want   string
	}{
		{"closed", nil, "opened 120ms after the fault; closed by itself 5.3s after the fault was cleared (it probes every 6.0s)"},
		{"not closed", func(r *demoReport) { r.Closed = false }, "opened 120ms after the fault; not closed yet when the run ended (it probes every 6.0s)"},
		{"not cleared", func(r *demoReport) { r.Cleared, r.Closed = false, false }, "opened 120ms after the fault; the run ended before the primary came back"},
		{"not faulted", func(r *demoReport) { r.Faulted, r.Cleared, r.Opened, r.Closed = false, false, false, false }, "the run ended before the outage"},
		{"never opened", func(r *demoReport) { r.Opened, r.Closed = false, false }, "did not open during the outage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := sampleReport()
			if tc.change != nil {
				tc.change(rep)
			}
			var b bytes.Buffer
			writeDemoSummary(&b, rep)
			if !strings.Contains(b.String(), "primary breaker: "+tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
}

func TestDemoSummaryCounts(t *testing.T) {
	var b bytes.Buffer
	writeDemoSummary(&b, sampleReport())
	got := b.String()
	tests := []struct{ name, want string }{
		{"triage header", "triage (enrichment, budget 1.5s): 500 calls"},
		{"moderation header", "moderation (critical, budget 3.0s): 131 calls"},
		{"tier 0 by phase", "  model tier 0          300      200             0         100"},
		{"heuristic by phase", "  heuristic              76        0            76           0"},
		{"human by phase", "  human                  41        0            41           0"},
		{"reasons, most frequent first", "degraded: 200 of 500 (40%); reasons: circuit_open 190, unavailable 10"},
		{"latency", "latency: p50 300ms, p95 900ms, p99 1.4s, max 1.5s (budget 1.5s)"},
		{"events", "   15.1s  primary breaker opened"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, got)
			}
		})
	}
	t.Run("no error row without errors", func(t *testing.T) {
		if strings.Contains(got, "  error ") {
			t.Errorf("summary has an error row:\n%s", got)
		}
	})
}

func TestDemoLiveView(t *testing.T) {
	var b strings.Builder
	writeDemoLive(&b, sampleReport())
	got := b.String()
	tests := []struct{ name, want string }{
		{"clock and phase", "1m0s / 1m0s  " + ansiRed + "primary down"},
		{"open breaker in red", ansiRed + "open 45.0s"},
		{"half-open breaker in yellow", ansiYellow + "half-open"},
		{"closed breaker in green", ansiGreen + "closed"},
		{"bulkhead", "4/4"},
		{"p95 and read timeout", "700ms / 1.2s"},
		{"read timeout before a p95", "— / 2.0s"},
		{"task row", "triage       200       0%      62%      38%"},
		{"current phase", "answers while " + ansiReset + ansiRed + "primary down"},
		{"events", "primary breaker opened"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.want) {
				t.Errorf("frame lacks %q:\n%s", tc.want, got)
			}
		})
	}
	t.Run("every line clears its rest", func(t *testing.T) {
		for i, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
			if !strings.HasSuffix(line, ansiEOL) {
				t.Errorf("line %d does not end with the clear-line escape: %q", i, line)
			}
		}
	})
	t.Run("fixed height", func(t *testing.T) {
		// A frame as tall with one event as with many, so that no stale line is left below.
		rep := sampleReport()
		rep.Events = rep.Events[:1]
		var short strings.Builder
		writeDemoLive(&short, rep)
		if a, b := strings.Count(got, "\n"), strings.Count(short.String(), "\n"); a != b {
			t.Errorf("frame heights %d and %d differ", a, b)
		}
	})
}

func TestIsTerminal(t *testing.T) {
	tests := []struct {
		name string
		w    func(t *testing.T) io.Writer
	}{
		{"buffer", func(*testing.T) io.Writer { return &bytes.Buffer{} }},
		{"regular file", func(t *testing.T) io.Writer {
			f, err := os.CreateTemp(t.TempDir(), "out")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{"pipe", func(t *testing.T) io.Writer {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			return w
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if w := tc.w(t); isTerminal(w) {
				t.Errorf("%T is taken for a terminal", w)
			}
		})
	}
}
