package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/internal/otlptest"
)

// headerUpstream is an OpenAI-compatible chat server that records the headers of each call
// and answers by fail: a status and an error body (which may echo the caller's credentials,
// as some servers do), or 0 for a valid triage answer.
type headerUpstream struct {
	*httptest.Server
	fail func(r *http.Request) (int, string)

	mu      sync.Mutex
	headers []http.Header
}

func newHeaderUpstream(t *testing.T, fail func(r *http.Request) (int, string)) *headerUpstream {
	t.Helper()
	u := &headerUpstream{fail: fail}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *headerUpstream) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	u.headers = append(u.headers, r.Header.Clone())
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if status, body := u.fail(r); status != 0 {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return
	}
	content, _ := json.Marshal(validTriage)
	fmt.Fprintf(w, `{"id":"chatcmpl-h","object":"chat.completion","created":1,"model":"mock-2026","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}`, content)
}

func (u *headerUpstream) seen() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.headers...)
}

func never(*http.Request) (int, string) { return 0, "" }

func always500(*http.Request) (int, string) {
	return http.StatusInternalServerError, `{"error":{"message":"mock failure","type":"server_error"}}`
}

// post sends a JSON POST with extra headers (name, value pairs) and returns the response and
// its body.
func (g *liveServe) post(path, body string, hdr ...string) (*http.Response, []byte) {
	g.t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := g.client.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// logLines returns the gateway's JSON log lines, decoded; a line that is not JSON fails.
func (g *liveServe) logLines() []map[string]any {
	g.t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(g.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			g.t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

const triageBody = `{"input": {"subject": "Сайт не работает", "message": "Ошибка 502 при входе"}}`

// TestServeTracesOverOTLP: `afloat serve` with telemetry.otlp exports each call's spans to a
// collector over OTLP/HTTP. A call that carried a traceparent continues the caller's trace:
// the call span's parent is the caller's span; the attempts (the primary's failure, the
// backup's answer) are its children, with their GenAI attributes; and each upstream got a
// traceparent of the same trace whose parent is its attempt's span. The request id given is
// the response's X-Request-Id, the envelope's request_id and on the log lines, with the
// trace id.
func TestServeTracesOverOTLP(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20") // ms: export at once rather than every 5s
	rcv := otlptest.NewReceiver(t)
	primary, backup := newHeaderUpstream(t, always500), newHeaderUpstream(t, never)
	yaml := triageConfig("5s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL}, nil) +
		fmt.Sprintf("telemetry:\n  otlp: {endpoint: %q, protocol: http}\n", rcv.URL())
	g := startServe(t, yaml, "primary", "backup")

	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	resp, body := g.post("/v1/tasks/triage", triageBody,
		"Traceparent", "00-"+traceID+"-"+parentID+"-01", "X-Request-Id", "e2e-trace-1")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var env struct {
		Provider  string `json:"provider"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Provider != "backup" || env.RequestID != "e2e-trace-1" {
		t.Fatalf("envelope %s: want the backup's answer with request_id e2e-trace-1", body)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "e2e-trace-1" {
		t.Errorf("X-Request-Id %q, want e2e-trace-1", got)
	}

	// Upstream: a traceparent of the caller's trace, from afloat's attempt span (one per
	// call: the primary's failure may be retried).
	upstreamParents := map[string][]string{}
	for name, u := range map[string]*headerUpstream{"primary": primary, "backup": backup} {
		hs := u.seen()
		if len(hs) == 0 {
			t.Fatalf("%s was not called", name)
		}
		for _, h := range hs {
			m := traceparentRE.FindStringSubmatch(h.Get("Traceparent"))
			if m == nil || m[1] != traceID || m[2] == parentID {
				t.Fatalf("%s got traceparent %q, want trace %s under afloat's own span", name, h.Get("Traceparent"), traceID)
			}
			upstreamParents[name] = append(upstreamParents[name], m[2])
		}
	}

	// Collector: the call span and its attempts (one per upstream call), in the caller's
	// trace.
	attempts := map[string][]otlptest.Span{}
	var call otlptest.Span
	deadline := time.After(10 * time.Second)
	for {
		attempts, call = map[string][]otlptest.Span{}, otlptest.Span{}
		for _, s := range rcv.Spans() {
			switch name, _ := strings.CutPrefix(s.Name, "afloat.attempt "); {
			case s.TraceID() != traceID:
			case s.Name == "afloat.task triage":
				call = s
			case name != s.Name:
				attempts[name] = append(attempts[name], s)
			}
		}
		if call.Span != nil && len(attempts["primary"]) == len(upstreamParents["primary"]) && len(attempts["backup"]) == 1 {
			break
		}
		select {
		case <-rcv.Arrived():
		case <-deadline:
			t.Fatalf("spans received %v (rejected %v): want the call's and one per upstream call", rcv.Spans(), rcv.Rejected())
		}
	}
	if call.ParentID() != parentID || call.Service != "afloat" {
		t.Errorf("call span parent %s, service %q: want the caller's span %s, afloat", call.ParentID(), call.Service, parentID)
	}
	for k, v := range map[string]string{"afloat.task": "triage", "afloat.source": "model", "afloat.degraded": "true",
		"afloat.reason": "unavailable", "afloat.provider": "backup", "afloat.tier": "1", "afloat.prompt.version": "triage/backup/v1"} {
		if got, _ := call.Attr(k); got != v {
			t.Errorf("call span %s = %q, want %q", k, got, v)
		}
	}
	for name, as := range attempts {
		for i, a := range as {
			if a.ParentID() != call.SpanID() {
				t.Errorf("%s attempt's parent %s, want the call span %s", name, a.ParentID(), call.SpanID())
			}
			if !slices.Contains(upstreamParents[name], a.SpanID()) {
				t.Errorf("%s attempt span %s: no upstream call of it names it as parent (%v)", name, a.SpanID(), upstreamParents[name])
			}
			outcome := map[string]string{"primary": "unavailable", "backup": "ok"}[name]
			for k, v := range map[string]string{"gen_ai.system": "openai", "gen_ai.operation.name": "chat",
				"gen_ai.request.model": "mock-" + name, "afloat.outcome": outcome, "afloat.breaker.state": "closed"} {
				if got, _ := a.Attr(k); got != v {
					t.Errorf("%s attempt %d: %s = %q, want %q", name, i, k, got, v)
				}
			}
		}
	}
	b := attempts["backup"][0]
	for k, v := range map[string]string{"gen_ai.response.model": "mock-2026", "gen_ai.usage.input_tokens": "40", "gen_ai.usage.output_tokens": "12"} {
		if got, _ := b.Attr(k); got != v {
			t.Errorf("backup attempt %s = %q, want %q", k, got, v)
		}
	}

	// Log lines of the request: its id and the caller's trace.
	var access bool
	for _, l := range g.logLines() {
		if l["request_id"] != "e2e-trace-1" {
			continue
		}
		if l["trace_id"] != traceID && l["msg"] != "request" {
			t.Errorf("line %v: trace_id %v, want %s", l, l["trace_id"], traceID)
		}
		if l["msg"] == "request" {
			access = true
			if l["task"] != "triage" || l["provider"] != "backup" || l["degraded"] != true || l["reason"] != "unavailable" || l["source"] != "model" {
				t.Errorf("access line %v: want the call's task, provider, degraded, reason, source", l)
			}
		}
	}
	if !access {
		t.Errorf("no access line with the request id in\n%s", g.logs.String())
	}
}

// TestServeRequestIDGenerated: without X-Request-Id the gateway makes one, returns it and
// writes it in the envelope and on the request's log lines; logs are JSON when stderr is no
// terminal.
func TestServeRequestIDGenerated(t *testing.T) {
	up := newHeaderUpstream(t, never)
	g := startServe(t, triageConfig("5s", []string{"primary"}, map[string]string{"primary": up.URL}, nil), "primary")
	resp, body := g.post("/v1/tasks/triage", triageBody)
	id := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 200 || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("%d, X-Request-Id %q: want 200 and a generated id", resp.StatusCode, id)
	}
	var env struct {
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.RequestID != id {
		t.Fatalf("envelope %s: want request_id %s", body, id)
	}
	if tp := up.seen()[0].Get("Traceparent"); tp != "" {
		t.Errorf("upstream got traceparent %q with tracing off and none sent", tp)
	}
	for _, l := range g.logLines() { // fails on a line that is not JSON
		if l["msg"] == "request" && l["request_id"] == id && l["task"] == "triage" {
			return
		}
	}
	t.Errorf("no access line with request id %s in\n%s", id, g.logs.String())
}
