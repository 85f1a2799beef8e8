package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/flags"
)

const ticketBody = `{"input": {"message": "Сайт не работает"}}`

func TestTaskHappyPath(t *testing.T) {
	e := newEnv(t)
	status, hdr, body := e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d %s", status, body)
	}
	res := decode[envelope](t, body)
	if res.Source != afloat.SourceModel || res.Degraded || res.Provider != "primary" || res.Tier != 0 || res.PromptVersion != "triage/primary/v2" {
		t.Fatalf("envelope %s", body)
	}
	if string(res.Value) != triageAnswer {
		t.Fatalf("result %s", res.Value)
	}
	raw := decode[map[string]any](t, body)
	for _, k := range []string{"task", "result", "source", "degraded", "reason", "provider", "tier", "prompt_version", "review_id", "attempts", "latency_ms", "usage"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("envelope lacks %q: %s", k, body)
		}
	}
	if u := res.Usage; u.InputTokens != 12 || u.OutputTokens != 7 {
		t.Fatalf("usage %+v", u)
	}
	if got := e.primary.auth[0]; got != "Bearer "+providerKey {
		t.Fatalf("upstream got Authorization %q", got)
	}
}

func TestTaskStatuses(t *testing.T) {
	e := newEnv(t)
	big := `{"input": {"message": "` + strings.Repeat("x", 70<<10) + `"}}`
	tests := []struct {
		name        string
		path, token string
		body        string
		ctype       string
		status      int
		code        string
		contains    string
	}{
		{"no key", "/v1/tasks/triage", "", ticketBody, "", 401, "unauthorized", ""},
		{"wrong key", "/v1/tasks/triage", "ck-nope", ticketBody, "", 401, "unauthorized", ""},
		{"unknown task", "/v1/tasks/nope", clientKey, ticketBody, "", 404, "unknown_task", "nope"},
		{"malformed JSON", "/v1/tasks/triage", clientKey, `{"input": {`, "", 400, "invalid_request", "invalid JSON"},
		{"no input", "/v1/tasks/triage", clientKey, `{"budget_ms": 100}`, "", 400, "invalid_request", "input"},
		{"unknown field", "/v1/tasks/triage", clientKey, `{"input": {"message": "x"}, "budget": 1}`, "", 400, "invalid_request", "budget"},
		{"missing input field", "/v1/tasks/triage", clientKey, `{"input": {"subject": "x"}}`, "", 400, "invalid_input", `"message"`},
		{"ill-typed input field", "/v1/tasks/triage", clientKey, `{"input": {"message": 42}}`, "", 400, "invalid_input", `"message"`},
		{"bad budget", "/v1/tasks/triage", clientKey, `{"input": {"message": "x"}, "budget_ms": -5}`, "", 400, "invalid_request", "budget_ms"},
		{"too large", "/v1/tasks/triage", clientKey, big, "", 413, "body_too_large", ""},
		{"wrong content type", "/v1/tasks/triage", clientKey, ticketBody, "text/plain", 415, "unsupported_media_type", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.ctype != "" {
				hdr = []string{"Content-Type", tt.ctype}
			}
			status, _, body := e.do("POST", tt.path, tt.token, tt.body, hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			var eb struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code != tt.code || !strings.Contains(eb.Error.Message, tt.contains) {
				t.Fatalf("error body %s, want code %q mentioning %q", body, tt.code, tt.contains)
			}
		})
	}
}

func TestCriticalHumanAndReviewStatus(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	e.backup.set("fail")
	status, hdr, body := e.do("POST", "/v1/tasks/moderation", clientKey, `{"input": {"message": "buy cheap pills"}}`)
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %s", status, body)
	}
	res := decode[envelope](t, body)
	if res.Source != afloat.SourceHuman || !res.Degraded || res.ReviewID == "" || res.ReviewSLA.String() != "30m0s" || res.ExpectedBy.IsZero() {
		t.Fatalf("envelope %s", body)
	}
	raw := decode[map[string]any](t, body)
	if raw["result"] != nil || raw["status_url"] != "/v1/reviews/"+res.ReviewID || hdr.Get("Location") != "/v1/reviews/"+res.ReviewID {
		t.Fatalf("202 envelope %s, Location %q", body, hdr.Get("Location"))
	}
	status, _, body = e.do("GET", "/v1/reviews/"+res.ReviewID, clientKey, "")
	view := decode[map[string]any](t, body)
	if status != 200 || view["id"] != res.ReviewID || view["task"] != "moderation" || view["status"] != "pending" || view["result"] != nil {
		t.Fatalf("review status %d %s", status, body)
	}
	if status, _, _ := e.do("GET", "/v1/reviews/"+res.ReviewID, otherKey, ""); status != 404 {
		t.Fatalf("another tenant got %d for the review", status)
	}
	if status, _, _ := e.do("GET", "/v1/reviews/rv_nope", clientKey, ""); status != 404 {
		t.Fatalf("unknown review got %d", status)
	}
}

func TestCriticalBlockIs503(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	e.backup.set("fail")
	status, hdr, body := e.do("POST", "/v1/tasks/gate", clientKey, `{"input": {"message": "x"}}`)
	if status != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"blocked"`) {
		t.Fatalf("status %d Retry-After %q: %s", status, hdr.Get("Retry-After"), body)
	}
	if strings.Contains(string(body), `"source":"heuristic"`) {
		t.Fatal("a blocked critical task published a default")
	}
}

func TestIdempotencyKeyQueuesOnce(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	e.backup.set("fail")
	body := `{"input": {"message": "report"}}`
	_, _, first := e.do("POST", "/v1/tasks/moderation", clientKey, body, "Idempotency-Key", "k-1")
	status, hdr, second := e.do("POST", "/v1/tasks/moderation", clientKey, body, "Idempotency-Key", "k-1")
	if status != 202 || string(first) != string(second) || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s\nfirst %s", status, second, first)
	}
	if n := e.review.Len(); n != 1 {
		t.Fatalf("%d items queued for one idempotent call", n)
	}
	if status, _, _ := e.do("POST", "/v1/tasks/moderation", clientKey, `{"input": {"message": "other"}}`, "Idempotency-Key", "k-1"); status != 422 {
		t.Fatalf("same key, other body: %d", status)
	}
	// Another tenant's key space is its own.
	if status, _, _ := e.do("POST", "/v1/tasks/moderation", otherKey, body, "Idempotency-Key", "k-1"); status != 202 || e.review.Len() != 2 {
		t.Fatalf("other tenant: %d, %d items", status, e.review.Len())
	}
}

func TestKillSwitchTakesEffectOnTheNextRequest(t *testing.T) {
	e := newEnv(t)
	status, _, body := e.do("PUT", "/admin/flags", adminToken, `{"kill": false, "tasks": {"triage": {"kill": true}}}`)
	if status != 200 {
		t.Fatalf("PUT flags %d %s", status, body)
	}
	doc := decode[map[string]any](t, body)
	tasks := doc["tasks"].(map[string]any)
	if tasks["triage"].(map[string]any)["kill"] != true || tasks["moderation"].(map[string]any)["rollout_pct"] != float64(100) {
		t.Fatalf("flags in force %s", body)
	}
	before := e.primary.calls.Load()
	_, _, body = e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)
	res := decode[envelope](t, body)
	if res.Reason != afloat.ReasonKillSwitch || res.Source != afloat.SourceHeuristic || e.primary.calls.Load() != before {
		t.Fatalf("after the kill: %s", body)
	}
	e.do("PUT", "/admin/flags", adminToken, `{"tasks": {"triage": {"blocklist": ["globex"]}}}`)
	if res := decode[envelope](t, must(e.do("POST", "/v1/tasks/triage", clientKey, ticketBody))); res.Source != afloat.SourceModel {
		t.Fatalf("acme after lifting the kill: %+v", res)
	}
	if res := decode[envelope](t, must(e.do("POST", "/v1/tasks/triage", otherKey, ticketBody))); res.Reason != afloat.ReasonKillSwitch {
		t.Fatalf("blocklisted globex: %+v", res)
	}
	if status, _, body := e.do("PUT", "/admin/flags", adminToken, `{"tasks": {"nope": {"kill": true}}}`); status != 400 || !strings.Contains(string(body), "nope") {
		t.Fatalf("unknown task in flags: %d %s", status, body)
	}
	if status, _, _ := e.do("PUT", "/admin/flags", adminToken, `{"tasks": {"triage": {"rollout_pct": 140}}}`); status != 400 {
		t.Fatalf("rollout 140: %d", status)
	}
}

func must(_ int, _ http.Header, b []byte) []byte { return b }

func TestFaultInjectionThroughAdminAPI(t *testing.T) {
	e := newEnv(t)
	status, _, body := e.do("PUT", "/admin/faults/primary", adminToken, `{"mode": "unavailable", "status": 503}`)
	if status != 200 {
		t.Fatalf("PUT fault %d %s", status, body)
	}
	before := e.primary.calls.Load()
	res := decode[envelope](t, must(e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)))
	if res.Source != afloat.SourceModel || !res.Degraded || res.Provider != "backup" || res.Reason != "unavailable" {
		t.Fatalf("under fault: %+v", res)
	}
	if e.primary.calls.Load() != before {
		t.Fatal("an injected fault still called the upstream")
	}
	st := decode[statusDoc](t, must(e.do("GET", "/admin/status", adminToken, "")))
	if f := st.Providers["primary"].Fault; f == nil || f.Mode != "unavailable" || f.Status != 503 {
		t.Fatalf("status shows fault %+v", f)
	}
	if status, _, _ := e.do("DELETE", "/admin/faults/primary", adminToken, ""); status != 200 {
		t.Fatalf("DELETE %d", status)
	}
	if res := decode[envelope](t, must(e.do("POST", "/v1/tasks/triage", clientKey, ticketBody))); res.Provider != "primary" || res.Degraded {
		t.Fatalf("after clearing: %+v", res)
	}
	for _, bad := range []string{`{"mode": "explode"}`, `{"mode": "unavailable", "status": 200}`, `{"mode": "slow", "delay": "soon"}`, `{}`} {
		if status, _, body := e.do("PUT", "/admin/faults/primary", adminToken, bad); status != 400 {
			t.Fatalf("fault %s: %d %s", bad, status, body)
		}
	}
	if status, _, _ := e.do("PUT", "/admin/faults/nope", adminToken, `{"mode": "timeout"}`); status != 404 {
		t.Fatalf("unknown provider: %d", status)
	}
}

func TestAdminAPI(t *testing.T) {
	e := newEnv(t)
	if status, _, _ := e.do("GET", "/admin/status", "", ""); status != 401 {
		t.Fatalf("no token: %d", status)
	}
	if status, _, _ := e.do("GET", "/admin/status", clientKey, ""); status != 401 {
		t.Fatalf("client key on admin: %d", status)
	}
	e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)
	status, _, body := e.do("GET", "/admin/status", adminToken, "")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	raw := decode[map[string]any](t, body)
	prov := raw["providers"].(map[string]any)["primary"].(map[string]any)
	if prov["breaker"] != "closed" || prov["fault"] != nil || prov["in_flight"] != float64(0) {
		t.Fatalf("provider status %v", prov)
	}
	if _, ok := prov["tasks"].(map[string]any)["triage"].(map[string]any)["read_timeout_ms"]; !ok {
		t.Fatalf("no read timeout in %v", prov)
	}
	task := raw["tasks"].(map[string]any)["triage"].(map[string]any)
	if ins := task["inputs"].([]any); len(ins) != 1 || ins[0] != "message" {
		t.Fatalf("task inputs %v", task)
	}
	if sb := raw["state_backend"].(map[string]any); sb["kind"] != "local" || sb["healthy"] != true {
		t.Fatalf("state backend %v", sb)
	}

	status, _, body = e.do("PUT", "/admin/breakers/primary", adminToken, `{"state": "open"}`)
	if status != 200 || !strings.Contains(string(body), `"breaker":"open"`) {
		t.Fatalf("force open %d %s", status, body)
	}
	res := decode[envelope](t, must(e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)))
	if res.Reason != "circuit_open" || res.Provider != "backup" {
		t.Fatalf("after forcing open: %+v", res)
	}
	if status, _, _ := e.do("PUT", "/admin/breakers/primary", adminToken, `{"state": "closed"}`); status != 200 {
		t.Fatal("force closed")
	}
	if status, _, _ := e.do("PUT", "/admin/breakers/primary", adminToken, `{"state": "ajar"}`); status != 400 {
		t.Fatal("bad state accepted")
	}
	// "for" holds a forced opening for that long, and the answer says until when.
	status, _, body = e.do("PUT", "/admin/breakers/primary", adminToken, `{"state": "open", "for": "2h"}`)
	var forced struct {
		Breaker string    `json:"breaker"`
		Since   time.Time `json:"since"`
		Until   time.Time `json:"until"`
	}
	if err := json.Unmarshal(body, &forced); status != 200 || err != nil || forced.Breaker != "open" || forced.Until.Sub(forced.Since) != 2*time.Hour {
		t.Fatalf("force open for 2h: %d %s", status, body)
	}
	for _, bad := range []string{`{"state": "open", "for": "0s"}`, `{"state": "open", "for": "9000h"}`, `{"state": "open", "for": "soon"}`, `{"state": "closed", "for": "1h"}`} {
		if status, _, body := e.do("PUT", "/admin/breakers/primary", adminToken, bad); status != 400 {
			t.Errorf("%s: %d %s, want 400", bad, status, body)
		}
	}
	if status, _, _ := e.do("PUT", "/admin/breakers/primary", adminToken, `{"state": "closed"}`); status != 200 {
		t.Fatal("force closed")
	}
	if status, _, _ := e.do("PUT", "/admin/breakers/nope", adminToken, `{"state": "open"}`); status != 404 {
		t.Fatal("unknown provider accepted")
	}

	off := newEnv(t, func(c *Config) { c.AdminToken = "" })
	if status, _, _ := off.do("GET", "/admin/status", adminToken, ""); status != 404 {
		t.Fatalf("admin API without a token: %d, want 404 (off)", status)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, _, _ := e.do("GET", p, "", ""); status != 200 {
			t.Fatalf("%s: %d", p, status)
		}
	}
	_, _, body := e.do("GET", "/metrics", "", "")
	for _, series := range []string{`afloat_attempts_total{outcome="circuit_open",provider="primary",task="triage"} 0`, `afloat_circuit_state{provider="backup"} 0`} {
		if !strings.Contains(string(body), series) {
			t.Fatalf("/metrics lacks %s", series)
		}
	}
	if status, _, body := e.do("GET", "/nope", "", ""); status != 404 || !strings.Contains(string(body), "not_found") {
		t.Fatalf("unknown path: %d %s", status, body)
	}
}

func TestNoCredentialInLogs(t *testing.T) {
	e := newEnv(t)
	e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)
	e.do("POST", "/v1/tasks/triage", "ck-wrong-key-123", ticketBody)
	e.do("GET", "/admin/status", adminToken, "")
	e.do("GET", "/admin/status", "adm-wrong-token", "")
	e.do("PUT", "/admin/faults/primary", adminToken, `{"mode": "unavailable", "status": 401}`)
	e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)
	e.do("POST", "/v1/chat/completions", clientKey, `{"model": "support-agent", "messages": [{"role": "user", "content": "hi"}]}`)
	logs := e.logs.String()
	if !strings.Contains(logs, `"path":"/v1/tasks/triage"`) {
		t.Fatalf("no access log lines: %s", logs)
	}
	for _, secret := range []string{clientKey, adminToken, providerKey, "ck-wrong-key-123", "adm-wrong-token"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a credential reached the log: %s", secret)
		}
	}
}

func TestWrongMethodIs405AndHugeBudgetIs400(t *testing.T) {
	e := newEnv(t)
	status, hdr, body := e.do("GET", "/v1/chat/completions", clientKey, "")
	if status != 405 || hdr.Get("Allow") != "POST" || !strings.Contains(string(body), "method_not_allowed") {
		t.Fatalf("GET chat: %d Allow %q %s", status, hdr.Get("Allow"), body)
	}
	if status, _, _ := e.do("DELETE", "/admin/flags", adminToken, ""); status != 405 {
		t.Fatalf("DELETE flags: %d", status)
	}
	if status, hdr, _ := e.do("GET", "/admin/drills", adminToken, ""); status != 405 || hdr.Get("Allow") != "POST" {
		t.Fatalf("GET drills: %d Allow %q, want 405 POST", status, hdr.Get("Allow"))
	}
	if status, _, body := e.do("POST", "/v1/tasks/triage", clientKey, `{"input": {"message": "x"}, "budget_ms": 9300000000000}`); status != 400 || !strings.Contains(string(body), "budget_ms") {
		t.Fatalf("huge budget: %d %s", status, body)
	}
}

func TestAttemptErrorsStayOutOfTheEnvelope(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	_, _, body := e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)
	res := decode[envelope](t, body)
	if len(res.Attempts) != 2 || res.Attempts[0].Outcome != "unavailable" {
		t.Fatalf("attempts %+v", res.Attempts)
	}
	if strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), `"error"`) {
		t.Fatalf("an upstream's error text reached the client: %s", body)
	}
	if !strings.Contains(e.logs.String(), "attempt failed") {
		t.Fatal("the failed attempt was not logged for operators")
	}
}

func TestPutFlagsKeepsConfiguredRolloutOfOmittedTasks(t *testing.T) {
	pct := 10
	fl := flags.NewMemory()
	_ = fl.Set(context.Background(), &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: &pct}}})
	e := newEnv(t, func(c *Config) { c.Flags = fl })
	_, _, body := e.do("PUT", "/admin/flags", adminToken, `{"kill": true}`)
	_, _, body = e.do("PUT", "/admin/flags", adminToken, `{"kill": false}`)
	doc := decode[flags.Document](t, body)
	if got := doc.Tasks["triage"].Rollout(); got != 10 {
		t.Fatalf("triage rollout %d after two PUTs that omitted it, want the configured 10", got)
	}
}
