package alerts

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestAlertWebhookDelivery: the delivery of a firing is recorded on the alert that
// /admin/status lists: retried after each 503 with a doubling backoff on the clock,
// delivered by a 200, its attempts, time and status kept.
func TestAlertWebhookDelivery(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(t0)
	statuses := []int{503, 503, 200}
	got := make(chan time.Time, len(statuses))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(statuses[0])
		statuses = statuses[1:]
		got <- fc.Now()
	}))
	defer srv.Close()
	counts := newFakeCounts()
	ev, err := New(Config{Rules: []Rule{{Name: FallbackShare, MinCalls: 1, Webhook: srv.URL + "/hook/T0K3N"}}, Counts: counts, Clock: fc,
		Rand: func() float64 { return 0.5 }, WebhookBackoff: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ev.Evaluate(ctx)
	counts.add("triage", 1, 1)
	ev.Evaluate(ctx)
	if s := ev.Firing(); len(s) != 1 || s[0].Webhook == nil || s[0].Webhook.Result != resultPending {
		t.Fatalf("firing %+v, want its delivery pending", s)
	}
	var at []time.Duration
	at = append(at, (<-got).Sub(t0))
	for _, wait := range []time.Duration{2 * time.Second, 4 * time.Second} {
		fc.BlockUntilContext(ctx, 1)
		fc.Advance(wait)
		at = append(at, (<-got).Sub(t0))
	}
	ev.Close() // the attempt in flight finishes and is recorded
	if want := []time.Duration{0, 2 * time.Second, 6 * time.Second}; !equal(at, want) {
		t.Errorf("attempts at %v, want %v", at, want)
	}
	d := ev.Firing()[0].Webhook
	if d.State != StatusFiring || d.Result != resultDelivered || d.Attempts != 3 || d.Status != 200 || d.Error != "" ||
		d.LastAttempt == nil || !d.LastAttempt.Equal(t0.Add(6*time.Second)) {
		t.Errorf("delivery %+v", d)
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAlertWebhookGivesUp: a 4xx other than 408 and 429 is not retried; a receiver that
// cannot be reached is tried WebhookAttempts times; neither error quotes the URL.
func TestAlertWebhookGivesUp(t *testing.T) {
	ctx := t.Context()
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	defer refused.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL + "/hook/S3CRET"
	gone.Close()
	tests := []struct {
		name     string
		url      string
		attempts int
		status   int
	}{
		{"refused", refused.URL + "/hook/S3CRET", 1, 403},
		{"unreachable", goneURL, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := clockwork.NewFakeClockAt(t0)
			reports := make(chan Delivery, tc.attempts)
			n := newNotifier(Config{WebhookAttempts: 3, Rand: func() float64 { return 0.5 }}, fc, discard(), func(_ key, _ uint64, d Delivery) {
				reports <- d
			})
			defer n.close()
			n.send(Rule{Name: FallbackShare, Webhook: tc.url}, key{}, 1, State{Alert: FallbackShare, State: StatusFiring, Since: t0})
			var last Delivery
			for i := range tc.attempts {
				if i > 0 {
					fc.BlockUntilContext(ctx, 1) // the wait before the retry
					fc.Advance(time.Minute)
				}
				last = <-reports
			}
			if last.Result != resultFailed || last.Attempts != tc.attempts || last.Status != tc.status {
				t.Errorf("delivery %+v, want failed after %d attempts with status %d", last, tc.attempts, tc.status)
			}
			if strings.Contains(last.Error, "S3CRET") || last.Error == "" {
				t.Errorf("error %q: want one, without the URL", last.Error)
			}
		})
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
