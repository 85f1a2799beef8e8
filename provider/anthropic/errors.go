package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// codeSpendLimit is the error code of a 429 that no wait cures: the organisation's spend
// limit is reached.
const codeSpendLimit = "enforced_spend_limit_reached"

// maxQuote bounds the part of a provider's message kept in an error.
const maxQuote = 200

// apiError is the error of a body {"type":"error","error":{"type","message","details"}}.
type apiError struct {
	typ     string
	message string
	code    string // error.details.error_code
}

// parseErrorBody reads an error body, or an error event's data. ok is false when the body
// is not one.
func parseErrorBody(body []byte) (e apiError, ok bool) {
	var w struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Details struct {
				ErrorCode string `json:"error_code"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &w) != nil || w.Error == nil {
		return apiError{}, false
	}
	return apiError{typ: w.Error.Type, message: w.Error.Message, code: w.Error.Details.ErrorCode}, true
}

// label is the vendor code to report: the detailed code when there is one, else the type.
func (e apiError) label() string {
	if e.code != "" {
		return e.code
	}
	return e.typ
}

// statusError classifies a response whose status is not 2xx by shared/reference/providers.md
// §0 and §4: a 429 of the spend limit is Unusable, other 429s Throttled.
func (c *Client) statusError(status int, h http.Header, body []byte) *afloat.ProviderError {
	e, ok := parseErrorBody(body)
	return &afloat.ProviderError{
		Provider:   c.name,
		Status:     status,
		Kind:       httpx.StatusKind(status, e.code == codeSpendLimit),
		Code:       e.label(),
		RetryAfter: httpx.RetryAfter(h, c.clock.Now()),
		Err:        httpx.StatusCause(ok, e.message, body, c.quote),
	}
}

// quote prepares a provider's text for an error, without the key.
func (c *Client) quote(s string) string { return httpx.Quote(s, maxQuote, c.secrets...) }
