package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
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

// kindOf classifies a non-2xx status by shared/reference/providers.md §0 and §4.
func kindOf(status int, e apiError) afloat.Kind {
	switch {
	case status == http.StatusTooManyRequests:
		if e.code == codeSpendLimit {
			return afloat.Unusable
		}
		return afloat.Throttled
	case status == http.StatusUnauthorized, status == http.StatusPaymentRequired, status == http.StatusForbidden:
		return afloat.Unusable
	case status == http.StatusRequestTimeout, status >= 500:
		// 529 overloaded_error included.
		return afloat.Unavailable
	case status >= 400:
		return afloat.Contract
	}
	return afloat.Unavailable
}

// statusError classifies a response whose status is not 2xx.
func (c *Client) statusError(status int, h http.Header, body []byte) *afloat.ProviderError {
	e, ok := parseErrorBody(body)
	pe := &afloat.ProviderError{
		Provider:   c.name,
		Status:     status,
		Kind:       kindOf(status, e),
		Code:       e.label(),
		RetryAfter: httpx.RetryAfter(h, c.clock.Now()),
	}
	switch {
	case ok && e.message != "":
		pe.Err = errors.New(c.quote(e.message))
	case !ok && len(bytes.TrimSpace(body)) > 0:
		pe.Err = errors.New("unexpected body: " + c.quote(string(body)))
	}
	return pe
}

// bodyError is a 2xx whose body is unusable: the provider failed to answer.
func (c *Client) bodyError(status int, err error) *afloat.ProviderError {
	return &afloat.ProviderError{Provider: c.name, Status: status, Kind: afloat.Unavailable, Err: err}
}

// decodeFailure classifies an error of decoding a 200: bad tool arguments are Contract, the
// rest Unavailable.
func (c *Client) decodeFailure(status int, err error) *afloat.ProviderError {
	pe := c.bodyError(status, err)
	var ae *argumentsError
	if errors.As(err, &ae) {
		pe.Kind = afloat.Contract
	}
	return pe
}

// quote prepares a provider's text for an error, without the key.
func (c *Client) quote(s string) string { return httpx.Quote(s, maxQuote, c.apiKey) }
