package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/telemetry"
)

// TestReviewDeliveryShown: the caller's GET /v1/reviews/{id} and the operators' items carry
// the webhook's delivery once the item is answered (absent, null before), as the store
// records it; ReviewAnswered hears of each answer; an unanswered item past its task's
// review_sla is flagged overdue in the list and the item, an answered one never.
func TestReviewDeliveryShown(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	var (
		mu       sync.Mutex
		answered []string
	)
	e := newReviewEnv(t, func(m *telemetry.Metrics) review.Store {
		return review.NewMemoryWith(review.Options{Clock: clk, Metrics: m, Outbox: true})
	}, func(c *Config) {
		c.Clock = clk
		c.ReviewAnswered = func(it *review.Item) {
			mu.Lock()
			answered = append(answered, it.ID+" "+string(it.Status))
			mu.Unlock()
		}
	})
	a, b := e.queue(clientKey), e.queue(clientKey)

	caller := func(id string) map[string]json.RawMessage {
		t.Helper()
		status, _, body := e.do("GET", "/v1/reviews/"+id, clientKey, "")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/reviews/%s: %d %s", id, status, body)
		}
		return decode[map[string]json.RawMessage](t, body)
	}
	listed := func() map[string]reviewItem {
		t.Helper()
		status, _, body := e.do("GET", "/admin/reviews", aliceToken, "")
		if status != http.StatusOK {
			t.Fatalf("list: %d %s", status, body)
		}
		out := map[string]reviewItem{}
		for _, it := range decode[reviewList](t, body).Items {
			out[it.ID] = it
		}
		return out
	}
	if v, ok := caller(a)["delivery"]; ok {
		t.Errorf("a pending item's delivery: %s, want none", v)
	}
	if _, _, body := e.do("GET", "/admin/reviews", aliceToken, ""); !strings.Contains(string(body), `"overdue":false,"delivery":null`) {
		t.Errorf("list before the SLA: %s", body)
	}

	clk.Advance(30*time.Minute + time.Second) // moderation's review_sla is 30m
	if l := listed(); !l[a].Overdue || !l[b].Overdue {
		t.Errorf("past the SLA: %+v, want both overdue", l)
	}
	_, _, body := e.do("GET", "/admin/reviews/"+a, bobToken, "")
	if !decode[reviewItem](t, body).Overdue {
		t.Errorf("the item past its SLA: %s, want overdue", body)
	}

	status, _, body := e.do("POST", "/admin/reviews/"+a+"/resolve", aliceToken, `{"result": {"allowed": false}}`)
	if status != http.StatusOK {
		t.Fatalf("resolve: %d %s", status, body)
	}
	now := clk.Now().UTC().Format(time.RFC3339)
	want := `{"state":"pending","attempts":0,"last_attempt":null,"last_status":null,"last_error":null,"next_at":"` + now + `"}`
	if got := string(caller(a)["delivery"]); got != want {
		t.Errorf("delivery once resolved: %s, want %s", got, want)
	}
	if l := listed(); l[a].Overdue || l[a].Delivery == nil || l[a].Delivery.State != review.DeliveryPending || !l[b].Overdue {
		t.Errorf("list after the answer: a %+v, b overdue %v", l[a], l[b].Overdue)
	}

	at := clk.Now()
	clk.Advance(time.Minute)
	if err := e.store.RecordDelivery(context.Background(), a, review.Delivery{State: review.DeliveryFailed, Attempts: 10,
		LastAttempt: at, LastStatus: 500, LastError: "Internal Server Error"}); err != nil {
		t.Fatal(err)
	}
	want = `{"state":"failed","attempts":10,"last_attempt":"` + now + `","last_status":500,"last_error":"Internal Server Error","next_at":null}`
	if got := string(caller(a)["delivery"]); got != want {
		t.Errorf("delivery once failed: %s, want %s", got, want)
	}
	if status, _, body := e.do("POST", "/admin/reviews/"+b+"/reject", bobToken, `{"reason": "spam"}`); status != http.StatusOK {
		t.Fatalf("reject: %d %s", status, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answered) != 2 || answered[0] != a+" resolved" || answered[1] != b+" rejected" {
		t.Errorf("ReviewAnswered heard %v, want a resolved then b rejected", answered)
	}
}
