package canary

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jonboulle/clockwork"
)

// Defaults of the zero fields of Config and Thresholds.
const (
	DefaultMinCalls      = 100
	DefaultViolationRate = 0.02
	DefaultFailureRate   = 0.05
	DefaultReaskRate     = 0.05
	DefaultP95           = 0.25
	DefaultCost          = 0.25
)

// buckets is the resolution of a share: Pick hashes a key into [0, buckets).
const buckets = 10000

// Thresholds say how much worse than the incumbent the candidate may be: it is rolled back
// when it is worse by more than any of them, and promoted otherwise. Because 0 means the
// default, a threshold that tolerates no worsening at all is written as a tiny value
// (1e-9).
type Thresholds struct {
	// ViolationRate is the most, in share points, by which the candidate's violation rate
	// (first answers that break the contract) may exceed the incumbent's: 0.02 allows 2
	// points more. It must be in [0, 1]; 0 means 0.02.
	ViolationRate float64
	// FailureRate is the most, in share points, by which the candidate's failure rate (calls
	// it gave no valid answer to: a timeout, an error, a violation its re-ask did not mend)
	// may exceed the incumbent's. It must be in [0, 1]; 0 means 0.05: a provider's failures
	// are noisier than a prompt's violations.
	FailureRate float64
	// ReaskRate is the most, in share points, by which the candidate's re-ask rate may exceed
	// the incumbent's. It must be in [0, 1]; 0 means 0.05.
	ReaskRate float64
	// P95 is the most, relative to the incumbent's, by which the candidate's p95 latency may
	// exceed it: 0.2 allows a p95 20% above. It must be finite and not negative; 0 means
	// 0.25.
	P95 float64
	// Cost is the most, relative to the incumbent's, by which the candidate's cost per answer
	// may exceed it. It must be finite and not negative; 0 means 0.25.
	Cost float64
}

// Config sets up a Canary. Share and Window are required; the other zero fields mean the
// defaults noted.
type Config struct {
	// Share is the fraction of calls (by key, see Canary.Pick) sent to the candidate while
	// the canary runs. It must be in (0, 1] and at least 0.0001, the resolution of a share.
	// There is no default.
	Share float64
	// Window is how long the canary runs, from New, before it may decide. It must be
	// positive; there is no default.
	Window time.Duration
	// MinCalls is how many observations each arm needs before the canary may decide, so a
	// quiet tier is not judged on a handful of calls. It must not be negative; 0 means 100.
	MinCalls int
	// RollbackIf holds the thresholds of the decision; its zero fields mean their defaults.
	RollbackIf Thresholds
	// Salt is hashed before the key by Pick, so that canaries with different salts (the
	// candidate's name, say) send different keys to their candidates rather than the same
	// tenants to every canary. "" means no salt: all canaries with the same share pick the
	// same keys.
	Salt string
	// Clock tells the time. nil means the real clock.
	Clock clockwork.Clock
}

// settings is a Config with its defaults filled in and checked.
type settings struct {
	points   int64 // the share in buckets
	window   time.Duration
	minCalls int
	limits   Thresholds
	salt     string
	clock    clockwork.Clock
}

// withDefaults is t with its zero fields at their defaults.
func (t Thresholds) withDefaults() Thresholds {
	return Thresholds{
		ViolationRate: cmp.Or(t.ViolationRate, DefaultViolationRate),
		FailureRate:   cmp.Or(t.FailureRate, DefaultFailureRate),
		ReaskRate:     cmp.Or(t.ReaskRate, DefaultReaskRate),
		P95:           cmp.Or(t.P95, DefaultP95),
		Cost:          cmp.Or(t.Cost, DefaultCost),
	}
}

func (c Config) settings() (settings, error) {
	var errs []error
	points := int64(0)
	switch {
	case !(c.Share > 0 && c.Share <= 1): // also rejects NaN
		errs = append(errs, fmt.Errorf("share %v is outside (0, 1]", c.Share))
	default:
		if points = int64(math.Round(c.Share * buckets)); points == 0 {
			errs = append(errs, fmt.Errorf("share %v is below %v, the smallest share", c.Share, 1.0/buckets))
		}
	}
	if c.Window <= 0 {
		errs = append(errs, fmt.Errorf("window %v is not positive", c.Window))
	}
	if c.MinCalls < 0 {
		errs = append(errs, fmt.Errorf("min calls %d is negative", c.MinCalls))
	}
	t := c.RollbackIf
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"violation rate", t.ViolationRate},
		{"re-ask rate", t.ReaskRate},
		{"failure rate", t.FailureRate},
	} {
		if !(r.v >= 0 && r.v <= 1) {
			errs = append(errs, fmt.Errorf("rollback threshold %s %v is outside [0, 1]", r.name, r.v))
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"p95", t.P95},
		{"cost", t.Cost},
	} {
		if !(r.v >= 0 && !math.IsInf(r.v, 1)) {
			errs = append(errs, fmt.Errorf("rollback threshold %s %v is negative or not finite", r.name, r.v))
		}
	}
	s := settings{
		points:   points,
		window:   c.Window,
		minCalls: cmp.Or(c.MinCalls, DefaultMinCalls),
		limits:   t.withDefaults(),
		salt:     c.Salt,
		clock:    c.Clock,
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if err := errors.Join(errs...); err != nil {
		return settings{}, fmt.Errorf("canary: %w", err)
	}
	return s, nil
}
