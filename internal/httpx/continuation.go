package httpx

import (
	"errors"

	"github.com/afloat-dev/afloat"
)

// Continuations an adapter reports (its Continuation method) for the config layer: what the
// provider can do with an answer cut on another provider (afloat.Request's Continue).
const (
	// ContinuePrefill: the provider continues a final assistant message (a prefill) and
	// answers with what it adds.
	ContinuePrefill = "prefill"
	// ContinueNone: the provider cannot; a request with Continue is refused unsent.
	ContinueNone = "none"
)

// CheckContinue checks a request that asks for a continuation: its last message must be an
// assistant message of text, with no tool calls, for the provider to continue.
func CheckContinue(msgs []afloat.Message) error {
	if len(msgs) == 0 {
		return errors.New("continue: the request has no messages")
	}
	last := msgs[len(msgs)-1]
	switch {
	case last.Role != afloat.RoleAssistant:
		return errors.New("continue: the last message is not an assistant message")
	case len(last.ToolCalls) > 0:
		return errors.New("continue: the last message holds tool calls, not text to continue")
	}
	return nil
}

// errNoContinuation: an adapter asked to continue an answer it cannot continue.
var errNoContinuation = errors.New("continue: this provider cannot continue an answer (no assistant prefill)")

// NoContinuation is the error of an adapter that cannot continue an answer, given a request
// with Continue: Contract, with Status 0, since it is never sent. A provider asked anyway
// would answer anew or fail with a 400 of its own, and either would hide the
// misconfiguration behind what looks like the provider's failure.
func NoContinuation(provider string) *afloat.ProviderError {
	return ContractError(provider, errNoContinuation)
}
