package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestServeReviewWebhook: a live `afloat serve` with review.webhook. A critical task's call
// queues an item (202 with its SLA); an operator resolves it through the admin API; the
// answer reaches the caller's URL at once, signed with the secret (checked here with an HMAC
// of our own), without the input; GET /v1/reviews/{id} and /admin/reviews then show the
// delivery delivered, and afloat_review_sla_breaches_total{task} is exported.
func TestServeReviewWebhook(t *testing.T) {
	const (
		secret = "whsec-serve-8c1e4b7a2f9d3065"
		key    = "ck-acme-webhook-5e2d9b1f"
	)
	type post struct {
		header http.Header
		body   []byte
	}
	posts := make(chan post, 8)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		posts <- post{r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	g := startServe(t, fmt.Sprintf(`
server:
  admin_token: %s
tenants:
  acme: {keys: [%s]}
defaults: {retry: {max: 0}}
providers:
  down: {type: sim, error_rate: 1}
tasks:
  moderation:
    criticality: critical
    review_sla: 30m
    input: {subject: {type: string}, message: {type: string}}
    schema: schemas/triage.json
    cascade: [{provider: down, prompt: prompts/triage/down.v1.tmpl}]
review:
  webhook: {url: "%s/hooks/afloat?token=rcv-token", secret: %s}
`, scenarioAdmin, key, rcv.URL, secret), "down")

	queue := func() string {
		t.Helper()
		code, b, err := g.do("POST", "/v1/tasks/moderation", key, `{"input": {"subject": "Refund", "message": "you are all idiots"}}`)
		var env struct {
			ReviewID   string     `json:"review_id"`
			ExpectedBy *time.Time `json:"expected_by"`
		}
		if err != nil || code != http.StatusAccepted || json.Unmarshal(b, &env) != nil || env.ReviewID == "" || env.ExpectedBy == nil {
			t.Fatalf("moderation call: %d %s %v; want 202 with review_id and expected_by", code, b, err)
		}
		return env.ReviewID
	}
	next := func() post {
		t.Helper()
		select {
		case p := <-posts:
			return p
		case <-time.After(20 * time.Second):
			t.Fatalf("no webhook POST within 20s; stderr:\n%s", g.logs.String())
		}
		return post{}
	}

	id := queue()
	if code, b, err := g.do("POST", "/admin/reviews/"+id+"/resolve", scenarioAdmin, `{"result": `+validTriage+`}`); err != nil || code != http.StatusOK {
		t.Fatalf("resolve: %d %s %v", code, b, err)
	}
	p := next()
	ts, mac, _ := strings.Cut(p.header.Get("X-Afloat-Signature"), ",")
	ts, mac = strings.TrimPrefix(ts, "t="), strings.TrimPrefix(mac, "v1=")
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts + "." + string(p.body)))
	if want := hex.EncodeToString(h.Sum(nil)); !hmac.Equal([]byte(mac), []byte(want)) {
		t.Fatalf("signature %q does not verify over %s", p.header.Get("X-Afloat-Signature"), p.body)
	}
	var body struct {
		ID, Task, Tenant, Status, Operator string
		Result                             map[string]any
		DeliveryAttempt                    int `json:"delivery_attempt"`
	}
	if err := json.Unmarshal(p.body, &body); err != nil || body.ID != id || body.Task != "moderation" || body.Tenant != "acme" ||
		body.Status != "resolved" || body.Operator != "admin" || body.Result["department"] != "technical" || body.DeliveryAttempt != 1 ||
		strings.Contains(string(p.body), "idiots") || p.header.Get("X-Afloat-Delivery") != id {
		t.Fatalf("webhook body %s (%v)", p.body, err)
	}

	// The sender makes one delivery at a time: once the next answer's arrives, the first
	// one's outcome is recorded.
	other := queue()
	if code, b, err := g.do("POST", "/admin/reviews/"+other+"/reject", scenarioAdmin, `{"reason": "spam"}`); err != nil || code != http.StatusOK {
		t.Fatalf("reject: %d %s %v", code, b, err)
	}
	if p := next(); !strings.Contains(string(p.body), `"status":"rejected"`) || !strings.Contains(string(p.body), `"reason":"spam"`) {
		t.Fatalf("rejected body %s", p.body)
	}
	code, b, err := g.do("GET", "/v1/reviews/"+id, key, "")
	var view struct {
		Status   string `json:"status"`
		Delivery *struct {
			State      string  `json:"state"`
			Attempts   int     `json:"attempts"`
			LastStatus int     `json:"last_status"`
			NextAt     *string `json:"next_at"`
		} `json:"delivery"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &view) != nil || view.Status != "resolved" || view.Delivery == nil ||
		view.Delivery.State != "delivered" || view.Delivery.Attempts != 1 || view.Delivery.LastStatus != 204 || view.Delivery.NextAt != nil {
		t.Fatalf("GET /v1/reviews/%s: %d %s %v; want the delivery delivered", id, code, b, err)
	}
	code, b, err = g.do("GET", "/admin/reviews?status=resolved", scenarioAdmin, "")
	if err != nil || code != http.StatusOK || !strings.Contains(string(b), `"overdue":false,"delivery":{"state":"delivered","attempts":1,`) {
		t.Fatalf("GET /admin/reviews: %d %s %v", code, b, err)
	}
	if got := g.metric("afloat_review_sla_breaches_total", map[string]string{"task": "moderation"}); got != 0 {
		t.Errorf("afloat_review_sla_breaches_total %v, want 0 (within the SLA)", got)
	}
	if logs := g.logs.String(); strings.Contains(logs, "rcv-token") || strings.Contains(logs, secret) {
		t.Errorf("the webhook's url or secret reached the log:\n%s", logs)
	}
}
