package alerts_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
)

const triageSchema = `{"type":"object","properties":{"department":{"enum":["technical","billing","sales","other",null]},"is_urgent":{"type":"number","minimum":0,"maximum":1},"urgency_score":{"type":"number","minimum":0,"maximum":3}},"required":["department","is_urgent","urgency_score"],"additionalProperties":false}`

const validAnswer = `{"department":"technical","is_urgent":0.8,"urgency_score":2}`

const hookSecret = "whsec-3f9a1c7e5b2d"

var ticket = afloat.Input{"subject": "Checkout is down", "message": "error 502 on every order"}

var start = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// half is a Rand without jitter.
func half() float64 { return 0.5 }

// triageOver builds an engine on clk over the providers, in order, and a triage task with a
// tier on each. Retries are off, so that no call waits on the fake clock.
func triageOver(t *testing.T, clk clockwork.Clock, providers ...afloat.Provider) (*cascade.Engine, *cascade.Task) {
	t.Helper()
	var pcs []cascade.ProviderConfig
	var tiers []cascade.Tier
	for i, p := range providers {
		name := []string{"primary", "backup", "emergency"}[i]
		pcs = append(pcs, cascade.ProviderConfig{Name: name, Provider: p, Retry: cascade.RetryConfig{Max: -1},
			Breaker: breaker.Config{Rand: half, Jitter: -1}})
		tpl, err := prompt.Parse("triage/"+name+".v1.tmpl", "--- system\nTriage as JSON.\n--- user\n{{.subject}}: {{.message}}\n")
		if err != nil {
			t.Fatal(err)
		}
		tiers = append(tiers, cascade.Tier{Provider: name, Prompt: tpl})
	}
	eng, err := cascade.New(cascade.Config{Providers: pcs, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	task, err := eng.Task(cascade.TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Budget: 2 * time.Second,
		Schema: []byte(triageSchema), Cascade: tiers})
	if err != nil {
		t.Fatal(err)
	}
	return eng, task
}

// hookRequest is one POST a receiver got.
type hookRequest struct {
	payload  alerts.Payload
	delivery string
	valid    bool // the signature verifies, at a t within 5 minutes of the clock
	answered int
}

// receiver is a webhook endpoint that verifies each signature and answers 500 to the first
// failFirst requests, 200 after.
type receiver struct {
	*httptest.Server
	got chan hookRequest

	mu        sync.Mutex
	failFirst int
}

func newReceiver(t *testing.T, clk clockwork.Clock, failFirst int) *receiver {
	r := &receiver{got: make(chan hookRequest, 16), failFirst: failFirst}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		hr := hookRequest{delivery: req.Header.Get(alerts.DeliveryHeader), valid: verify(req.Header.Get(alerts.SignatureHeader), body, clk.Now())}
		if err := json.Unmarshal(body, &hr.payload); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		r.mu.Lock()
		hr.answered = http.StatusOK
		if r.failFirst > 0 {
			r.failFirst--
			hr.answered = http.StatusInternalServerError
		}
		r.mu.Unlock()
		w.WriteHeader(hr.answered)
		r.got <- hr
	}))
	t.Cleanup(r.Close)
	return r
}

// next returns the next request the receiver got.
func (r *receiver) next(t *testing.T) hookRequest {
	t.Helper()
	select {
	case hr := <-r.got:
		return hr
	case <-t.Context().Done():
		t.Fatal("no webhook request")
	}
	return hookRequest{}
}

// verify checks a signature header as a receiver would: recompute the HMAC over
// "<t>.<body>" with the shared secret, compare in constant time, refuse a stale t.
func verify(header string, body []byte, now time.Time) bool {
	var ts, sig string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(ts + "." + string(body)))
	got, err := hex.DecodeString(sig)
	return err == nil && hmac.Equal(got, mac.Sum(nil))
}
