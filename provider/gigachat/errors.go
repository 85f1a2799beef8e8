package gigachat

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// maxQuote bounds the part of a provider's message kept in an error.
const maxQuote = 200

// kindOf classifies a non-2xx status of the chat endpoint by shared/reference/providers.md
// §1. A 401 reaches it only after the one refresh: Unusable.
func kindOf(status int) afloat.Kind {
	switch {
	case status == http.StatusTooManyRequests:
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

// statusError classifies a chat response whose status is not 2xx. GigaChat's error body is
// {"status":…,"message":…}; it names no type, so Code stays empty.
func (c *Client) statusError(status int, h http.Header, body []byte) *afloat.ProviderError {
	pe := &afloat.ProviderError{
		Provider:   c.name,
		Status:     status,
		Kind:       kindOf(status),
		RetryAfter: httpx.RetryAfter(h, c.clock.Now()),
	}
	var w struct {
		Message string `json:"message"`
	}
	switch {
	case json.Unmarshal(body, &w) == nil && w.Message != "":
		pe.Err = errors.New(c.quote(w.Message))
	case len(bytes.TrimSpace(body)) > 0:
		pe.Err = errors.New("unexpected body: " + c.quote(string(body)))
	}
	return pe
}

// bodyError is a 2xx whose body is unusable: the provider failed to answer.
func (c *Client) bodyError(status int, err error) *afloat.ProviderError {
	return &afloat.ProviderError{Provider: c.name, Status: status, Kind: afloat.Unavailable, Err: err}
}

// decodeFailure classifies an error of decoding a 200: bad arguments are Contract, the rest
// Unavailable.
func (c *Client) decodeFailure(status int, err error) *afloat.ProviderError {
	pe := c.bodyError(status, err)
	var ae *argumentsError
	if errors.As(err, &ae) {
		pe.Kind = afloat.Contract
	}
	return pe
}

// quote prepares a provider's text for an error, without the key or the token.
func (c *Client) quote(s string) string {
	return httpx.Quote(s, maxQuote, c.authKey, c.tokens.current())
}
