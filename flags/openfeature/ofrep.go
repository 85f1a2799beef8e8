package openfeature

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	of "github.com/open-feature/go-sdk/openfeature"
)

// DefaultOFREPTimeout bounds an OFREP request when OFREPConfig.Timeout is 0. It is shorter
// than the 10 seconds of the OFREP provider guideline: a Source evaluates its keys one after
// another every second, and a flag system that slow is better left to the fallback.
const DefaultOFREPTimeout = time.Second

// ofrepMaxBody bounds the response bodies read: an evaluation is a few hundred bytes.
const ofrepMaxBody = 1 << 20

// ofrepEvalPath is the single-flag evaluation endpoint, below the base URL; the flag key
// follows it, escaped as one path segment.
const ofrepEvalPath = "/ofrep/v1/evaluate/flags/"

// OFREPConfig configures an OFREPProvider. Only BaseURL is required.
type OFREPConfig struct {
	// BaseURL is the URL of the flag system that the OFREP paths (/ofrep/v1/...) follow, such
	// as http://flagd:8016. It must be http or https, with a host, and hold no user info,
	// query or fragment (credentials belong in Headers); a path is kept as a prefix.
	BaseURL string
	// Headers are sent with every request, such as Authorization or X-API-Key. Their values
	// never appear in the errors an evaluation returns, not even when the flag system echoes
	// them. Content-Type is always application/json. nil sends no headers of its own.
	Headers map[string]string
	// Timeout bounds each request, whether Client is set or not. It must not be negative; 0
	// means DefaultOFREPTimeout.
	Timeout time.Duration
	// Client sends the requests. nil means a client of the provider's own with Timeout.
	Client *http.Client
	// Clock tells when a Retry-After has passed. nil means real time.
	Clock clockwork.Clock
}

// OFREPProvider is an OpenFeature FeatureProvider evaluating each flag remotely through the
// OpenFeature Remote Evaluation Protocol (OFREP), served by flagd, GO Feature Flag, Flipt,
// DevCycle and others: one POST {BaseURL}/ofrep/v1/evaluate/flags/{key} an evaluation, whose
// body carries the flattened evaluation context (the targeting key included, values that do
// not encode as JSON left out). It caches nothing and raises no events, so a Source over it
// sees changes at its refresh interval.
//
// The value must have the JSON type of the evaluation, or the evaluation is TYPE_MISMATCH:
// a boolean, a string, a number (Int takes integral numbers only), an object or array for
// Object. A value absent or null, and one served with reason DISABLED, yield the default
// value with the flag system's reason and variant. The flag system's error codes become the
// SDK's; a 404 is FLAG_NOT_FOUND only when its body says so, so that a wrong BaseURL shows
// as an error rather than as every flag absent. Transport errors, 401, 403, 429 and 5xx are
// GENERAL. After a 429 with Retry-After, evaluations fail at once (GENERAL, rate limited)
// until the time it gives, without a request.
//
// An OFREPProvider is safe for concurrent use.
//
//	p, err := openfeature.NewOFREPProvider(openfeature.OFREPConfig{
//		BaseURL: "http://flagd:8016",
//		Headers: map[string]string{"Authorization": "Bearer " + token},
//	})
//	if err != nil { ... }
//	api := isolated.NewAPI() // or the SDK's global API
//	_ = api.SetProviderAndWait(ctx, p)
//	src, err := openfeature.NewSource(ctx, api.NewClient(), tasks, openfeature.SourceConfig{Fallback: configFlags})
type OFREPProvider struct {
	endpoint string      // the base URL and ofrepEvalPath
	header   http.Header // sent with every request; read-only
	redact   *strings.Replacer
	timeout  time.Duration
	client   *http.Client
	clock    clockwork.Clock

	mu         sync.Mutex
	retryAfter time.Time // no request before it; the zero time when not rate limited
}

var _ of.FeatureProvider = (*OFREPProvider)(nil)

// NewOFREPProvider returns an OFREPProvider for cfg. It makes no request. An invalid
// BaseURL, header name or header value, and a negative Timeout, are errors; the errors name
// the header, never its value.
func NewOFREPProvider(cfg OFREPConfig) (*OFREPProvider, error) {
	base, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil:
		return nil, errors.New("openfeature: ofrep base URL does not parse")
	case base.Scheme != "http" && base.Scheme != "https":
		return nil, fmt.Errorf("openfeature: ofrep base URL scheme %q is not http or https", base.Scheme)
	case base.Host == "":
		return nil, errors.New("openfeature: ofrep base URL has no host")
	case base.User != nil:
		return nil, errors.New("openfeature: ofrep base URL holds user info")
	case base.RawQuery != "" || base.ForceQuery || base.Fragment != "":
		return nil, errors.New("openfeature: ofrep base URL holds a query or fragment")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("openfeature: negative ofrep timeout %v", cfg.Timeout)
	}
	header := http.Header{}
	var secrets []string
	for name, value := range cfg.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("openfeature: invalid ofrep header name %q", name)
		}
		if !validHeaderValue(value) {
			return nil, fmt.Errorf("openfeature: invalid value of ofrep header %q", name)
		}
		if _, dup := header[http.CanonicalHeaderKey(name)]; dup {
			return nil, fmt.Errorf("openfeature: ofrep header %q given twice", name)
		}
		header.Set(name, value)
		secrets = append(secrets, secretParts(value)...)
	}
	header.Set("Content-Type", "application/json")
	if header.Get("Accept") == "" {
		header.Set("Accept", "application/json")
	}
	// Longest first: the replacer tries its strings in order, and a token is part of its
	// "Bearer token" header.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, s := range secrets {
		pairs = append(pairs, s, "[redacted]")
	}

	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultOFREPTimeout
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: timeout}
	}
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &OFREPProvider{
		endpoint: strings.TrimSuffix(base.String(), "/") + ofrepEvalPath,
		header:   header,
		redact:   strings.NewReplacer(pairs...),
		timeout:  timeout,
		client:   client,
		clock:    clock,
	}, nil
}

// Metadata names the provider "ofrep".
func (p *OFREPProvider) Metadata() of.Metadata { return of.Metadata{Name: "ofrep"} }

// Hooks returns no hooks.
func (p *OFREPProvider) Hooks() []of.Hook { return nil }

// BooleanEvaluation evaluates flag, whose value must be a JSON boolean.
func (p *OFREPProvider) BooleanEvaluation(ctx context.Context, flag string, defaultValue bool, flatCtx of.FlattenedContext) of.BoolResolutionDetail {
	return ofrepEvaluate(ctx, p, flag, of.Boolean, defaultValue, flatCtx, decodeBool)
}

// StringEvaluation evaluates flag, whose value must be a JSON string.
func (p *OFREPProvider) StringEvaluation(ctx context.Context, flag string, defaultValue string, flatCtx of.FlattenedContext) of.StringResolutionDetail {
	return ofrepEvaluate(ctx, p, flag, of.String, defaultValue, flatCtx, decodeString)
}

// FloatEvaluation evaluates flag, whose value must be a JSON number.
func (p *OFREPProvider) FloatEvaluation(ctx context.Context, flag string, defaultValue float64, flatCtx of.FlattenedContext) of.FloatResolutionDetail {
	return ofrepEvaluate(ctx, p, flag, of.Float, defaultValue, flatCtx, decodeFloat)
}

// IntEvaluation evaluates flag, whose value must be a JSON number without a fraction (3 or
// 3.0, not 3.5) within the range of an int64.
func (p *OFREPProvider) IntEvaluation(ctx context.Context, flag string, defaultValue int64, flatCtx of.FlattenedContext) of.IntResolutionDetail {
	return ofrepEvaluate(ctx, p, flag, of.Int, defaultValue, flatCtx, decodeInt)
}

// ObjectEvaluation evaluates flag, whose value must be a JSON object or array; it is
// returned as encoding/json decodes it into an any (map[string]any, []any, float64...).
func (p *OFREPProvider) ObjectEvaluation(ctx context.Context, flag string, defaultValue any, flatCtx of.FlattenedContext) of.InterfaceResolutionDetail {
	return ofrepEvaluate(ctx, p, flag, of.Object, defaultValue, flatCtx, decodeObject)
}

// ofrepSuccess is the body of a 200 answer. Value is nil when absent.
type ofrepSuccess struct {
	Value    json.RawMessage `json:"value"`
	Reason   string          `json:"reason"`
	Variant  string          `json:"variant"`
	Metadata json.RawMessage `json:"metadata"`
	// Not in a 200 by the spec, but honoured: a value with an error code is no value.
	ErrorCode    string `json:"errorCode"`
	ErrorDetails string `json:"errorDetails"`
}

// ofrepFailure is the body of an error answer.
type ofrepFailure struct {
	ErrorCode    string `json:"errorCode"`
	ErrorDetails string `json:"errorDetails"`
}

// ofrepEvaluate evaluates flag as a want, decoding its value with decode, or returns
// defaultValue with the resolution error.
func ofrepEvaluate[T any](ctx context.Context, p *OFREPProvider, flag string, want of.Type, defaultValue T,
	flatCtx of.FlattenedContext, decode func(json.RawMessage) (T, bool)) of.GenericResolutionDetail[T] {
	s, rerr, ok := p.fetch(ctx, flag, flatCtx)
	if !ok {
		return of.GenericResolutionDetail[T]{Value: defaultValue, ProviderResolutionDetail: failed(rerr)}
	}
	detail := of.ProviderResolutionDetail{Reason: of.Reason(s.Reason), Variant: s.Variant, FlagMetadata: ofrepMetadata(s.Metadata)}
	// No value defers to the default (OFREP ADR 0006), and so does a disabled flag, as with
	// the SDK's own providers: the value served is not the flag's.
	if jsonNull(s.Value) || detail.Reason == of.DisabledReason {
		if detail.Reason == "" {
			detail.Reason = of.DefaultReason
		}
		return of.GenericResolutionDetail[T]{Value: defaultValue, ProviderResolutionDetail: detail}
	}
	v, ok := decode(s.Value)
	if !ok {
		msg := fmt.Sprintf("ofrep: the value is %s, not %s", jsonKind(s.Value), ofrepTypeName(want))
		return of.GenericResolutionDetail[T]{Value: defaultValue, ProviderResolutionDetail: failed(of.NewTypeMismatchResolutionError(msg))}
	}
	return of.GenericResolutionDetail[T]{Value: v, ProviderResolutionDetail: detail}
}

// fetch asks the flag system to evaluate flag, and reports false with the resolution error
// when it gives no evaluation.
func (p *OFREPProvider) fetch(ctx context.Context, flag string, flatCtx of.FlattenedContext) (ofrepSuccess, of.ResolutionError, bool) {
	fail := func(e of.ResolutionError) (ofrepSuccess, of.ResolutionError, bool) { return ofrepSuccess{}, e, false }
	if flag == "" {
		return fail(of.NewFlagNotFoundResolutionError("ofrep: empty flag key"))
	}
	if until, limited := p.limited(); limited {
		return fail(of.NewGeneralResolutionError(rateLimited(until)))
	}
	body, err := json.Marshal(struct {
		Context map[string]json.RawMessage `json:"context"`
	}{ofrepContext(flatCtx)})
	if err != nil { // cannot happen: every value was encoded alone already
		return fail(of.NewGeneralResolutionError("ofrep: encoding the context", err))
	}

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint+url.PathEscape(flag), bytes.NewReader(body))
	if err != nil {
		return fail(of.NewGeneralResolutionError(p.message("ofrep: %v", err), err))
	}
	req.Header = p.header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		// A *url.Error: the method, the URL (without user info, which NewOFREPProvider
		// refuses anyway) and the cause; never the request's headers.
		return fail(of.NewGeneralResolutionError(p.message("ofrep: %v", err), err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, ofrepMaxBody+1))
	if err != nil {
		return fail(of.NewGeneralResolutionError(p.message("ofrep: status %d: reading the body: %v", resp.StatusCode, err), err))
	}
	if len(data) > ofrepMaxBody {
		return fail(of.NewGeneralResolutionError(fmt.Sprintf("ofrep: status %d: body over %d bytes", resp.StatusCode, ofrepMaxBody)))
	}

	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		var s ofrepSuccess
		if err := json.Unmarshal(data, &s); err != nil {
			return fail(of.NewParseErrorResolutionError(p.message("ofrep: decoding the evaluation: %v", err), err))
		}
		if s.ErrorCode != "" {
			return fail(p.resolutionError(code, s.ErrorCode, s.ErrorDetails))
		}
		return s, of.ResolutionError{}, true
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fail(of.NewGeneralResolutionError(fmt.Sprintf("ofrep: unauthorized: status %d", code)))
	case code == http.StatusTooManyRequests:
		until, ok := parseRetryAfter(resp.Header.Get("Retry-After"), p.clock.Now())
		if !ok {
			return fail(of.NewGeneralResolutionError("ofrep: rate limited: status 429"))
		}
		return fail(of.NewGeneralResolutionError(rateLimited(p.backOff(until))))
	case code == http.StatusBadRequest || code == http.StatusNotFound:
		var f ofrepFailure
		if json.Unmarshal(data, &f) != nil || f.ErrorCode == "" {
			return fail(of.NewGeneralResolutionError(fmt.Sprintf("ofrep: status %d without an OFREP error code", code)))
		}
		return fail(p.resolutionError(code, f.ErrorCode, f.ErrorDetails))
	default: // 5xx, and statuses OFREP does not use
		var f ofrepFailure
		if json.Unmarshal(data, &f) == nil && f.ErrorDetails != "" {
			return fail(of.NewGeneralResolutionError(p.message("ofrep: status %d: %s", code, clipDetails(f.ErrorDetails))))
		}
		return fail(of.NewGeneralResolutionError(fmt.Sprintf("ofrep: status %d", code)))
	}
}

// resolutionError maps an OFREP error code to the SDK's; codes OFREP does not define are
// GENERAL.
func (p *OFREPProvider) resolutionError(status int, code, details string) of.ResolutionError {
	msg := fmt.Sprintf("ofrep: status %d", status)
	if details != "" {
		msg = p.message("ofrep: %s", clipDetails(details))
	}
	switch of.ErrorCode(code) {
	case of.FlagNotFoundCode:
		return of.NewFlagNotFoundResolutionError(msg)
	case of.ParseErrorCode:
		return of.NewParseErrorResolutionError(msg)
	case of.TypeMismatchCode:
		return of.NewTypeMismatchResolutionError(msg)
	case of.TargetingKeyMissingCode:
		return of.NewTargetingKeyMissingResolutionError(msg)
	case of.InvalidContextCode:
		return of.NewInvalidContextResolutionError(msg)
	case of.GeneralCode:
		return of.NewGeneralResolutionError(msg)
	}
	return of.NewGeneralResolutionError(p.message("%s (error code %q)", msg, clipDetails(code)))
}

// message formats an error message with the header values taken out.
func (p *OFREPProvider) message(format string, args ...any) string {
	return p.redact.Replace(fmt.Sprintf(format, args...))
}

// limited reports whether a Retry-After is in force, and until when.
func (p *OFREPProvider) limited() (time.Time, bool) {
	p.mu.Lock()
	until := p.retryAfter
	p.mu.Unlock()
	return until, p.clock.Now().Before(until)
}

// backOff holds requests until until, unless a later Retry-After holds them already, and
// returns the time they are held until.
func (p *OFREPProvider) backOff(until time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until.After(p.retryAfter) {
		p.retryAfter = until
	}
	return p.retryAfter
}

// rateLimited is the message of an evaluation refused for a Retry-After; it names the time,
// not the time left, so that a Source logs it once, not on every refresh.
func rateLimited(until time.Time) string {
	return "ofrep: rate limited until " + until.UTC().Format(time.RFC3339)
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date (RFC 9110), or the
// RFC 3339 time of the OFREP spec's example.
func parseRetryAfter(h string, now time.Time) (time.Time, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return time.Time{}, false
	}
	if secs, err := strconv.ParseUint(h, 10, 32); err == nil {
		return now.Add(time.Duration(secs) * time.Second), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.RFC3339, h); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// ofrepContext returns the OFREP context of an evaluation: the flattened context, each value
// encoded, less the values that do not encode as JSON (functions, channels, NaN...).
func ofrepContext(flatCtx of.FlattenedContext) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(flatCtx))
	for k, v := range flatCtx {
		b, err := json.Marshal(v)
		if err != nil {
			continue
		}
		out[k] = b
	}
	return out
}

// ofrepMetadata returns the flag metadata of an evaluation; metadata that is not a JSON object
// is dropped rather than failing an evaluation that has a value.
func ofrepMetadata(raw json.RawMessage) of.FlagMetadata {
	if jsonKind(raw) != "an object" {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func decodeBool(raw json.RawMessage) (bool, bool) {
	var b bool
	return b, jsonKind(raw) == "a boolean" && json.Unmarshal(raw, &b) == nil
}

func decodeString(raw json.RawMessage) (string, bool) {
	var s string
	return s, jsonKind(raw) == "a string" && json.Unmarshal(raw, &s) == nil
}

func decodeFloat(raw json.RawMessage) (float64, bool) {
	var f float64
	return f, jsonKind(raw) == "a number" && json.Unmarshal(raw, &f) == nil
}

func decodeInt(raw json.RawMessage) (int64, bool) {
	var n json.Number // not a float64 first, which loses integers beyond 2^53
	if jsonKind(raw) != "a number" || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64() // 3.0, 1e3
	if err != nil || f != math.Trunc(f) || f < -0x1p63 || f >= 0x1p63 {
		return 0, false
	}
	return int64(f), true
}

func decodeObject(raw json.RawMessage) (any, bool) {
	var v any
	k := jsonKind(raw)
	return v, (k == "an object" || k == "an array") && json.Unmarshal(raw, &v) == nil
}

// jsonNull reports whether raw holds no value: absent, or null.
func jsonNull(raw json.RawMessage) bool {
	return len(raw) == 0 || jsonKind(raw) == "null"
}

// jsonKind names the JSON type of raw, from its first byte.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch c := raw[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return "not JSON"
}

// ofrepTypeName names the JSON type an evaluation of want takes.
func ofrepTypeName(want of.Type) string {
	switch want {
	case of.Boolean:
		return "a boolean"
	case of.String:
		return "a string"
	case of.Int:
		return "an integer"
	case of.Float:
		return "a number"
	}
	return "an object or array"
}

// clipDetails bounds a text the flag system sent, which goes into logs.
func clipDetails(s string) string {
	const limit = 256
	if len(s) <= limit {
		return s
	}
	s = s[:limit]
	for len(s) > 0 && !utf8.ValidString(s) { // a rune cut in two
		s = s[:len(s)-1]
	}
	return s + "…"
}

// secretParts returns what of a header value must not show in errors: the value, and the
// credentials after an authorization scheme ("Bearer <token>").
func secretParts(value string) []string {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil
	}
	parts := []string{value}
	if _, cred, ok := strings.Cut(value, " "); ok {
		if cred = strings.TrimSpace(cred); cred != "" {
			parts = append(parts, cred)
		}
	}
	return parts
}

// validHeaderName reports whether name is an HTTP token (RFC 9110 §5.1).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether value holds no control character but tab (RFC 9110 §5.5).
func validHeaderValue(value string) bool {
	for _, c := range []byte(value) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
