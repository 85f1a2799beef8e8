package config

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/review"
)

// TestReviewWebhookSettings: review.webhook takes an http(s) url and a secret of at least
// MinTokenLen bytes, each requiring the other; the secret is a credential, distinct from the
// others. The errors never quote the secret.
func TestReviewWebhookSettings(t *testing.T) {
	const ok = "whsec-5e1b9c3f7a2d8e46"
	tests := []struct {
		name, review, path, msg string
	}{
		{"ftp url", `{url: "ftp://hooks.example/review", secret: ` + ok + `}`, "review.webhook.url", "invalid url"},
		{"relative url", `{url: "/review", secret: ` + ok + `}`, "review.webhook.url", "invalid url"},
		{"no secret", `{url: "https://hooks.example/review"}`, "review.webhook.secret", "required with review.webhook.url"},
		{"no url", `{secret: ` + ok + `}`, "review.webhook.url", "required when review.webhook.secret is set"},
		{"short secret", `{url: "https://hooks.example/review", secret: s3cret}`, "review.webhook.secret", "too short: 6 bytes, want at least 16"},
		{"the admin token", `{url: "https://hooks.example/review", secret: adm-0123456789abcdef}`, "review.webhook.secret", "is also the admin token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := "server: {admin_token: adm-0123456789abcdef}\nreview:\n  webhook: " + tc.review + "\n" + minimal
			_, err := Parse([]byte(text), "/cfg", noEnv)
			if err == nil {
				t.Fatal("parsed without error")
			}
			if e := findError(asErrors(t, err), tc.path, tc.msg); e == nil {
				t.Fatalf("no error at %s saying %q; got:\n%v", tc.path, tc.msg, err)
			}
			for _, secret := range []string{ok, "s3cret"} {
				if strings.Contains(tc.review, secret) && strings.Contains(err.Error(), secret) {
					t.Errorf("the error quotes the secret: %v", err)
				}
			}
		})
	}
	f := mustParse(t, "review:\n  webhook: {url: \"http://127.0.0.1:9/review?token=t\", secret: "+ok+"}\n"+minimal)
	if got := fmt.Sprintf("%v %+v", f.Review.Webhook, f.Review.Webhook); strings.Contains(got, ok) {
		t.Errorf("the secret prints: %s", got)
	}
}

// moderationTask is a human task of the tests below, over minimal's providers and files.
const moderationTask = `  moderation:
    criticality: critical
    on_exhausted: human
    review_sla: 10m
    schema: triage.json
    cascade:
      - {provider: primary, prompt: prompts/primary.v1.tmpl}
`

// TestBuildStartsTheReviewWebhook: with review.webhook, Build opens the store with the
// outbox and starts the sender: an answer reaches the URL, signed with the secret, and is
// recorded delivered; Close stops it.
func TestBuildStartsTheReviewWebhook(t *testing.T) {
	const secret = "whsec-5e1b9c3f7a2d8e46"
	got := make(chan *http.Request, 8)
	bodies := make(chan []byte, 8)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer rcv.Close()
	config := "review:\n  webhook: {url: \"" + rcv.URL + "/review\", secret: " + secret + "}\n" + minimal + moderationTask

	rt := buildTree(t, config, clockwork.NewRealClock())
	if rt.Webhook == nil {
		t.Fatal("no webhook sender")
	}
	ctx := context.Background()
	answer := func(text string) string {
		id, err := rt.Review.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: json.RawMessage(`{"text":"` + text + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		it, err := rt.Review.Resolve(ctx, id, "alice", json.RawMessage(`{"department":"technical","is_urgent":0.9,"urgency_score":2}`))
		if err != nil || it.Delivery.State != review.DeliveryPending {
			t.Fatalf("resolve: %+v, %v; want a pending delivery", it, err)
		}
		rt.Webhook.Wake()
		return id
	}
	next := func() (*http.Request, []byte) {
		t.Helper()
		select {
		case r := <-got:
			return r, <-bodies
		case <-time.After(10 * time.Second):
			t.Fatal("no webhook POST within 10s")
		}
		return nil, nil
	}
	first := answer("a")
	r, body := next()
	sig := r.Header.Get(alerts.SignatureHeader)
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	var unix int64
	fmt.Sscan(ts, &unix)
	if want := alerts.Sign(secret, time.Unix(unix, 0), body); sig != want || r.URL.Path != "/review" {
		t.Fatalf("POST %s signed %q, want %q", r.URL.Path, sig, want)
	}
	var p struct{ ID, Status string }
	if err := json.Unmarshal(body, &p); err != nil || p.ID != first || p.Status != "resolved" {
		t.Fatalf("body %s", body)
	}
	// The sender makes one delivery at a time: once the second arrives, the first is recorded.
	answer("b")
	next()
	if it, err := rt.Review.Lookup(ctx, first); err != nil || it.Delivery.State != review.DeliveryDelivered || it.Delivery.Attempts != 1 {
		t.Fatalf("first delivery %+v, %v; want delivered", it.Delivery, err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	rt.Webhook.Wake() // after Close: does nothing, and does not block
}

// TestBuildCountsSLABreaches: afloat_review_sla_breaches_total{task} is exported at 0 for
// each task, and counts, when scraped, each item of a human task that outlived its
// review_sla: once, however often it is scraped.
func TestBuildCountsSLABreaches(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	rt := buildTree(t, minimal+moderationTask, clk)
	scrape := func() map[string]float64 {
		t.Helper()
		fams, err := rt.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range fams {
			if f.GetName() != "afloat_review_sla_breaches_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
		return out
	}
	if got := scrape(); len(got) != 2 || got["moderation"] != 0 || got["triage"] != 0 {
		t.Fatalf("at start: %v, want moderation and triage at 0", got)
	}
	ctx := context.Background()
	late, err := rt.Review.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	inTime, err := rt.Review.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(9 * time.Minute)
	if _, err := rt.Review.Reject(ctx, inTime, "alice", "spam"); err != nil {
		t.Fatal(err)
	}
	if got := scrape()["moderation"]; got != 0 {
		t.Fatalf("within the SLA: %v, want 0", got)
	}
	clk.Advance(time.Minute + time.Second)
	for range 3 {
		if got := scrape()["moderation"]; got != 1 {
			t.Fatalf("past the SLA: %v, want 1 (%s)", got, late)
		}
	}
}
