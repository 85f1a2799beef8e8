package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/breaker"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;?]*[@-~]")

// goldenReport is a run in its outage, with more events than the view has rows for: the
// pinned ones (fault, breaker opened) come first and must stay in sight.
func goldenReport() *demoReport {
	rep := sampleReport()
	rep.Elapsed = 33 * time.Second
	rep.Cleared, rep.Closed = false, false
	rep.Providers[0].Latency = append(rep.Providers[0].Latency,
		taskLatency{Task: "moderation", P95: 1100 * time.Millisecond, Measured: true, ReadTimeout: 2400 * time.Millisecond})
	rep.Providers[1].State, rep.Providers[1].Since = breaker.StateClosed, 0
	rep.AlertRule = "fallback_share above 30% for 2.0s, over 4.0s with 5 calls at least"
	rep.Alerts = []demoAlert{{Name: alerts.FallbackShare, Scope: "triage", Since: 18200 * time.Millisecond, Value: 0.62, Threshold: 0.3}}
	rep.Events = []demoEvent{
		{At: 15 * time.Second, Text: "fault injected: the primary answers 503 to every call", Pinned: true},
		{At: 15120 * time.Millisecond, Text: "primary breaker opened: calls skip it at once (120ms after the fault)", Pinned: true},
		{At: 15300 * time.Millisecond, Text: "backup is full (4 in flight): the next tier takes the overflow"},
		{At: 15400 * time.Millisecond, Text: "emergency is full (1 in flight): the overflow goes to the tasks' policies (heuristic, human review)"},
	}
	for i := range 4 {
		at := 17120*time.Millisecond + time.Duration(i)*4*time.Second
		rep.Events = append(rep.Events,
			demoEvent{At: at, Text: "primary breaker half-open: one call probes it"},
			demoEvent{At: at + 200*time.Millisecond, Text: "primary probe failed: open again for 6.0s"})
	}
	return rep
}

func TestDemoLiveGolden(t *testing.T) {
	rep := goldenReport()
	if len(rep.Providers) != 3 || len(rep.Tasks) != 2 || len(rep.Events) != 12 {
		t.Fatalf("report has %d providers, %d tasks, %d events", len(rep.Providers), len(rep.Tasks), len(rep.Events))
	}
	var b strings.Builder
	writeDemoLive(&b, rep)
	frame := b.String()
	lines := strings.Split(frame, "\n")
	if len(lines) != demoHeight {
		t.Errorf("frame has %d lines, want %d", len(lines), demoHeight)
	}
	if strings.HasSuffix(frame, "\n") {
		t.Error("frame ends with a newline, which scrolls a full screen")
	}
	for i, l := range lines {
		if n := utf8.RuneCountInString(ansiEscape.ReplaceAllString(l, "")); n > demoWidth {
			t.Errorf("line %d is %d columns wide: %q", i+1, n, l)
		}
		if !strings.HasSuffix(l, ansiEOL) {
			t.Errorf("line %d does not end with the clear-line escape: %q", i+1, l)
		}
	}
	plain := ansiEscape.ReplaceAllString(frame, "") + "\n"
	for _, want := range []string{"fault injected", "primary breaker opened", "primary probe failed", "(3 earlier not shown)",
		"alerts   fallback_share triage 62% > 30% since 18.2s"} {
		if !strings.Contains(plain, want) {
			t.Errorf("frame lacks %q", want)
		}
	}
	golden := filepath.Join("testdata", "demo_live_80x24.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(plain), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if plain != string(want) {
		t.Errorf("frame differs from %s (run with -update to rewrite it):\ngot:\n%s\nwant:\n%s", golden, plain, want)
	}
}

func TestDemoLivePinnedEvents(t *testing.T) {
	// Many probes after the breaker opened: the opening and the fault stay on screen.
	rep := goldenReport()
	for i := range 200 {
		rep.Events = append(rep.Events, demoEvent{At: time.Minute + time.Duration(i)*time.Second, Text: fmt.Sprintf("probe %d", i)})
	}
	var b strings.Builder
	writeDemoLive(&b, rep)
	got := b.String()
	for _, want := range []string{"fault injected", "primary breaker opened", "probe 199"} {
		if !strings.Contains(got, want) {
			t.Errorf("frame lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "probe 150") {
		t.Errorf("frame holds an old unpinned event:\n%s", got)
	}
}

func TestFitLine(t *testing.T) {
	tests := []struct {
		in    string
		width int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven cols", 10, "eleven co…"},
		{ansiRed + "red" + ansiReset + " text that is long", 8, ansiRed + "red" + ansiReset + " tex…" + ansiReset},
		{"—·—·—·—·—·—·", 5, "—·—·…"},
		{ansiBold + "bold" + ansiReset, 4, ansiBold + "bold" + ansiReset},
	}
	for _, tc := range tests {
		if got := fitLine(tc.in, tc.width); got != tc.want {
			t.Errorf("fitLine(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
		if n := visibleWidth(fitLine(tc.in, tc.width)); n > tc.width {
			t.Errorf("fitLine(%q, %d) is %d wide", tc.in, tc.width, n)
		}
	}
}
