package breaker

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"
)

// Config tunes a Breaker. Its zero value gives the defaults below, the Default constants
// (the settings of DESIGN.md §4, defaults.breaker).
type Config struct {
	// ConsecutiveFailures trips the breaker after this many availability failures in a row
	// (a success or a contract failure ends the row). 0 means 5.
	ConsecutiveFailures int
	// FailureRate trips the breaker when failures/calls over Window reaches it, once Window
	// holds at least MinCalls calls. It must be in (0, 1]; 0 means 0.5.
	FailureRate float64
	// Window is the sliding period over which FailureRate is measured, in 10 buckets.
	// 0 means 30s.
	Window time.Duration
	// MinCalls is the fewest calls in Window for FailureRate to trip the breaker. 0 means 20.
	MinCalls int
	// Recovery is how long the breaker stays open, before jitter, after it trips: then it
	// admits one probe. It is short because most provider incidents are: a longer outage is
	// met by the growth of the period after each failed probe. 0 means 10s.
	Recovery time.Duration
	// MaxRecovery caps the open period (jitter included), which each failed probe multiplies
	// by Growth. It must not be shorter than Recovery. 0 means 5m.
	MaxRecovery time.Duration
	// Growth multiplies the open period after each failed probe, until a call succeeds in the
	// closed state again. It must be at least 1 (1 keeps the period at Recovery) and finite;
	// 0 means 1.5, so probes of a long outage stay minutes rather than hours apart.
	Growth float64
	// Jitter spreads each open period by failures uniformly over ±Jitter of its length, so
	// that the breakers of many replicas, or of providers that failed together, do not
	// probe in step. It must be in [0, 1), or -1 for none; 0 means 0.2. The cooldown of an Unusable failure,
	// a Retry-After that extends an open period and a forced opening are not jittered.
	Jitter float64
	// Rand returns the random numbers in [0, 1) that Jitter scales and that RampUp draws
	// admissions with; it is called from many goroutines at once, so it must be safe for
	// concurrent use. nil means math/rand/v2's Float64. Tests inject a fixed value (0.5 is no
	// jitter at all; during a ramp-up it turns every call away in the first half, none after).
	Rand func() float64
	// UnusableCooldown is how long an Unusable failure (bad key, exhausted quota) opens the
	// breaker for. 0 means 5m.
	UnusableCooldown time.Duration
	// ProbeTimeout frees the probe slot of a probe that was admitted but never reported
	// (Done or Cancel), so that another caller may probe. 0 means 1m.
	ProbeTimeout time.Duration
	// RampUp is how long a breaker that a good probe closed takes to give its provider all
	// of its calls again: from the close, the share of calls that Allow admits rises
	// linearly from none to all over RampUp, drawn per call with Rand, and the others are
	// skipped as by an open circuit (ErrOpen), so that a provider just back is not flooded
	// by the whole load at once. The state stays closed and the admitted calls count as
	// usual: failures among them can open it again. A close by Force does not ramp up. In a
	// shared store the ramp-up is the fleet's, as it is read from the shared record. 0 means
	// no ramp-up: every call goes through from the close on.
	RampUp time.Duration
	// Disabled makes a breaker that admits every call and never opens, for tests and
	// comparisons. false means the breaker works.
	Disabled bool
	// Clock tells the time. nil means the real clock.
	Clock clockwork.Clock
	// Store holds the breaker's state. nil means a new MemoryStore of this breaker alone.
	Store Store
	// OnStateChange is called once for each change of state this breaker makes (not for
	// changes another replica makes in a shared store), after the change, never while a lock
	// is held, one call at a time and in the order of the changes; it may call the breaker's
	// methods. It runs on the goroutine of a caller of Allow, Done or Force (not always the
	// one that made the change), so it should return quickly. nil means no calls.
	OnStateChange func(Event)
}

// Defaults of Config's zero fields.
const (
	DefaultConsecutiveFailures = 5
	DefaultFailureRate         = 0.5
	DefaultWindow              = 30 * time.Second
	DefaultMinCalls            = 20
	DefaultRecovery            = 10 * time.Second
	DefaultMaxRecovery         = 5 * time.Minute
	DefaultGrowth              = 1.5
	DefaultJitter              = 0.2
	DefaultUnusableCooldown    = 5 * time.Minute
	DefaultProbeTimeout        = time.Minute
)

// settings is a Config with its defaults filled in and checked.
type settings struct {
	consecutive      int
	rate             float64
	window           time.Duration
	minCalls         int
	recovery         time.Duration
	maxRecovery      time.Duration
	growth           float64
	jitter           float64
	rand             func() float64
	unusableCooldown time.Duration
	probeTimeout     time.Duration
	rampUp           time.Duration
	disabled         bool
}

func (c Config) settings() (settings, error) {
	var errs []error
	if c.ConsecutiveFailures < 0 {
		errs = append(errs, fmt.Errorf("consecutive failures %d is negative", c.ConsecutiveFailures))
	}
	if c.MinCalls < 0 {
		errs = append(errs, fmt.Errorf("min calls %d is negative", c.MinCalls))
	}
	if math.IsNaN(c.FailureRate) || c.FailureRate < 0 || c.FailureRate > 1 {
		errs = append(errs, fmt.Errorf("failure rate %v is outside (0, 1]", c.FailureRate))
	}
	if c.Growth != 0 && !(c.Growth >= 1 && !math.IsInf(c.Growth, 1)) { // also rejects NaN
		errs = append(errs, fmt.Errorf("growth %v is below 1 or not finite", c.Growth))
	}
	if c.Jitter != -1 && !(c.Jitter >= 0 && c.Jitter < 1) {
		errs = append(errs, fmt.Errorf("jitter %v is outside [0, 1) (or -1 for none)", c.Jitter))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"window", c.Window},
		{"recovery", c.Recovery},
		{"max recovery", c.MaxRecovery},
		{"unusable cooldown", c.UnusableCooldown},
		{"probe timeout", c.ProbeTimeout},
		{"ramp up", c.RampUp},
	} {
		if d.d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.d))
		}
	}
	s := settings{
		consecutive:      cmp.Or(c.ConsecutiveFailures, DefaultConsecutiveFailures),
		rate:             cmp.Or(c.FailureRate, DefaultFailureRate),
		window:           cmp.Or(c.Window, DefaultWindow),
		minCalls:         cmp.Or(c.MinCalls, DefaultMinCalls),
		recovery:         cmp.Or(c.Recovery, DefaultRecovery),
		maxRecovery:      cmp.Or(c.MaxRecovery, DefaultMaxRecovery),
		growth:           cmp.Or(c.Growth, DefaultGrowth),
		jitter:           max(0, cmp.Or(c.Jitter, DefaultJitter)),
		rand:             c.Rand,
		unusableCooldown: cmp.Or(c.UnusableCooldown, DefaultUnusableCooldown),
		probeTimeout:     cmp.Or(c.ProbeTimeout, DefaultProbeTimeout),
		rampUp:           c.RampUp,
		disabled:         c.Disabled,
	}
	if len(errs) == 0 && s.maxRecovery < s.recovery {
		errs = append(errs, fmt.Errorf("max recovery %v is shorter than recovery %v", s.maxRecovery, s.recovery))
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	return s, errors.Join(errs...)
}
