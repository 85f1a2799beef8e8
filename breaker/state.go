package breaker

import (
	"fmt"
	"time"

	"github.com/afloat-dev/afloat"
)

// State is the position of a breaker. Its numeric value is the value of the metric
// afloat_circuit_state.
type State int

const (
	// StateClosed: calls go through and their outcomes are counted.
	StateClosed State = iota
	// StateHalfOpen: the open period is over; one probe call at a time is admitted.
	StateHalfOpen
	// StateOpen: every call is skipped until the open period ends.
	StateOpen
)

var stateNames = [...]string{"closed", "half-open", "open"}

func (s State) String() string {
	if !s.valid() {
		return fmt.Sprintf("state(%d)", int(s))
	}
	return stateNames[s]
}

func (s State) valid() bool { return s >= 0 && int(s) < len(stateNames) }

// ParseState reads "closed", "half-open" or "open".
func ParseState(s string) (State, error) {
	for i, name := range stateNames {
		if name == s {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("breaker: unknown state %q (want closed, half-open or open)", s)
}

// Event is one change of a breaker's state, given to Config.OnStateChange.
type Event struct {
	// Name is the breaker's name (the provider's).
	Name string
	From State
	To   State
	// At is when the state changed, on the breaker's clock.
	At time.Time
	// Kind is the kind of the failure that caused an opening; it is meaningful only when To
	// is StateOpen and Forced is false.
	Kind afloat.Kind
	// Until is the end of the open period when To is StateOpen; zero otherwise.
	Until time.Time
	// Forced is set when an administrator changed the state with Force.
	Forced bool
}

// Snapshot is what a breaker's state looks like at one moment.
type Snapshot struct {
	State State
	// Since is when the breaker entered State; zero for a breaker that never changed state.
	Since time.Time
	// Until is the end of the open period when State is StateOpen; zero otherwise.
	Until time.Time
	// Recovery is the open period, before jitter, that the next opening by failures will use:
	// Config.Recovery, or more after failed probes (× Config.Growth each, up to MaxRecovery)
	// until a call succeeds in the closed state.
	Recovery time.Duration
	// RampUntil is the end of the ramp-up (see Config.RampUp) when State is StateClosed and
	// the breaker, closed by a good probe, still admits only a share of calls; zero otherwise.
	RampUntil time.Time
}
