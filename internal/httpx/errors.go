package httpx

import (
	"context"
	"errors"

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
