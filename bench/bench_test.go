package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary stand in for the bench program when a scenario starts a hop
// in a process of its own: startChild runs os.Executable() with -serve.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-serve" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestQuickRun runs every scenario in -quick mode with its durations cut to a tenth, so
// that the tool keeps building, starting its gateways and reporting. Its figures are not
// checked: performance is measured by `go run ./bench`, never asserted in tests.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole benchmark tool for a few seconds")
	}
	png := filepath.Join(t.TempDir(), "outage.png")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-quick", "-duration", "0.1", "-out", png}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\nreport:\n%s\nprogress:\n%s", code, stdout.String(), stderr.String())
	}
	report := stdout.String()
	for _, heading := range []string{"## 1. overhead", "## 2. failfast", "## 3. outage", "## 4. brownout", "## 5. fleet", "## 6. streams", "## Targets"} {
		if !strings.Contains(report, heading) {
			t.Errorf("the report has no %q section:\n%s", heading, report)
		}
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("outage plot: %v", err)
	}
}

func TestUnknownScenario(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-scenarios", "overhead,nope"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `"nope"`) {
		t.Errorf("exit code %d, stderr %q; want 2 naming the scenario", code, stderr.String())
	}
}
