package openfeature

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/jonboulle/clockwork"
	of "github.com/open-feature/go-sdk/openfeature"
)

// The credentials the tests send; no error message may hold them.
const (
	ofrepToken  = "s3cret-token-4711"
	ofrepAPIKey = "api-key-0815"
)

var ofrepHeaders = map[string]string{"Authorization": "Bearer " + ofrepToken, "X-API-Key": ofrepAPIKey}

// ofrepReply is what the test OFREP server answers for a key.
type ofrepReply struct {
	status     int
	body       string
	retryAfter string // "" for none
}

// ofrepValue is a 200 answer with value, reason STATIC and variant "on".
func ofrepValue(value string) ofrepReply {
	return ofrepReply{http.StatusOK, `{"key":"k","value":` + value + `,"reason":"STATIC","variant":"on"}`, ""}
}

// ofrepRequest is a request the test OFREP server received.
type ofrepRequest struct {
	method, path, key string
	header            http.Header
	context           map[string]any
}

// ofrepServer is a local OFREP flag system: it answers each key with its reply, and a key
// without one with a 404 FLAG_NOT_FOUND, as flagd does. It is safe for concurrent use.
type ofrepServer struct {
	*httptest.Server
	prefix string // the path of the base URL

	mu      sync.Mutex
	replies map[string]ofrepReply
	reqs    []ofrepRequest
}

// newOFREPServer starts an OFREP server under the base path prefix ("" or "/.../").
func newOFREPServer(t *testing.T, prefix string) *ofrepServer {
	t.Helper()
	s := &ofrepServer{prefix: prefix, replies: map[string]ofrepReply{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *ofrepServer) serve(w http.ResponseWriter, r *http.Request) {
	rec := ofrepRequest{method: r.Method, path: r.URL.EscapedPath(), header: r.Header.Clone()}
	escaped, ok := strings.CutPrefix(r.URL.EscapedPath(), strings.TrimSuffix(s.prefix, "/")+"/ofrep/v1/evaluate/flags/")
	key, err := url.PathUnescape(escaped)
	if !ok || err != nil || strings.Contains(escaped, "/") {
		http.NotFound(w, r) // no OFREP body: not an OFREP path
		return
	}
	rec.key = key
	var body struct {
		Context map[string]any `json:"context"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"key":%q,"errorCode":"PARSE_ERROR","errorDetails":"request body does not decode"}`, key)
		return
	}
	rec.context = body.Context
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	reply, ok := s.replies[key]
	s.mu.Unlock()
	if !ok {
		reply = ofrepReply{http.StatusNotFound, fmt.Sprintf(`{"key":%q,"errorCode":"FLAG_NOT_FOUND","errorDetails":"flag not found"}`, key), ""}
	}
	if reply.retryAfter != "" {
		w.Header().Set("Retry-After", reply.retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.status)
	io.WriteString(w, reply.body)
}

// set makes the server answer key with reply.
func (s *ofrepServer) set(key string, reply ofrepReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies[key] = reply
}

// requests returns the evaluation requests received so far.
func (s *ofrepServer) requests() []ofrepRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ofrepRequest(nil), s.reqs...)
}

// ofrepClient returns an OpenFeature client, of an API of the test's own, whose provider
// is an OFREPProvider for the server with the test headers and cfg's other settings.
func ofrepClient(t *testing.T, s *ofrepServer, cfg OFREPConfig) of.IClient {
	t.Helper()
	cfg.BaseURL = s.URL + s.prefix
	cfg.Headers = ofrepHeaders
	p, err := NewOFREPProvider(cfg)
	if err != nil {
		t.Fatalf("NewOFREPProvider: %v", err)
	}
	return bind(t, p)
}

// evaluation is an evaluation of one type through the SDK, with a default distinct from
// every value the tests serve, so that a fallback to it shows.
type evaluation struct {
	def any
	run func(c of.IClient, key string) (any, of.EvaluationDetails, error)
}

var (
	evalBool = evaluation{false, func(c of.IClient, key string) (any, of.EvaluationDetails, error) {
		d, err := c.BooleanValueDetails(context.Background(), key, false, of.EvaluationContext{})
		return d.Value, d.EvaluationDetails, err
	}}
	evalString = evaluation{"default", func(c of.IClient, key string) (any, of.EvaluationDetails, error) {
		d, err := c.StringValueDetails(context.Background(), key, "default", of.EvaluationContext{})
		return d.Value, d.EvaluationDetails, err
	}}
	evalFloat = evaluation{-1.5, func(c of.IClient, key string) (any, of.EvaluationDetails, error) {
		d, err := c.FloatValueDetails(context.Background(), key, -1.5, of.EvaluationContext{})
		return d.Value, d.EvaluationDetails, err
	}}
	evalInt = evaluation{int64(-1), func(c of.IClient, key string) (any, of.EvaluationDetails, error) {
		d, err := c.IntValueDetails(context.Background(), key, -1, of.EvaluationContext{})
		return d.Value, d.EvaluationDetails, err
	}}
	evalObject = evaluation{"default", func(c of.IClient, key string) (any, of.EvaluationDetails, error) {
		d, err := c.ObjectValueDetails(context.Background(), key, "default", of.EvaluationContext{})
		return d.Value, d.EvaluationDetails, err
	}}
)

func TestOFREPEvaluations(t *testing.T) {
	tests := []struct {
		name    string
		eval    evaluation
		reply   ofrepReply
		want    any
		reason  of.Reason
		variant string
	}{
		{"boolean", evalBool, ofrepValue("true"), true, of.StaticReason, "on"},
		{"boolean false", evalBool, ofrepValue("false"), false, of.StaticReason, "on"},
		{"string", evalString, ofrepValue(`"blue"`), "blue", of.StaticReason, "on"},
		{"float", evalFloat, ofrepValue("2.5"), 2.5, of.StaticReason, "on"},
		{"float from an integer", evalFloat, ofrepValue("3"), 3.0, of.StaticReason, "on"},
		{"int", evalInt, ofrepValue("42"), int64(42), of.StaticReason, "on"},
		{"int beyond 2^53", evalInt, ofrepValue("9007199254740993"), int64(9007199254740993), of.StaticReason, "on"},
		{"int from an integral float", evalInt, ofrepValue("5.0"), int64(5), of.StaticReason, "on"},
		{"int from an exponent", evalInt, ofrepValue("1e3"), int64(1000), of.StaticReason, "on"},
		{"object", evalObject, ofrepValue(`{"tenants":["acme"]}`), map[string]any{"tenants": []any{"acme"}}, of.StaticReason, "on"},
		{"array", evalObject, ofrepValue(`["acme",2]`), []any{"acme", 2.0}, of.StaticReason, "on"},
		{
			"targeting match", evalBool,
			ofrepReply{http.StatusOK, `{"key":"k","value":true,"reason":"TARGETING_MATCH","variant":"beta"}`, ""},
			true, of.TargetingMatchReason, "beta",
		},
		{
			"no value defers to the default", evalInt,
			ofrepReply{http.StatusOK, `{"key":"k","reason":"DEFAULT","variant":"control"}`, ""},
			int64(-1), of.DefaultReason, "control",
		},
		{
			"null value defers to the default", evalBool,
			ofrepReply{http.StatusOK, `{"key":"k","value":null,"reason":"STATIC","variant":"none"}`, ""},
			false, of.StaticReason, "none",
		},
		{
			"disabled takes the default", evalString,
			ofrepReply{http.StatusOK, `{"key":"k","value":"off","reason":"DISABLED","variant":"off"}`, ""},
			"default", of.DisabledReason, "off",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newOFREPServer(t, "")
			s.set("flag", tt.reply)
			got, d, err := tt.eval.run(ofrepClient(t, s, OFREPConfig{}), "flag")
			if err != nil {
				t.Fatalf("evaluation failed: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("value = %#v, want %#v", got, tt.want)
			}
			if d.Reason != tt.reason || d.Variant != tt.variant {
				t.Errorf("reason, variant = %s, %q; want %s, %q", d.Reason, d.Variant, tt.reason, tt.variant)
			}
		})
	}
}

func TestOFREPMetadata(t *testing.T) {
	s := newOFREPServer(t, "")
	s.set("flag", ofrepReply{http.StatusOK, `{"key":"flag","value":true,"metadata":{"owner":"sre","version":3,"live":true}}`, ""})
	_, d, err := evalBool.run(ofrepClient(t, s, OFREPConfig{}), "flag")
	if err != nil {
		t.Fatal(err)
	}
	want := of.FlagMetadata{"owner": "sre", "version": 3.0, "live": true}
	if !reflect.DeepEqual(d.FlagMetadata, want) {
		t.Errorf("metadata = %v, want %v", d.FlagMetadata, want)
	}
}

func TestOFREPTypeMismatch(t *testing.T) {
	tests := []struct {
		name  string
		eval  evaluation
		reply ofrepReply
	}{
		{
			"from the server", evalBool,
			ofrepReply{http.StatusBadRequest, `{"key":"flag","errorCode":"TYPE_MISMATCH","errorDetails":"flag is a string"}`, ""},
		},
		{"string for a boolean", evalBool, ofrepValue(`"true"`)},
		{"number for a boolean", evalBool, ofrepValue("1")},
		{"number for a string", evalString, ofrepValue("7")},
		{"string for a float", evalFloat, ofrepValue(`"2.5"`)},
		{"string for an int", evalInt, ofrepValue(`"5"`)},
		{"fraction for an int", evalInt, ofrepValue("2.5")},
		{"int out of range", evalInt, ofrepValue("1e300")},
		{"boolean for an object", evalObject, ofrepValue("true")},
		{"string for an object", evalObject, ofrepValue(`"acme"`)},
		{"object for a boolean", evalBool, ofrepValue(`{"on":true}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newOFREPServer(t, "")
			s.set("flag", tt.reply)
			got, d, err := tt.eval.run(ofrepClient(t, s, OFREPConfig{}), "flag")
			if err == nil || d.ErrorCode != of.TypeMismatchCode {
				t.Fatalf("error %v, code %q; want %s", err, d.ErrorCode, of.TypeMismatchCode)
			}
			if want := tt.eval.def; !reflect.DeepEqual(got, want) {
				t.Errorf("value = %#v, want the default %#v", got, want)
			}
		})
	}
}

func TestOFREPErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply *ofrepReply // nil: no reply set, the server's 404 FLAG_NOT_FOUND
		code  of.ErrorCode
		msg   string // in the error message
	}{
		{"flag not found", nil, of.FlagNotFoundCode, "flag not found"},
		{"404 without an OFREP body", &ofrepReply{http.StatusNotFound, "404 page not found", ""}, of.GeneralCode, "status 404"},
		{"parse error", &ofrepReply{http.StatusBadRequest, `{"key":"flag","errorCode":"PARSE_ERROR","errorDetails":"bad rule"}`, ""}, of.ParseErrorCode, "bad rule"},
		{"targeting key missing", &ofrepReply{http.StatusBadRequest, `{"key":"flag","errorCode":"TARGETING_KEY_MISSING"}`, ""}, of.TargetingKeyMissingCode, "status 400"},
		{"invalid context", &ofrepReply{http.StatusBadRequest, `{"key":"flag","errorCode":"INVALID_CONTEXT","errorDetails":"region"}`, ""}, of.InvalidContextCode, "region"},
		{"general", &ofrepReply{http.StatusBadRequest, `{"key":"flag","errorCode":"GENERAL","errorDetails":"oops"}`, ""}, of.GeneralCode, "oops"},
		{"unknown code", &ofrepReply{http.StatusBadRequest, `{"key":"flag","errorCode":"FLAG_EXPIRED"}`, ""}, of.GeneralCode, "FLAG_EXPIRED"},
		{"400 without an OFREP body", &ofrepReply{http.StatusBadRequest, "bad request", ""}, of.GeneralCode, "status 400"},
		{"500", &ofrepReply{http.StatusInternalServerError, `{"errorDetails":"store down"}`, ""}, of.GeneralCode, "status 500: store down"},
		{"503 without a body", &ofrepReply{http.StatusServiceUnavailable, "", ""}, of.GeneralCode, "status 503"},
		{
			"500 echoing the credentials",
			&ofrepReply{http.StatusInternalServerError, `{"errorDetails":"bad auth Bearer ` + ofrepToken + `, key ` + ofrepAPIKey + `"}`, ""},
			of.GeneralCode, "status 500",
		},
		{"unauthorized", &ofrepReply{http.StatusUnauthorized, "", ""}, of.GeneralCode, "unauthorized: status 401"},
		{"forbidden", &ofrepReply{http.StatusForbidden, `{"errorDetails":"token ` + ofrepToken + `"}`, ""}, of.GeneralCode, "unauthorized: status 403"},
		{"429 without Retry-After", &ofrepReply{http.StatusTooManyRequests, "", ""}, of.GeneralCode, "rate limited"},
		{"error code in a 200", &ofrepReply{http.StatusOK, `{"key":"flag","errorCode":"FLAG_NOT_FOUND"}`, ""}, of.FlagNotFoundCode, "status 200"},
		{"undecodable evaluation", &ofrepReply{http.StatusOK, `{"value":`, ""}, of.ParseErrorCode, "decoding"},
		{"unexpected status", &ofrepReply{http.StatusTeapot, "", ""}, of.GeneralCode, "status 418"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newOFREPServer(t, "")
			if tt.reply != nil {
				s.set("flag", *tt.reply)
			}
			client := ofrepClient(t, s, OFREPConfig{})
			for _, eval := range []evaluation{evalBool, evalInt, evalObject} {
				got, d, err := eval.run(client, "flag")
				checkOFREPError(t, got, eval.def, d, err, tt.code, tt.msg)
			}
		})
	}
}

func TestOFREPTransportErrors(t *testing.T) {
	t.Run("closed server", func(t *testing.T) {
		s := newOFREPServer(t, "")
		s.set("flag", ofrepValue("true"))
		client := ofrepClient(t, s, OFREPConfig{})
		s.Close()
		got, d, err := evalBool.run(client, "flag")
		checkOFREPError(t, got, false, d, err, of.GeneralCode, "ofrep: Post")
	})
	t.Run("timeout with a client of the caller's", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			failsafe := time.NewTimer(5 * time.Second) // not a wait for a state: a provider without a timeout gets an answer, and fails
			defer failsafe.Stop()
			io.Copy(io.Discard, r.Body) // so that the server sees the client leave
			select {
			case <-r.Context().Done(): // the client gave up
			case <-failsafe.C:
				io.WriteString(w, `{"key":"flag","value":true}`)
			}
		}))
		t.Cleanup(srv.Close)
		p, err := NewOFREPProvider(OFREPConfig{
			BaseURL: srv.URL, Headers: ofrepHeaders, Timeout: 20 * time.Millisecond,
			Client: &http.Client{}, // no timeout of its own
		})
		if err != nil {
			t.Fatal(err)
		}
		got, d, err := evalBool.run(bind(t, p), "flag")
		checkOFREPError(t, got, false, d, err, of.GeneralCode, "deadline exceeded")
	})
}

// checkOFREPError fails the test unless an evaluation returned def with an error of code
// whose message holds msg and none of the credentials.
func checkOFREPError(t *testing.T, got, def any, d of.EvaluationDetails, err error, code of.ErrorCode, msg string) {
	t.Helper()
	if err == nil || d.ErrorCode != code {
		t.Fatalf("error %v, code %q; want %s", err, d.ErrorCode, code)
	}
	if !reflect.DeepEqual(got, def) {
		t.Errorf("value = %#v, want the default %#v", got, def)
	}
	if d.Reason != of.ErrorReason {
		t.Errorf("reason = %s, want %s", d.Reason, of.ErrorReason)
	}
	for _, text := range []string{err.Error(), d.ErrorMessage} {
		if !strings.Contains(text, msg) {
			t.Errorf("message %q, want one with %q", text, msg)
		}
		for _, secret := range []string{ofrepToken, ofrepAPIKey} {
			if strings.Contains(text, secret) {
				t.Errorf("message %q holds a credential", text)
			}
		}
	}
}

func TestOFREPRequest(t *testing.T) {
	s := newOFREPServer(t, "/flags/api/")
	s.set("team/x y", ofrepValue("true"))
	client := ofrepClient(t, s, OFREPConfig{})
	evalCtx := of.NewEvaluationContext("acme", map[string]any{
		"region":  "eu",
		"tier":    3,
		"labels":  []string{"a", "b"},
		"handler": func() {},      // not JSON: left out
		"events":  make(chan int), // not JSON either
		"when":    time.Unix(0, 0).UTC(),
	})
	on, err := client.BooleanValue(context.Background(), "team/x y", false, evalCtx)
	if err != nil || !on {
		t.Fatalf("evaluation = %v, %v; want true", on, err)
	}

	reqs := s.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != "/flags/api/ofrep/v1/evaluate/flags/team%2Fx%20y" || r.key != "team/x y" {
		t.Errorf("request %s %s (key %q), want POST of the key, escaped, under the base path", r.method, r.path, r.key)
	}
	for name, want := range map[string]string{
		"Authorization": "Bearer " + ofrepToken,
		"X-Api-Key":     ofrepAPIKey,
		"Content-Type":  "application/json",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	want := map[string]any{
		"targetingKey": "acme",
		"region":       "eu",
		"tier":         3.0,
		"labels":       []any{"a", "b"},
		"when":         "1970-01-01T00:00:00Z",
	}
	if !reflect.DeepEqual(r.context, want) {
		t.Errorf("context = %v, want %v", r.context, want)
	}
}

func TestOFREPRetryAfter(t *testing.T) {
	start := time.Date(2024, 2, 7, 11, 59, 30, 0, time.UTC)
	tests := []struct {
		name, header string
	}{
		{"seconds", "30"},
		{"HTTP date", start.Add(30 * time.Second).Format(http.TimeFormat)},
		{"RFC 3339", "2024-02-07T12:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(start)
			s := newOFREPServer(t, "")
			s.set("flag", ofrepReply{http.StatusTooManyRequests, "", tt.header})
			client := ofrepClient(t, s, OFREPConfig{Clock: clock})

			got, d, err := evalBool.run(client, "flag")
			checkOFREPError(t, got, false, d, err, of.GeneralCode, "rate limited until 2024-02-07T12:00:00Z")
			s.set("flag", ofrepValue("true")) // the limit is lifted; the provider must wait all the same

			for _, wait := range []time.Duration{0, 29 * time.Second} {
				clock.Advance(wait)
				got, d, err := evalBool.run(client, "flag")
				checkOFREPError(t, got, false, d, err, of.GeneralCode, "rate limited")
				if n := len(s.requests()); n != 1 {
					t.Fatalf("%v after the 429: %d requests, want none but the first", clock.Since(start), n)
				}
			}

			clock.Advance(time.Second)
			if got, _, err := evalBool.run(client, "flag"); err != nil || got != true {
				t.Fatalf("after the Retry-After: %v, %v; want true", got, err)
			}
			if n := len(s.requests()); n != 2 {
				t.Fatalf("after the Retry-After: %d requests, want 2", n)
			}
		})
	}
}

func TestOFREPNoRetryAfterNoBackOff(t *testing.T) {
	s := newOFREPServer(t, "")
	s.set("flag", ofrepReply{http.StatusTooManyRequests, "", "soon"}) // unreadable: no back-off
	client := ofrepClient(t, s, OFREPConfig{Clock: clockwork.NewFakeClock()})
	if _, _, err := evalBool.run(client, "flag"); err == nil {
		t.Fatal("429: no error")
	}
	s.set("flag", ofrepValue("true"))
	if got, _, err := evalBool.run(client, "flag"); err != nil || got != true {
		t.Fatalf("after a 429 without a time: %v, %v; want true at once", got, err)
	}
}

// TestOFREPSource reads afloat's document from an OFREP flag system: a kill switch flipped
// there shows in the Source after a refresh.
func TestOFREPSource(t *testing.T) {
	s := newOFREPServer(t, "")
	s.set("afloat.triage.kill", ofrepValue("false"))
	s.set("afloat.triage.blocklist", ofrepValue(`{"tenants":["globex"]}`))
	s.set("afloat.triage.rollout_pct", ofrepValue("100"))
	// afloat.kill and summarize's flags are unknown to the server: absent, so the fallback.
	fallback := &flags.Document{Tasks: map[string]flags.TaskFlags{"summarize": {Kill: true}}}
	client := ofrepClient(t, s, OFREPConfig{})
	h := start(t, hearing{IClient: client}, []string{"triage", "summarize"}, SourceConfig{Fallback: fallback})

	if err := h.src.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}
	d := h.doc(t)
	if d.Kill || !d.Allow("triage", "acme") || d.Allow("triage", "globex") || d.Allow("summarize", "acme") {
		t.Fatalf("before the flip: %+v, want triage on but for globex, summarize killed", d)
	}

	s.set("afloat.triage.kill", ofrepValue("true"))
	h.clock.Advance(time.Second)
	r := h.waitFor(t, "the kill", func(d *flags.Document) bool { return d.Tasks["triage"].Kill })
	if r.Err != nil {
		t.Errorf("refresh Err = %v", r.Err)
	}
	if h.doc(t).Allow("triage", "acme") {
		t.Error("after the flip: triage on for acme")
	}
	if n := len(s.requests()); n != 2*7 {
		t.Errorf("%d requests, want 7 a refresh for 2 refreshes", n)
	}
}

func TestNewOFREPProvider(t *testing.T) {
	valid := []string{"http://flagd:8016", "https://flags.example.com/base/", "http://127.0.0.1:8016/"}
	for _, u := range valid {
		p, err := NewOFREPProvider(OFREPConfig{BaseURL: u, Headers: ofrepHeaders})
		if err != nil {
			t.Errorf("NewOFREPProvider(%q): %v", u, err)
			continue
		}
		if p.Metadata().Name != "ofrep" || p.Hooks() != nil {
			t.Errorf("metadata %v, hooks %v; want ofrep, none", p.Metadata(), p.Hooks())
		}
	}

	tests := []struct {
		name string
		cfg  OFREPConfig
	}{
		{"empty", OFREPConfig{}},
		{"no scheme", OFREPConfig{BaseURL: "flagd:8016"}},
		{"no scheme nor port", OFREPConfig{BaseURL: "flagd"}},
		{"not http", OFREPConfig{BaseURL: "grpc://flagd:8013"}},
		{"no host", OFREPConfig{BaseURL: "http:///ofrep"}},
		{"user info", OFREPConfig{BaseURL: "https://user:" + ofrepToken + "@flags.example.com"}},
		{"query", OFREPConfig{BaseURL: "http://flagd:8016/?env=prod"}},
		{"fragment", OFREPConfig{BaseURL: "http://flagd:8016/#x"}},
		{"bad escape", OFREPConfig{BaseURL: "http://flagd:8016/%zz"}},
		{"negative timeout", OFREPConfig{BaseURL: "http://flagd:8016", Timeout: -time.Second}},
		{"header name", OFREPConfig{BaseURL: "http://flagd:8016", Headers: map[string]string{"X Key": ofrepAPIKey}}},
		{"header value", OFREPConfig{BaseURL: "http://flagd:8016", Headers: map[string]string{"Authorization": "Bearer " + ofrepToken + "\r\nX: y"}}},
		{"header twice", OFREPConfig{BaseURL: "http://flagd:8016", Headers: map[string]string{"X-API-Key": ofrepAPIKey, "x-api-key": ofrepAPIKey}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewOFREPProvider(tt.cfg)
			if err == nil {
				t.Fatalf("NewOFREPProvider succeeded: %+v", p)
			}
			for _, secret := range []string{ofrepToken, ofrepAPIKey} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q holds a credential", err)
				}
			}
		})
	}
}
