package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/afloat-dev/afloat/internal/otlptest"
)

// Every credential the gateway of TestServeLogsNoCredential holds.
const (
	leakAdmin     = "adm-LEAKCHECK-admin-5e2b9f1c7d"
	leakOperator  = "op-LEAKCHECK-alice-8a3c6e0f4b"
	leakTenant    = "ck-LEAKCHECK-acme-1f7d3b9e5a"
	leakPrimary   = "sk-LEAKCHECK-primary-6c0e8a2d4f"
	leakBackup    = "sk-LEAKCHECK-backup-3b9f5d1a7e"
	leakHeader    = "hdr-LEAKCHECK-org-9d5b1f3c7a"
	leakOTLPToken = "otlp-LEAKCHECK-token-2e6a0c4f8b"
)

// TestServeLogsNoCredential runs the gateway's flows with every kind of credential
// configured (provider API keys and a provider header, the admin token, an operator's token,
// a tenant's key, the trace exporter's header) and the log at debug level: answers, a
// degraded answer, upstreams that echo the credentials they got in their error bodies, a
// rejected key that opens a breaker, the heuristic, a human review claimed and resolved by
// the operator, chat and a stream, the admin API, and calls with wrong or misplaced
// credentials. Then it stops the gateway and searches all of its output, and every span it
// exported, for each credential.
func TestServeLogsNoCredential(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	secrets := []string{leakAdmin, leakOperator, leakTenant, leakPrimary, leakBackup, leakHeader, leakOTLPToken}
	var g *liveServe
	rcv := otlptest.NewReceiver(t)
	t.Cleanup(func() { // runs after the gateway stopped: its last lines are in
		out := g.logs.String()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("the log holds credential %s:\n%s", s, out)
			}
		}
		for _, sp := range rcv.Spans() {
			for _, s := range secrets {
				if strings.Contains(sp.Span.String(), s) {
					t.Errorf("span %s holds credential %s: %v", sp.Name, s, sp.Span)
				}
			}
		}
		for _, want := range []string{`"level":"DEBUG"`, `"msg":"attempt"`, `"msg":"attempt failed"`, `"msg":"circuit state changed"`,
			`[redacted]`, `"msg":"review resolved"`, `"msg":"stopped"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the log has no %s: the flows did not run as meant\n%s", want, out)
			}
		}
		if len(rcv.Spans()) == 0 {
			t.Error("no span exported")
		}
	})

	// mode: "ok"; "echo" answers 500 quoting the credentials it got; "reject" answers 401
	// quoting them (the key is refused: unusable).
	var primaryMode, backupMode atomic.Value
	primaryMode.Store("ok")
	backupMode.Store("ok")
	echo := func(mode *atomic.Value) func(r *http.Request) (int, string) {
		return func(r *http.Request) (int, string) {
			msg := fmt.Sprintf("bad credentials %q and %q", r.Header.Get("Authorization"), r.Header.Get("X-Org-Token"))
			body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": "invalid_api_key"}})
			switch mode.Load() {
			case "echo":
				return http.StatusInternalServerError, string(body)
			case "reject":
				return http.StatusUnauthorized, string(body)
			}
			return 0, ""
		}
	}
	primary, backup := newHeaderUpstream(t, echo(&primaryMode)), newHeaderUpstream(t, echo(&backupMode))
	task := func(name string) string {
		return fmt.Sprintf(`  %s:
    criticality: %s
    budget: 5s
    input: {subject: {type: string}, message: {type: string}}
    schema: schemas/triage.json
    cascade:
      - {provider: primary, prompt: prompts/triage/primary.v1.tmpl}
      - {provider: backup, prompt: prompts/triage/backup.v1.tmpl}
`, name, map[string]string{"triage": "enrichment", "gate": "critical"}[name])
	}
	yaml := fmt.Sprintf(`server:
  admin_token: %s
  log_level: debug
tenants:
  acme: {keys: [%s]}
operators:
  alice: {token: %s}
telemetry:
  otlp: {endpoint: %q, headers: {Authorization: "Bearer %s"}}
defaults:
  breaker: {recovery: 5m}
providers:
  primary: {type: openai, base_url: %q, model: mock-primary, api_key: %s, headers: {X-Org-Token: %s}}
  backup: {type: openai, base_url: %q, model: mock-backup, api_key: %s}
tasks:
%s%s    heuristic:
      - {default: {is_urgent: 0.2, urgency_score: 0.5, department: null}}
routes:
  support: {criticality: assistance, cascade: [primary, backup]}
`, leakAdmin, leakTenant, leakOperator, rcv.URL(), leakOTLPToken, primary.URL+"/v1", leakPrimary, leakHeader,
		backup.URL+"/v1", leakBackup, task("gate"), task("triage"))
	g = startServe(t, yaml, "primary", "backup")

	call := func(method, path, token, body string, want int) []byte {
		t.Helper()
		status, b, err := g.do(method, path, token, body)
		if err != nil || status != want {
			t.Fatalf("%s %s: %d %s (%v), want %d", method, path, status, b, err, want)
		}
		return b
	}
	call("POST", "/v1/tasks/triage", leakTenant, triageBody, 200)
	primaryMode.Store("echo")
	call("POST", "/v1/tasks/triage", leakTenant, triageBody, 200) // degraded: the backup answers
	primaryMode.Store("reject")
	call("POST", "/v1/tasks/triage", leakTenant, triageBody, 200) // unusable: the breaker opens
	call("POST", "/v1/chat/completions", leakTenant, `{"model":"support","messages":[{"role":"user","content":"hi"}]}`, 200)
	call("POST", "/v1/chat/completions", leakTenant, `{"model":"support","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200)
	backupMode.Store("echo")
	call("POST", "/v1/tasks/triage", leakTenant, triageBody, 200) // the heuristic
	b := call("POST", "/v1/tasks/gate", leakTenant, triageBody, 202)
	var queued struct {
		ReviewID string `json:"review_id"`
	}
	if err := json.Unmarshal(b, &queued); err != nil || queued.ReviewID == "" {
		t.Fatalf("queued %s: %v", b, err)
	}
	call("GET", "/admin/reviews?status=pending", leakOperator, "", 200)
	call("POST", "/admin/reviews/"+queued.ReviewID+"/claim", leakOperator, "", 200)
	call("POST", "/admin/reviews/"+queued.ReviewID+"/resolve", leakOperator, `{"result": `+validTriage+`}`, 200)
	call("GET", "/v1/reviews/"+queued.ReviewID, leakTenant, "", 200)
	call("GET", "/admin/status", leakAdmin, "", 200)
	call("PATCH", "/admin/flags", leakAdmin, `{"tasks": {"triage": {"kill": true}}}`, 200)
	call("PUT", "/admin/faults/backup", leakAdmin, `{"mode": "unavailable"}`, 200)
	call("DELETE", "/admin/faults/backup", leakAdmin, "", 200)
	call("PUT", "/admin/breakers/primary", leakAdmin, `{"state": "closed"}`, 200)
	// Credentials where they do not belong, and wrong ones.
	call("GET", "/admin/status", leakTenant, "", 401)
	call("GET", "/admin/status", leakOperator, "", 403)
	call("POST", "/v1/tasks/triage", leakAdmin, triageBody, 401)
	call("POST", "/v1/tasks/triage", leakTenant+"x", triageBody, 401)
	call("POST", "/admin/reviews/"+queued.ReviewID+"/claim", leakTenant, "", 401)
}
