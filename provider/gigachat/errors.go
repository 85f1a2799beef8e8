package gigachat

import (
	"encoding/json"
	"net/http"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// maxQuote bounds the part of a provider's message kept in an error.
const maxQuote = 200

// statusError classifies a chat response whose status is not 2xx by
// shared/reference/providers.md §1: every 429 is Throttled, and a 401 reaches it only after
// the one refresh, so it is Unusable. GigaChat's error body is {"status":…,"message":…}; it
// names no type, so Code stays empty.
func (c *Client) statusError(status int, h http.Header, body []byte) *afloat.ProviderError {
	var w struct {
		Message string `json:"message"`
	}
	found := json.Unmarshal(body, &w) == nil && w.Message != ""
	return &afloat.ProviderError{
		Provider:   c.name,
		Status:     status,
		Kind:       httpx.StatusKind(status, false),
		RetryAfter: httpx.RetryAfter(h, c.clock.Now()),
		Err:        httpx.StatusCause(found, w.Message, body, c.quote),
	}
}

// quote prepares a provider's text for an error, without the key or the token.
func (c *Client) quote(s string) string {
	return httpx.Quote(s, maxQuote, c.authKey.Reveal(), c.tokens.current())
}
