package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// The OpenAI codes that decide a class apart from the status.
const (
	codeInsufficientQuota = "insufficient_quota"
	// A 400 with one of these codes declines the content under the provider's policy:
	// OpenAI's content_policy_violation, Azure OpenAI's content_filter.
	codeContentPolicy = "content_policy_violation"
	codeContentFilter = "content_filter"
)

// finishContentFilter is the finish reason of an answer the provider's content filter
// stopped or withheld (shared/reference/providers.md §3).
const finishContentFilter = "content_filter"

// contentFiltered is the Refused error of a 2xx answer whose finish reason is
// content_filter. Its cause names the finish reason only: the text the filter stopped is not
// quoted, since it is what the provider would not hand out.
func contentFiltered(provider string, status int) *afloat.ProviderError {
	return httpx.RefusedError(provider, status, finishContentFilter, "finish reason "+finishContentFilter)
}

// maxQuote bounds the part of a provider's message kept in an error.
const maxQuote = 200

// apiError is the error a server put in its body, in whichever shape it used.
type apiError struct {
	message string
	typ     string
	code    string // a string code, or a numeric one written in decimal
}

// parseErrorBody reads an error body: OpenAI, vLLM and llama.cpp send
// {"error":{"message","type","code"}} (code a string or a number), Ollama {"error":"…"},
// older vLLM a top-level {"object":"error","message","type","code"}. ok is false when the
// body is none of these.
func parseErrorBody(body []byte) (e apiError, ok bool) {
	var top struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &top) != nil {
		return apiError{}, false
	}
	raw := bytes.TrimSpace(top.Error)
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if json.Unmarshal(raw, &e.message) != nil {
			return apiError{}, false
		}
		return e, true
	case len(raw) > 0 && raw[0] == '{':
		var inner struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(raw, &inner) != nil {
			return apiError{}, false
		}
		return apiError{message: inner.Message, typ: inner.Type, code: codeString(inner.Code)}, true
	case top.Object == "error" || top.Message != "":
		return apiError{message: top.Message, typ: top.Type, code: codeString(top.Code)}, true
	}
	return apiError{}, false
}

// codeString writes a code that may be a JSON string or a number; anything else is "".
func codeString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// label is the vendor code to report: a string code ("rate_limit_exceeded") names the cause
// better than the type, a numeric one (llama.cpp's 503) names it worse.
func (e apiError) label() string {
	if e.code != "" {
		if _, err := strconv.Atoi(e.code); err != nil {
			return e.code
		}
	}
	if e.typ != "" {
		return e.typ
	}
	return e.code
}

// statusError classifies a response whose status is not 2xx by
// shared/reference/providers.md §0 and §3: a 429 of insufficient_quota is Unusable, other
// 429s Throttled; a 400 of content_policy_violation or content_filter is Refused, with the
// provider's message as its cause.
func (c *Client) statusError(status int, h http.Header, body []byte) *afloat.ProviderError {
	e, ok := parseErrorBody(body)
	quotaSpent := e.code == codeInsufficientQuota || e.typ == codeInsufficientQuota
	kind := httpx.StatusKind(status, quotaSpent)
	if status == http.StatusBadRequest && (e.code == codeContentPolicy || e.code == codeContentFilter) {
		kind = afloat.Refused
	}
	return &afloat.ProviderError{
		Provider:   c.name,
		Status:     status,
		Kind:       kind,
		Code:       e.label(),
		RetryAfter: httpx.RetryAfter(h, c.clock.Now()),
		Err:        httpx.StatusCause(ok, e.message, body, c.quote),
	}
}

// quote prepares a provider's text for an error, without the key or the configured headers'
// values.
func (c *Client) quote(s string) string { return httpx.Quote(s, maxQuote, c.secrets...) }
