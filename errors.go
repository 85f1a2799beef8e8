package afloat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// Kind classifies a provider failure by what it says about the provider
// (shared/reference/providers.md §0). Only Unavailable and Throttled move a circuit breaker.
type Kind int

const (
	// Unavailable: timeout, connection refused or reset, 5xx, 529, an error inside a stream.
	// The zero Kind reads as Unavailable: an unclassified failure is a failure, never a
	// success.
	Unavailable Kind = iota
	// Throttled: 429 for rate or concurrency limits.
	Throttled
	// Unusable: every call would fail alike until a person acts: a bad or revoked key, 402,
	// an exhausted quota or spend limit.
	Unusable
	// Contract: our request or the model's answer is wrong (400, 404, 413, 422, invalid
	// output or tool arguments). It never moves a breaker.
	Contract
	// Refused: the provider declined this content under its usage policy (a content-policy
	// 400, a refusal stop reason). It is neither the provider's health nor a bug: it never
	// moves a breaker and is never retried; whether another tier may be asked is the task's or
	// route's decision (on_refusal).
	Refused
)

var kindNames = [...]string{"unavailable", "throttled", "unusable", "contract", "refused"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// CountsAsFailure reports whether a failure of this kind counts toward a circuit breaker.
func (k Kind) CountsAsFailure() bool { return k == Unavailable || k == Throttled }

// ProviderError is a failed call to a provider, classified. Adapters build it from the status
// and the vendor's error type, never from message text.
type ProviderError struct {
	// Provider is the configured name of the provider ("gigachat-pro").
	Provider string
	// Status is the HTTP status; 0 for a transport error (no response).
	Status int
	Kind   Kind
	// Code is the vendor's error type or code ("insufficient_quota"), if any.
	Code string
	// RetryAfter is the wait the provider asked for; 0 when it named none.
	RetryAfter time.Duration
	// Timeout is set when the call ran out of time (connect, read or deadline).
	Timeout bool
	Err     error
}

func (e *ProviderError) Error() string {
	var msg string
	switch {
	case e.Status != 0 && e.Code != "":
		msg = fmt.Sprintf("%s: %s: status %d (%s)", e.Provider, e.Kind, e.Status, e.Code)
	case e.Status != 0:
		msg = fmt.Sprintf("%s: %s: status %d", e.Provider, e.Kind, e.Status)
	case e.Timeout:
		msg = fmt.Sprintf("%s: %s: timeout", e.Provider, e.Kind)
	default:
		msg = fmt.Sprintf("%s: %s", e.Provider, e.Kind)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Transient reports whether one more attempt on the same provider may succeed: a connection
// reset, a 408, 500, 502, 503 or 504, a 429 that named a wait. A connection that was never established
// (refused, a DNS failure, a dial timeout or reset) is not: the same address would fail
// again, and the next tier should be asked at once. The caller still checks the wait against
// its deadline and its retry budget.
func (e *ProviderError) Transient() bool {
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(e.Err, &op) && op.Op == "dial", errors.As(e.Err, &dns):
		return false
	case e.Kind == Throttled:
		return e.RetryAfter > 0
	case e.Kind != Unavailable:
		return false
	case e.Status == 408 || e.Status == 500 || e.Status == 502 || e.Status == 503 || e.Status == 504:
		return true
	case e.Status == 0 && !e.Timeout:
		return errors.Is(e.Err, syscall.ECONNRESET) || errors.Is(e.Err, syscall.EPIPE)
	}
	return false
}

// KindOf returns the kind of err: the Kind of a *ProviderError in its chain, Contract for a
// *ContractError, and Unavailable for anything else, timeouts included.
func KindOf(err error) Kind {
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Kind
	}
	var ce *ContractError
	if errors.As(err, &ce) {
		return Contract
	}
	return Unavailable
}

// IsTimeout reports whether err is a timeout: a *ProviderError marked so, a context deadline,
// or a network timeout.
func IsTimeout(err error) bool {
	var pe *ProviderError
	if errors.As(err, &pe) && pe.Timeout {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ContractError says that a model's answer does not fit the task's contract. Stage is where
// the answer was lost: "extract" (no JSON in it), "repair" (not repairable) or "schema"
// (valid JSON that does not fit). Details are the readable reasons, fit to quote to a person
// and back to the model in a re-ask.
type ContractError struct {
	Stage   string
	Details []string
	Err     error
}

func (e *ContractError) Error() string {
	msg := "contract violation at " + e.Stage
	for i, d := range e.Details {
		if i == 0 {
			msg += ": " + d
		} else {
			msg += "; " + d
		}
	}
	if len(e.Details) == 0 && e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ContractError) Unwrap() error { return e.Err }
