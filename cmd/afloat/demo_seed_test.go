package main

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestDemoSameSeedSameCounts runs the demo's minute on synctest's clock, where only the seed
// can change what happens: the same seed must give the same counts, a call for a call, and
// another seed other counts. (On the real clock a machine's scheduling may still move a call
// that lands within a millisecond of a breaker's change; see the README.)
func TestDemoSameSeedSameCounts(t *testing.T) {
	run := func(seed uint64) string {
		var out string
		synctest.Test(t, func(t *testing.T) {
			rep, err := runDemo(t.Context(), demoOptions{Duration: time.Minute, Rate: 20, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			out = fmt.Sprintf("shed %d, opened after %v, closed after %v", rep.Shed, rep.OpenedAfter, rep.ClosedAfter)
			for _, tr := range rep.Tasks {
				out += fmt.Sprintf("\n%s: %v, degraded %d, reasons %v", tr.Name, tr.Counts, tr.Degraded, tr.Reasons)
			}
		})
		return out
	}
	first := run(1)
	t.Logf("seed 1:\n%s", first)
	for i := range 2 {
		if again := run(1); again != first {
			t.Errorf("run %d of seed 1 differs:\n%s\nfirst:\n%s", i+2, again, first)
		}
	}
	if other := run(2); other == first {
		t.Errorf("seed 2 gave the counts of seed 1:\n%s", other)
	}
}
