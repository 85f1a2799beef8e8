package httpx

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/afloat-dev/afloat"
)

// TransportError classifies a failure that left no response (refused, reset, DNS, TLS, a
// timeout, a cancelled context) as an unavailable provider: Kind Unavailable, Status 0, and
// Timeout set when the call ran out of time. A cancelled request context counts as a timeout
// too, because the cascade cuts a slow read by cancelling it. Err is err itself, so
// errors.Is(pe, syscall.ECONNRESET) still holds.
func TransportError(provider string, err error) *afloat.ProviderError {
	return &afloat.ProviderError{
		Provider: provider,
		Kind:     afloat.Unavailable,
		Timeout:  afloat.IsTimeout(err) || errors.Is(err, context.Canceled),
		Err:      err,
	}
}

// StatusKind classifies a status that is not 2xx by shared/reference/providers.md §0. A 429
// is Throttled unless quotaSpent: the adapter found that it names a quota no wait restores
// (a spend limit, a monthly quota), which is Unusable; which 429s those are is each vendor's
// own. 401, 402 and 403 are Unusable; 408 and 5xx (Anthropic's 529 included) Unavailable;
// any other 4xx Contract. A 1xx or 3xx that reached the adapter carries no answer, so it is
// a failure too: Unavailable.
func StatusKind(status int, quotaSpent bool) afloat.Kind {
	switch {
	case status == http.StatusTooManyRequests:
		if quotaSpent {
			return afloat.Unusable
		}
		return afloat.Throttled
	case status == http.StatusUnauthorized, status == http.StatusPaymentRequired, status == http.StatusForbidden:
		return afloat.Unusable
	case status == http.StatusRequestTimeout, status >= 500:
		return afloat.Unavailable
	case status >= 400:
		return afloat.Contract
	}
	return afloat.Unavailable
}

// StatusCause is the Err of an error built for a status that is not 2xx. found says whether
// body is in the vendor's error shape; if so, its message (when not "") is the cause. A body
// in another shape (a proxy's HTML page) is quoted whole as "unexpected body: …". Otherwise,
// and for an empty body, the cause is nil: the status says it all. quote must cut the
// provider's credentials out.
func StatusCause(found bool, message string, body []byte, quote func(string) string) error {
	switch {
	case found && message != "":
		return errors.New(quote(message))
	case !found && len(bytes.TrimSpace(body)) > 0:
		return errors.New("unexpected body: " + quote(string(body)))
	}
	return nil
}

// BodyError is a 2xx response whose body is unusable (not an answer, cut short, too long):
// the provider failed to answer, so Kind is Unavailable.
func BodyError(provider string, status int, err error) *afloat.ProviderError {
	return &afloat.ProviderError{Provider: provider, Status: status, Kind: afloat.Unavailable, Err: err}
}

// DecodeError classifies a failure to decode a 2xx answer: Contract when err holds an
// *ArgumentsError (the model broke the contract, the provider is healthy), else BodyError's
// Unavailable.
func DecodeError(provider string, status int, err error) *afloat.ProviderError {
	pe := BodyError(provider, status, err)
	var ae *ArgumentsError
	if errors.As(err, &ae) {
		pe.Kind = afloat.Contract
	}
	return pe
}

// ContractError is a request that could not be rendered or sent as given: Kind Contract,
// Status 0, since no provider saw it.
func ContractError(provider string, err error) *afloat.ProviderError {
	return &afloat.ProviderError{Provider: provider, Kind: afloat.Contract, Err: err}
}

// RefusedError is a content-policy refusal: the provider declined this content (a
// content-policy 400, a refusal stop reason or status on a 2xx). Kind is Refused, which never
// moves a breaker and is never retried. code is the vendor's word for it; reason, the
// provider's own account (already quoted), is the cause when not "", so that a caller reads
// it with err.Error() or errors.Unwrap(err).Error().
func RefusedError(provider string, status int, code, reason string) *afloat.ProviderError {
	pe := &afloat.ProviderError{Provider: provider, Status: status, Kind: afloat.Refused, Code: code}
	if reason != "" {
		pe.Err = errors.New(reason)
	}
	return pe
}
