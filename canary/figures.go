package canary

import (
	"fmt"
	"math"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

const (
	// relativeAccuracy is the p95's guarantee: within 1% of a latency of that rank.
	relativeAccuracy = 0.01
	// maxBins bounds a sketch's memory, as in package latency: at 1% accuracy 2048 bins span
	// far more than any range of latencies.
	maxBins = 2048
)

// Observation is one call on the canaried tier, as one arm answered it (or failed to).
type Observation struct {
	// Violation is whether the first answer broke the contract, before any re-ask.
	Violation bool
	// Reask is whether the call re-asked.
	Reask bool
	// Failed is whether the arm gave no valid answer at all, an availability failure
	// included.
	Failed bool
	// Latency is the time of the whole attempt, or attempts, on this tier. Only answered
	// (not Failed) calls count toward the p95, since a failure's latency is often a timeout's
	// cut; a negative latency counts as 0.
	Latency time.Duration
	// Cost is the money spent on this tier for this call, failed calls included, in any
	// currency as long as both arms use the same. A negative, infinite or NaN cost counts as 0.
	Cost float64
}

// Figures are one arm's, over all its observations since the canary started.
type Figures struct {
	Calls         int           // observations
	ViolationRate float64       // of Calls whose first answer violated the contract
	ReaskRate     float64       // of Calls that re-asked
	FailureRate   float64       // of Calls with no valid answer
	P95           time.Duration // of the answered calls' latency (1% accuracy); 0 when none
	CostPerAnswer float64       // cost sum / answered calls; 0 when none
}

// tally accumulates one arm's observations.
type tally struct {
	calls, violations, reasks, failures int
	cost                                float64
	latency                             *ddsketch.DDSketch // seconds of answered calls
	// The exact bounds of the answered calls' latency bound the sketch's p95, so that arms
	// that answer in a constant time read that time rather than a bin's value 1% off it.
	fastest, slowest time.Duration
}

func newTally() (tally, error) {
	s, err := ddsketch.LogCollapsingLowestDenseDDSketch(relativeAccuracy, maxBins)
	if err != nil {
		return tally{}, fmt.Errorf("canary: new sketch: %w", err)
	}
	return tally{latency: s}, nil
}

func (t *tally) add(o Observation) {
	t.calls++
	if o.Violation {
		t.violations++
	}
	if o.Reask {
		t.reasks++
	}
	if o.Cost > 0 && !math.IsInf(o.Cost, 1) {
		t.cost += o.Cost
	}
	if o.Failed {
		t.failures++
		return
	}
	d := max(o.Latency, 0)
	if t.latency.IsEmpty() {
		t.fastest, t.slowest = d, d
	}
	t.fastest, t.slowest = min(t.fastest, d), max(t.slowest, d)
	// Add fails only for NaN or values beyond ~1e300 s: a Duration is neither.
	_ = t.latency.Add(d.Seconds())
}

func (t *tally) figures() Figures {
	f := Figures{Calls: t.calls}
	if t.calls == 0 {
		return f
	}
	n := float64(t.calls)
	f.ViolationRate = float64(t.violations) / n
	f.ReaskRate = float64(t.reasks) / n
	f.FailureRate = float64(t.failures) / n
	if answered := t.calls - t.failures; answered > 0 {
		f.CostPerAnswer = t.cost / float64(answered)
		if q, err := t.latency.GetValueAtQuantile(0.95); err == nil {
			f.P95 = min(max(time.Duration(q*float64(time.Second)), t.fastest), t.slowest)
		}
	}
	return f
}
