package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the console's screenshots to docs/console-*.png")

const consoleOperator = "op-alice-console-7d1e3f9a2b"

// consoleConfig is a gateway over one failing provider: triage (enrichment) answers from its
// heuristic, moderation (critical, the triage schema) queues every call for review.
func consoleConfig(url, webhook string) string {
	return fmt.Sprintf(`review:
  webhook: {url: %q, secret: %s}
server:
  admin_token: %s
operators:
  alice: {token: %s}
defaults:
  breaker: {recovery: 5m}
  retry: {max: 0}
providers:
  p1: {type: openai, base_url: %q, model: mock-p1}
tasks:
  triage:
    criticality: enrichment
    budget: 2s
    input: {subject: {type: string}, message: {type: string}}
    schema: schemas/triage.json
    cascade: [{provider: p1, prompt: prompts/triage/p1.v1.tmpl}]
    heuristic:
      - {default: {is_urgent: 0.2, urgency_score: 0.5, department: null}}
  moderation:
    criticality: critical
    review_sla: 30m
    budget: 2s
    input: {subject: {type: string}, message: {type: string}}
    schema: schemas/triage.json
    cascade: [{provider: p1, prompt: prompts/triage/p1.v1.tmpl}]
`, webhook, consoleWebhookSecret, scenarioAdmin, consoleOperator, url+"/v1")
}

const consoleWebhookSecret = "whsec-console-4f1a9c2e7b3d"

// TestConsoleBrowser drives the operator console in Debian's chromium: the admin signs in,
// injects a fault and forces a breaker open, kills a task (and the next call answers
// kill_switch); an operator sees the queue change live, has a schema-breaking answer refused
// at its field, resolves the item, and the caller's GET /v1/reviews/{id} shows the answer,
// which the caller's webhook receives, signed.
func TestConsoleBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (apt-get install chromium): the console's browser test cannot run")
		}
		t.Skip("chromium is not installed (apt-get install chromium): skipping the console's browser test")
	}
	mock := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{status: http.StatusInternalServerError} })
	hooks := make(chan [2]string, 8) // signature, body
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- [2]string{r.Header.Get("X-Afloat-Signature"), string(b)}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	g := startServe(t, consoleConfig(mock.URL, rcv.URL+"/hooks"), "p1")
	task := func(name, msg string) map[string]any {
		t.Helper()
		_, body, err := g.do("POST", "/v1/tasks/"+name, "", fmt.Sprintf(`{"input": {"subject": "s", "message": %q}}`, msg))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %s", name, body)
		}
		return v
	}
	first := task("moderation", "the printer is on fire")
	id, _ := first["review_id"].(string)
	if id == "" {
		t.Fatalf("moderation did not queue: %v", first)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1366, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	type step = chromedp.Action[chromedp.Void]
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	shot := func(name string) step {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if !*updateScreenshots {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join("..", "..", "docs", "console-"+name+".png"), png, 0o644)
		})
	}
	run := func(what string, steps ...step) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	signIn := func(token string) step {
		return chromedp.Steps(
			chromedp.Navigate(g.base+"/ui/login"),
			chromedp.WaitVisible(css(`#token`)),
			chromedp.SendKeys(css(`#token`), token),
			chromedp.Submit(css(`#token`)),
		)
	}

	// A wrong token is refused, saying why.
	run("wrong token", signIn("adm-not-the-token"), chromedp.WaitVisible(css(`#login-error`)), shot("login"))
	if msg := text(`#login-error`); !strings.Contains(msg, "neither the admin token nor an operator") {
		t.Fatalf("wrong token: %q", msg)
	}

	// The admin injects a fault, then forces the breaker open, each confirmed.
	run("breakers",
		signIn(scenarioAdmin), chromedp.WaitVisible(css(`#providers`)),
		chromedp.Navigate(g.base+"/ui/breakers"), chromedp.WaitVisible(css(`#fault-p1`)),
		chromedp.SetValue(css(`#mode-p1`), "unavailable"),
		chromedp.SetValue(css(`#status-p1`), "503"),
		chromedp.Click(css(`#fault-p1`)),
		chromedp.WaitVisible(css(`#confirm`)), chromedp.Click(css(`#confirm`)),
		chromedp.WaitVisible(css(`#clear-p1`)),
		chromedp.Click(css(`#open-p1`)),
		chromedp.WaitVisible(css(`#confirm`)), chromedp.Click(css(`#confirm`)),
		chromedp.WaitVisible(css(`section[data-provider="p1"] [data-breaker="open"]`)),
		shot("breakers"),
	)
	breaker, faultText := text(`section[data-provider="p1"] [data-breaker]`), text(`section[data-provider="p1"]`)
	if breaker != "open" || !strings.Contains(faultText, "In force: unavailable (status 503)") {
		t.Fatalf("p1 breaker %q, section %q", breaker, faultText)
	}
	if st := g.status()["p1"]; st.Breaker != "open" {
		t.Fatalf("/admin/status says p1 is %q", st.Breaker)
	}

	// The admin kills triage; the confirmation says what it does.
	run("flags",
		chromedp.Navigate(g.base+"/ui/flags"), chromedp.WaitVisible(css(`#kill-triage`)),
		chromedp.Click(css(`#kill-triage`)),
		chromedp.Click(css(`#apply-triage`)),
		chromedp.WaitVisible(css(`#summary`)), shot("confirm"),
	)
	if summary := text(`#summary`); !strings.Contains(summary, "Set task triage: OFF (kill switch on)") {
		t.Fatalf("confirmation %q", summary)
	}
	run("flags confirmed", chromedp.Click(css(`#confirm`)), chromedp.WaitVisible(css(`.ok`)), shot("flags"))
	if res := task("triage", "hello"); res["reason"] != "kill_switch" {
		t.Fatalf("triage after the kill: %v", res)
	}
	run("overview", chromedp.Navigate(g.base+"/ui/overview"), chromedp.WaitVisible(css(`#audit`)), shot("overview"))
	if audit := text(`#audit`); !strings.Contains(audit, "flags.patch") || !strings.Contains(audit, "breaker.open") || !strings.Contains(audit, "admin") {
		t.Fatalf("the overview's audit log: %q", audit)
	}

	// The admin signs out and the operator in, with their own token: the review queue,
	// updated live when another item arrives.
	run("queue",
		chromedp.Click(css(`.signout button`)), chromedp.WaitVisible(css(`#token`)),
		signIn(consoleOperator), chromedp.WaitVisible(css(`tr[data-review="`+id+`"]`)),
	)
	v := task("moderation", "refund me twice")
	second, _ := v["review_id"].(string)
	run("live update", chromedp.WaitVisible(css(`tr[data-review="`+second+`"]`)), chromedp.WaitVisible(css(`time.sla`)), shot("reviews"))

	// A schema-breaking answer is refused at its field; a good one resolves the item.
	run("resolve refused",
		chromedp.Click(css(`a[href="/ui/reviews/`+id+`"]`)),
		chromedp.WaitVisible(css(`#claim`)), chromedp.Click(css(`#claim`)),
		chromedp.WaitVisible(css(`#release`)),
		chromedp.SetValue(css(`#f-department`), `"billing"`),
		chromedp.SetValue(css(`#f-is_urgent`), "5"),
		chromedp.SetValue(css(`#f-urgency_score`), "1"),
		chromedp.Click(css(`#resolve-submit`)),
		chromedp.WaitVisible(css(`#e-is_urgent`)), shot("review-refused"),
	)
	if fieldErr := text(`#e-is_urgent`); !strings.Contains(fieldErr, "1") {
		t.Fatalf("is_urgent's error %q", fieldErr)
	}
	run("resolve",
		chromedp.SetValue(css(`#f-is_urgent`), "0.5"),
		chromedp.Click(css(`#resolve-submit`)),
		chromedp.WaitVisible(css(`#done`)), chromedp.WaitVisible(css(`#result`)), shot("review"),
	)
	_, body, err := g.do("GET", "/v1/reviews/"+id, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status string         `json:"status"`
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Status != "resolved" || got.Result["department"] != "billing" || got.Result["is_urgent"] != 0.5 {
		t.Fatalf("GET /v1/reviews/%s: %s", id, body)
	}
	// The caller's webhook has the operator's answer, signed.
	select {
	case h := <-hooks:
		ts, mac, _ := strings.Cut(h[0], ",")
		ts, mac = strings.TrimPrefix(ts, "t="), strings.TrimPrefix(mac, "v1=")
		sum := hmac.New(sha256.New, []byte(consoleWebhookSecret))
		sum.Write([]byte(ts + "." + h[1]))
		if want := hex.EncodeToString(sum.Sum(nil)); !hmac.Equal([]byte(mac), []byte(want)) || !strings.Contains(h[1], `"id":"`+id+`"`) || !strings.Contains(h[1], `"billing"`) {
			t.Errorf("webhook %q: %s", h[0], h[1])
		}
	case <-time.After(20 * time.Second):
		t.Error("no webhook POST within 20s of the resolve")
	}
}
