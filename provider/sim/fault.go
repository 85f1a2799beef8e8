package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/afloat-dev/afloat"
)

// Mode is a fault mode: how the provider misbehaves while the fault is set.
type Mode string

const (
	// ModeNone: no fault; the provider answers as configured.
	ModeNone Mode = ""
	// ModeUnavailable: every call fails with Fault.Status after a short latency.
	ModeUnavailable Mode = "unavailable"
	// ModeTimeout: every call hangs until its context is done, then fails as a timeout.
	ModeTimeout Mode = "timeout"
	// ModeSlow: every call takes Fault.Delay longer than its drawn latency.
	ModeSlow Mode = "slow"
	// ModeMalformed: every call answers 200 with prose that holds no JSON.
	ModeMalformed Mode = "malformed"
)

// ParseMode reads a mode by name: "unavailable", "timeout", "slow", "malformed", or "" or
// "none" for no fault.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeNone, ModeUnavailable, ModeTimeout, ModeSlow, ModeMalformed:
		return m, nil
	case "none":
		return ModeNone, nil
	}
	return "", fmt.Errorf("unknown fault mode %q (want none, unavailable, timeout, slow or malformed)", s)
}

const (
	defaultFaultStatus = 503
	defaultSlowDelay   = 5 * time.Second
)

// Fault is a failure injected into a Provider. The zero Fault is no fault.
type Fault struct {
	Mode Mode
	// Status is the HTTP status a ModeUnavailable call fails with; it sets the error's kind
	// (429 Throttled, 401, 402 and 403 Unusable, other 4xx Contract, 5xx Unavailable).
	// 0 means 503.
	Status int
	// Delay is added to every call's latency under ModeSlow. 0 means 5s.
	Delay time.Duration
}

// Validate reports whether f is a fault a Provider can play: a known mode, a status of 0 or
// 400 to 599, and a delay that is not negative.
func (f Fault) Validate() error {
	if _, err := ParseMode(string(f.Mode)); err != nil {
		return err
	}
	if f.Status != 0 && !isErrorStatus(f.Status) {
		return fmt.Errorf("fault status %d is not a 4xx or 5xx status", f.Status)
	}
	if f.Delay < 0 {
		return fmt.Errorf("fault delay %v is negative", f.Delay)
	}
	return nil
}

func (f Fault) status() int {
	if f.Status == 0 {
		return defaultFaultStatus
	}
	return f.Status
}

func (f Fault) delay() time.Duration {
	if f.Delay == 0 {
		return defaultSlowDelay
	}
	return f.Delay
}

// ErrSimulated is the cause of a failure the provider made up, by fault or by its error rate.
var ErrSimulated = errors.New("simulated failure")

func isErrorStatus(status int) bool { return status >= 400 && status <= 599 }

// kindOf classifies a status as a real adapter would (shared/reference/providers.md §0).
func kindOf(status int) afloat.Kind {
	switch {
	case status == 429:
		return afloat.Throttled
	case status == 401 || status == 402 || status == 403:
		return afloat.Unusable
	case status >= 400 && status < 500:
		return afloat.Contract
	}
	return afloat.Unavailable
}
