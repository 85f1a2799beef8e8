package latency

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

const (
	// relativeAccuracy is the sketch's guarantee: a quantile it returns is within 1% of a
	// sample of that rank.
	relativeAccuracy = 0.01
	// maxBins bounds a sketch's memory (8 bytes a bin). At 1% accuracy 2048 bins span a
	// ratio of e^41 between the smallest and largest sample, far more than any latency
	// range, so the lowest bins never collapse in practice.
	maxBins = 2048
)

// Estimator estimates a percentile of a provider's recent latency for one task, and the
// read timeout derived from it: clamp(percentile × Multiplier, Min, Max), or Initial until
// MinSamples calls have succeeded.
//
// Recency is by count, not by time, so the estimate needs no clock and a test replays it
// exactly: samples go into a current DDSketch; when it holds Window/2 samples it becomes
// the previous one and the sketch before it is cleared for reuse. The estimate reads both,
// so it always covers the last Window/2 to Window samples.
//
// Observe takes a mutex for a sketch insert; every max(1, Window/100) samples, and at each
// rotation, it recomputes the estimate and caches it, so ReadTimeout, Percentile and Median
// are atomic loads that lag the newest samples by less than 1% of the window.
//
// An Estimator is safe for concurrent use.
type Estimator struct {
	cfg   Config
	half  int // samples a sketch holds before rotation
	every int // samples between recomputations

	mu        sync.Mutex
	cur, prev *ddsketch.DDSketch
	merged    *ddsketch.DDSketch // scratch for the quantile over cur and prev
	curN      int
	prevN     int
	successes int // counted up to cfg.MinSamples only
	pending   int // samples since the last recomputation

	// Cached results, read without the mutex.
	readTimeout atomic.Int64 // time.Duration
	percentile  atomic.Int64 // time.Duration; -1 until MinSamples successes
	median      atomic.Int64 // time.Duration; set with percentile
}

// NewEstimator returns an Estimator for cfg, or an error naming the first invalid field.
func NewEstimator(cfg Config) (*Estimator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Estimator{
		cfg:   cfg,
		half:  cfg.Window / 2,
		every: max(1, cfg.Window/100),
	}
	for _, s := range []**ddsketch.DDSketch{&e.cur, &e.prev, &e.merged} {
		if *s, err = ddsketch.LogCollapsingLowestDenseDDSketch(relativeAccuracy, maxBins); err != nil {
			return nil, fmt.Errorf("latency: new sketch: %w", err)
		}
	}
	e.readTimeout.Store(int64(cfg.Initial))
	e.percentile.Store(-1)
	return e, nil
}

// Config returns the Estimator's configuration with defaults filled in.
func (e *Estimator) Config() Config { return e.cfg }

// Observe records the latency of a call that the provider answered (whatever its answer: a
// contract violation still measures the provider's speed). A negative d counts as 0.
//
// Only answers are recorded. A call cut by the read timeout is a censored sample (its
// latency is at least the cut) and it holds the estimate: recording it at the cut would let
// every cut raise the percentile to the cut and the next timeout to cut × Multiplier, so that
// under a brownout the timeout chased a slowing provider up to the call's whole budget and
// every call spent that budget on it. Held, the timeout stays at Multiplier × the percentile
// of real answers: the cuts count as failures toward the circuit breaker, which opens, and the
// next tier answers. The estimate moves only when answers confirm a new latency, for example
// a slower provider whose answers still arrive within the timeout, or the probes of a
// breaker that the cascade lets wait longer.
func (e *Estimator) Observe(d time.Duration) {
	v := max(d, 0).Seconds()
	e.mu.Lock()
	defer e.mu.Unlock()
	// Add fails only for NaN, negative counts or values beyond ~1e300 s: none can occur.
	_ = e.cur.Add(v)
	e.curN++
	e.pending++
	if e.successes < e.cfg.MinSamples {
		e.successes++
		if e.successes == e.cfg.MinSamples {
			e.pending = e.every // warm now: publish the first estimate at once
		}
	}
	if e.curN >= e.half {
		e.prev, e.cur = e.cur, e.prev
		e.cur.Clear()
		e.prevN, e.curN = e.curN, 0
		e.pending = e.every // the window just lost its oldest half
	}
	if e.pending >= e.every && e.successes >= e.cfg.MinSamples {
		e.recompute()
		e.pending = 0
	}
}

// recompute publishes the percentile over cur and prev and the read timeout built on it.
// e.mu must be held.
func (e *Estimator) recompute() {
	e.merged.Clear()
	// Merging fails only across different index mappings; all three sketches share one.
	_ = e.merged.MergeWith(e.prev)
	_ = e.merged.MergeWith(e.cur)
	q, err := e.merged.GetValueAtQuantile(e.cfg.Percentile)
	if err != nil { // empty: cannot happen after a sample, but never publish NaN
		return
	}
	p := durationOf(q)
	if m, err := e.merged.GetValueAtQuantile(0.5); err == nil {
		e.median.Store(int64(durationOf(m)))
	}
	e.percentile.Store(int64(p))
	e.readTimeout.Store(int64(e.clamp(float64(p) * e.cfg.Multiplier)))
}

// durationOf converts seconds to a Duration, saturating instead of overflowing.
func durationOf(seconds float64) time.Duration {
	ns := seconds * float64(time.Second)
	if ns >= float64(1<<63-1) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ns)
}

// clamp bounds ns nanoseconds to [Min, Max].
func (e *Estimator) clamp(ns float64) time.Duration {
	switch {
	case ns <= float64(e.cfg.Min):
		return e.cfg.Min
	case ns >= float64(e.cfg.Max):
		return e.cfg.Max
	}
	return time.Duration(ns)
}

// Percentile returns the estimated Config.Percentile of recent latency, and false (with 0)
// until MinSamples calls have succeeded. The sketch keeps it within about 1% of a sample of
// that rank.
func (e *Estimator) Percentile() (time.Duration, bool) {
	p := e.percentile.Load()
	if p < 0 {
		return 0, false
	}
	return time.Duration(p), true
}

// Median returns the estimated median of recent latency, and false (with 0) until MinSamples
// calls have succeeded: the time within which an attempt is as likely to be answered as not.
func (e *Estimator) Median() (time.Duration, bool) {
	if e.percentile.Load() < 0 {
		return 0, false
	}
	return time.Duration(e.median.Load()), true
}

// ReadTimeout returns the read timeout for the next call: clamp(Percentile × Multiplier,
// Min, Max), or Initial until MinSamples calls have succeeded. The caller still caps it by
// the call's remaining budget.
func (e *Estimator) ReadTimeout() time.Duration {
	return time.Duration(e.readTimeout.Load())
}

// Samples returns how many answers the estimate now covers:
// at most Window, and at least Window/2 once Window/2 samples have arrived.
func (e *Estimator) Samples() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.curN + e.prevN
}
