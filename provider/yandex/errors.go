package yandex

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// maxQuote bounds the part of a provider's message kept in an error.
const maxQuote = 200

// apiError is the error of a body {"error":{"grpcCode","httpCode","message","httpStatus"}},
// or of the gRPC gateway's plain {"code","message"}.
type apiError struct {
	grpcCode int
	message  string
}

// grpcNames are the gRPC codes' names, reported as the error's code.
var grpcNames = map[int]string{
	1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
	6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
	10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
	15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}

// parseErrorBody reads an error body or an error line of a stream; ok is false when the
// body is neither shape.
func parseErrorBody(body []byte) (e apiError, ok bool) {
	var w struct {
		Error *struct {
			GRPCCode int    `json:"grpcCode"`
			Message  string `json:"message"`
		} `json:"error"`
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &w) != nil {
		return apiError{}, false
	}
	switch {
	case w.Error != nil:
		return apiError{grpcCode: w.Error.GRPCCode, message: w.Error.Message}, true
	case w.Code != nil && w.Message != "":
		return apiError{grpcCode: *w.Code, message: w.Message}, true
	}
	return apiError{}, false
}

// quotaID is a quota's identifier at the head of a RESOURCE_EXHAUSTED message
// ("ai.textGenerationCompletionSessionsCount.count"): a machine name, not prose.
var quotaID = regexp.MustCompile(`^[a-z][A-Za-z0-9]*(\.[A-Za-z0-9]+)+$`)

// quota returns the identifier of the quota a 429 names, or "".
func (e apiError) quota() string {
	head, _, _ := strings.Cut(strings.TrimSpace(e.message), " ")
	if quotaID.MatchString(head) {
		return head
	}
	return ""
}

// label is the code to report: the quota a 429 names, else the gRPC code's name.
func (e apiError) label() string {
	if q := e.quota(); q != "" {
		return q
	}
	return grpcNames[e.grpcCode]
}

// periodQuotas are the last segments of quota identifiers that reset over a day or more:
// no wait within a call's deadline cures them.
var periodQuotas = map[string]bool{"day": true, "daily": true, "month": true, "monthly": true}

// spent reports whether the quota a 429 names resets by the day or month.
func (e apiError) spent() bool {
	q := e.quota()
	i := strings.LastIndexByte(q, '.')
	return i >= 0 && periodQuotas[q[i+1:]]
}

// statusError classifies a response whose status is not 2xx by
// shared/reference/providers.md §0 and §2. A 429 is Throttled (a rate or concurrency quota)
// unless the quota it names resets by the day or month: Unusable. A 401 is Unusable: the key
// or token is used as given, there is nothing to refresh.
func (c *Client) statusError(status int, h http.Header, body []byte) *afloat.ProviderError {
	e, ok := parseErrorBody(body)
	return &afloat.ProviderError{
		Provider:   c.name,
		Status:     status,
		Kind:       httpx.StatusKind(status, e.spent()),
		Code:       e.label(),
		RetryAfter: httpx.RetryAfter(h, c.clock.Now()),
		Err:        httpx.StatusCause(ok, e.message, body, c.quote),
	}
}

// quote prepares a provider's text for an error, without the key or token. Yandex quotes a
// bad key back ("Unknown api key '…'").
func (c *Client) quote(s string) string { return httpx.Quote(s, maxQuote, c.secret.Reveal()) }

// refusal is the Refused error of an alternative the content filter stopped. Yandex replaces
// the answer's text with its own account of the refusal, which is kept as the cause.
func (c *Client) refusal(status int, text string) *afloat.ProviderError {
	return httpx.RefusedError(c.name, status, statusContentFilter, c.quote(text))
}
