package gateway

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// logLines returns the gateway's log lines, decoded.
func logLines(t *testing.T, e *env) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestIDRoundTrip: a task call's request id, given or generated, is the response's
// X-Request-Id, the envelope's request_id, and on every log line of the request: the access
// line (with the call's task, source, degraded, reason, provider and latency), the attempts
// at debug and the failed attempts of a degraded answer.
func TestRequestIDRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, sent string
		keep       bool
	}{
		{"not ascii", "client-req 42/α", false},
		{"given", "client-req-42 (retry 1)", true},
		{"generated", "", false},
		{"too long", strings.Repeat("x", 129), false},
		{"control character", "abc\tdef", false}, // a tab: net/http passes it, the check does not
		{"longest kept", strings.Repeat("y", 128), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.primary.set("fail") // a degraded answer: more lines to carry the id
			var hdr []string
			if tc.sent != "" {
				hdr = []string{RequestIDHeader, tc.sent}
			}
			status, h, body := e.do("POST", "/v1/tasks/triage", clientKey, ticketBody, hdr...)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			id := h.Get(RequestIDHeader)
			switch {
			case tc.keep && id != tc.sent:
				t.Fatalf("X-Request-Id %q, want the caller's %q", id, tc.sent)
			case !tc.keep && !generatedID.MatchString(id):
				t.Fatalf("X-Request-Id %q, want a generated one (32 hex digits)", id)
			}
			var env struct {
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(body, &env); err != nil || env.RequestID != id {
				t.Fatalf("envelope %s: request_id %q, want %q", body, env.RequestID, id)
			}
			msgs := map[string]int{}
			for _, l := range logLines(t, e) {
				if l["request_id"] != id {
					continue
				}
				msgs[l["msg"].(string)]++
				if l["msg"] == "request" {
					for k, want := range map[string]any{"task": "triage", "source": "model", "degraded": true,
						"reason": "unavailable", "provider": "backup", "status": float64(200)} {
						if l[k] != want {
							t.Errorf("access line %v: %s = %v, want %v", l, k, l[k], want)
						}
					}
					if _, ok := l["latency_ms"]; !ok {
						t.Errorf("access line %v has no latency_ms", l)
					}
				}
			}
			if msgs["request"] != 1 || msgs["attempt"] != 2 || msgs["attempt failed"] != 1 {
				t.Errorf("lines with the request id by message %v, want the access line, two attempts, one failed attempt\n%s", msgs, e.logs.String())
			}
		})
	}
}

// TestRequestIDOnEveryResponse: chat answers, errors and admin calls carry the header too,
// and two requests never share a generated id.
func TestRequestIDOnEveryResponse(t *testing.T) {
	e := newEnv(t)
	seen := map[string]bool{}
	for _, c := range []struct{ method, path, token, body string }{
		{"POST", "/v1/chat/completions", clientKey, `{"model":"support-agent","messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/chat/completions", clientKey, `{"model":"support-agent","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/tasks/triage", "", ticketBody},
		{"GET", "/v1/no-such-endpoint", clientKey, ""},
		{"GET", "/admin/status", adminToken, ""},
	} {
		_, h, _ := e.do(c.method, c.path, c.token, c.body)
		id := h.Get(RequestIDHeader)
		if !generatedID.MatchString(id) || seen[id] {
			t.Errorf("%s %s: X-Request-Id %q, want a fresh generated one", c.method, c.path, id)
		}
		seen[id] = true
	}
	_, h, _ := e.do("POST", "/v1/chat/completions", clientKey, `{"model":"support-agent","messages":[{"role":"user","content":"hi"}]}`,
		RequestIDHeader, "chat-7")
	if got := h.Get(RequestIDHeader); got != "chat-7" {
		t.Errorf("chat X-Request-Id %q, want the caller's", got)
	}
	for _, l := range logLines(t, e) {
		if l["msg"] == "request" && l["path"] == "/v1/chat/completions" && l["request_id"] == "chat-7" {
			if l["task"] != "support-agent" || l["source"] != "model" || l["provider"] != "primary" {
				t.Errorf("chat access line %v: want the route's call", l)
			}
			return
		}
	}
	t.Errorf("no access line of the chat call with its request id in\n%s", e.logs.String())
}
