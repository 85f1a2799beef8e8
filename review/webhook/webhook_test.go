package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/review"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

const secret = "whsec-test-5b8e2d1f9c3a7e40"

// received is one POST the receiver got, and the fake clock's time then.
type received struct {
	at     time.Time
	header http.Header
	body   []byte
}

// receiver is the caller's webhook endpoint: it answers each POST with status(n) (n from 1)
// and passes it on to got.
type receiver struct {
	*httptest.Server
	got    chan received
	n      atomic.Int64
	status atomic.Value // func(n int) int
}

func newReceiver(t *testing.T, clk clockwork.Clock, status func(n int) int) *receiver {
	t.Helper()
	r := &receiver{got: make(chan received, 64)}
	r.status.Store(status)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		n := int(r.n.Add(1))
		r.got <- received{at: clk.Now(), header: req.Header.Clone(), body: body}
		w.WriteHeader(r.status.Load().(func(int) int)(n))
	}))
	t.Cleanup(r.Close)
	return r
}

func always(status int) func(int) int { return func(int) int { return status } }

// next returns the next POST the receiver got; the bound guards against a hang only.
func (r *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case got := <-r.got:
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook POST within 10s")
	}
	return received{}
}

// none fails the test if the receiver got a POST not read yet.
func (r *receiver) none(t *testing.T) {
	t.Helper()
	select {
	case got := <-r.got:
		t.Fatalf("an unexpected POST: %s", got.body)
	default:
	}
}

// idle waits until the sender's worker waits for its next poll: the round it was in, and
// each outcome it recorded, are done.
func idle(t *testing.T, clk *clockwork.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the sender never waited for its next poll")
	}
}

// half makes every jitter factor 1: the waits are the backoff itself.
func half() float64 { return 0.5 }

func start(t *testing.T, cfg Config) *Sender {
	t.Helper()
	if cfg.Secret == "" {
		cfg.Secret = secret
	}
	if cfg.Rand == nil {
		cfg.Rand = half
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func answered(t *testing.T, s review.Store, reject bool) *review.Item {
	t.Helper()
	ctx := context.Background()
	id, err := s.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: json.RawMessage(`{"text":"you are all idiots"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var it *review.Item
	if reject {
		it, err = s.Reject(ctx, id, "bob", "not moderation: a test")
	} else {
		it, err = s.Resolve(ctx, id, "alice", json.RawMessage(`{"allowed": false}`))
	}
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func lookup(t *testing.T, s review.Store, id string) review.Delivery {
	t.Helper()
	it, err := s.Lookup(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return it.Delivery
}

// verify checks the signature of a POST as a receiver would, with its own HMAC, and returns
// the signed time.
func verify(t *testing.T, r received) time.Time {
	t.Helper()
	sig := r.header.Get("X-Afloat-Signature")
	ts, mac, ok := strings.Cut(sig, ",")
	ts, tok := strings.CutPrefix(ts, "t=")
	mac, mok := strings.CutPrefix(mac, "v1=")
	unix, err := strconv.ParseInt(ts, 10, 64)
	if !ok || !tok || !mok || err != nil {
		t.Fatalf("signature header %q", sig)
	}
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts + "." + string(r.body)))
	want := hex.EncodeToString(h.Sum(nil))
	if !hmac.Equal([]byte(mac), []byte(want)) {
		t.Fatalf("signature %s does not verify: want v1=%s over %q", sig, want, ts+"."+string(r.body))
	}
	return time.Unix(unix, 0)
}

// TestWebhookDelivers: an answer is POSTed once, at once, with a signature a receiver
// verifies, the answer's fields and nothing of the input; the delivery is recorded
// delivered. Wake delivers the next answer without waiting for the poll.
func TestWebhookDelivers(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	store := review.NewMemoryWith(review.Options{Clock: clk, Outbox: true})
	it := answered(t, store, false)
	rcv := newReceiver(t, clk, always(http.StatusOK))
	s := start(t, Config{Store: store, URL: rcv.URL + "/hooks/afloat", Clock: clk})

	got := rcv.next(t)
	if at := verify(t, got); !at.Equal(t0) {
		t.Errorf("signed at %v, want %v", at, t0)
	}
	if h := got.header; h.Get("Content-Type") != "application/json" || h.Get("X-Afloat-Delivery") != it.ID {
		t.Errorf("headers %v", h)
	}
	var body map[string]any
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range body {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"delivery_attempt", "id", "operator", "resolved_at", "result", "status", "task", "tenant"}; !slices.Equal(keys, want) {
		t.Errorf("body keys %v, want %v: %s", keys, want, got.body)
	}
	if body["id"] != it.ID || body["task"] != "moderation" || body["tenant"] != "acme" || body["status"] != "resolved" ||
		body["operator"] != "alice" || body["resolved_at"] != t0.Format(time.RFC3339) || body["delivery_attempt"] != 1.0 {
		t.Errorf("body %s", got.body)
	}
	if r, _ := json.Marshal(body["result"]); string(r) != `{"allowed":false}` {
		t.Errorf("result %s", r)
	}
	idle(t, clk)
	want := review.Delivery{State: review.DeliveryDelivered, Attempts: 1, LastAttempt: t0, LastStatus: 200}
	if d := lookup(t, store, it.ID); d != want {
		t.Errorf("delivery %+v, want %+v", d, want)
	}
	rcv.none(t)

	// Another answer while the sender waits for its next poll: Wake sends it now.
	rejected := answered(t, store, true)
	s.Wake()
	got = rcv.next(t)
	verify(t, got)
	var p Payload
	if err := json.Unmarshal(got.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != rejected.ID || p.Status != review.StatusRejected || p.Reason != "not moderation: a test" || p.Result != nil ||
		p.Operator != "bob" || p.DeliveryAttempt != 1 || strings.Contains(string(got.body), "idiots") {
		t.Errorf("rejected body %s", got.body)
	}
	idle(t, clk)
	if d := lookup(t, store, rejected.ID); d.State != review.DeliveryDelivered {
		t.Errorf("rejected delivery %+v", d)
	}
	rcv.none(t)
}

// TestWebhookRetries: a receiver that answers 500 gets the delivery again after 1s, 2s and
// 4s (the jitter is 1 here), each attempt counted in the body and recorded; after the last
// attempt the delivery is failed and nothing more is sent.
func TestWebhookRetries(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	store := review.NewMemoryWith(review.Options{Clock: clk, Outbox: true})
	it := answered(t, store, false)
	rcv := newReceiver(t, clk, always(http.StatusInternalServerError))
	start(t, Config{Store: store, URL: rcv.URL, Clock: clk, Attempts: 4})

	attempts := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}
	for i, off := range attempts {
		for clk.Now().Before(t0.Add(off)) {
			idle(t, clk)
			rcv.none(t) // nothing between the attempts
			clk.Advance(DefaultInterval)
		}
		got := rcv.next(t)
		if !got.at.Equal(t0.Add(off)) || !verify(t, got).Equal(t0.Add(off).Truncate(time.Second)) {
			t.Fatalf("attempt %d at %v, want %v", i+1, got.at, t0.Add(off))
		}
		var p Payload
		if err := json.Unmarshal(got.body, &p); err != nil || p.DeliveryAttempt != i+1 {
			t.Fatalf("attempt %d: body %s", i+1, got.body)
		}
		idle(t, clk)
		d := lookup(t, store, it.ID)
		want := review.Delivery{State: review.DeliveryPending, Attempts: i + 1, LastAttempt: t0.Add(off), LastStatus: 500,
			LastError: "Internal Server Error"}
		if i+1 < len(attempts) {
			want.NextAt = t0.Add(attempts[i+1]) // waits of 1s, 2s, 4s
		} else {
			want.State = review.DeliveryFailed
		}
		if d != want {
			t.Fatalf("after attempt %d: %+v, want %+v", i+1, d, want)
		}
	}
	for range 30 {
		clk.Advance(10 * time.Second)
		idle(t, clk)
	}
	rcv.none(t)
}

// TestWebhookStatuses: 2xx delivers; 408, 429, 5xx and a transport error are tried again;
// another 4xx and a redirect fail at once. The error recorded never holds the URL (its
// path or query often holds the receiver's token).
func TestWebhookStatuses(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/hooks?token=tok-4f1c9e"
	closed.Close()
	tests := []struct {
		status int // 0: the receiver is down
		state  review.DeliveryState
	}{
		{200, review.DeliveryDelivered}, {202, review.DeliveryDelivered}, {204, review.DeliveryDelivered},
		{400, review.DeliveryFailed}, {401, review.DeliveryFailed}, {404, review.DeliveryFailed}, {410, review.DeliveryFailed},
		{302, review.DeliveryFailed},
		{408, review.DeliveryPending}, {429, review.DeliveryPending}, {500, review.DeliveryPending}, {503, review.DeliveryPending},
		{0, review.DeliveryPending},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			clk := clockwork.NewFakeClockAt(t0)
			store := review.NewMemoryWith(review.Options{Clock: clk, Outbox: true})
			it := answered(t, store, false)
			url := closedURL
			if tc.status != 0 {
				rcv := newReceiver(t, clk, always(tc.status))
				url = rcv.URL
			}
			start(t, Config{Store: store, URL: url, Clock: clk})
			idle(t, clk)
			d := lookup(t, store, it.ID)
			if d.State != tc.state || d.Attempts != 1 || d.LastStatus != tc.status || !d.LastAttempt.Equal(t0) {
				t.Fatalf("delivery %+v, want %s after one attempt", d, tc.state)
			}
			if (tc.state == review.DeliveryPending) != d.NextAt.Equal(t0.Add(time.Second)) {
				t.Errorf("next at %v", d.NextAt)
			}
			if (tc.state == review.DeliveryDelivered) != (d.LastError == "") || strings.Contains(d.LastError, "tok-4f1c9e") || strings.Contains(d.LastError, "/hooks") {
				t.Errorf("last error %q", d.LastError)
			}
		})
	}
}

// TestWebhookBackoff: the waits double from Backoff up to MaxBackoff, each jittered to
// [0.5, 1.5) of itself.
func TestWebhookBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		rand float64
		want time.Duration
	}{
		{1, 0.5, time.Second}, {2, 0.5, 2 * time.Second}, {3, 0.5, 4 * time.Second}, {9, 0.5, 256 * time.Second},
		{10, 0.5, 5 * time.Minute}, {20, 0.5, 5 * time.Minute},
		{1, 0, 500 * time.Millisecond}, {1, 0.999, 1499 * time.Millisecond}, {10, 0, 150 * time.Second},
	} {
		s, err := New(Config{Store: review.NewMemory(nil), URL: "https://hooks.example", Rand: func() float64 { return tc.rand }})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.wait(tc.n); got != tc.want {
			t.Errorf("wait after attempt %d, rand %v: %v, want %v", tc.n, tc.rand, got, tc.want)
		}
	}
}

// TestWebhookResumesAfterRestart: the deliveries are in the SQLite file, so that a sender
// started on the reopened store makes the ones left: an answer never attempted, and one
// whose retry was due while the process was down (its next attempt counted as the second).
func TestWebhookResumesAfterRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	clk := clockwork.NewFakeClockAt(t0)
	open := func() *review.SQLite {
		s, err := review.OpenSQLite(ctx, path, review.Options{Clock: clk, Outbox: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	store := open()
	tried := answered(t, store, false)
	rcv := newReceiver(t, clk, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	s, err := New(Config{Store: store, URL: rcv.URL, Secret: secret, Clock: clk, Rand: half})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	rcv.next(t)
	idle(t, clk)
	s.Close()
	never := answered(t, store, true) // answered after the sender stopped
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Minute) // down for a minute; the retry was due after 1s
	store = open()
	t.Cleanup(func() { _ = store.Close() })
	start(t, Config{Store: store, URL: rcv.URL, Clock: clk})
	seen := map[string]int{}
	for range 2 {
		got := rcv.next(t)
		verify(t, got)
		var p Payload
		if err := json.Unmarshal(got.body, &p); err != nil {
			t.Fatal(err)
		}
		seen[p.ID] = p.DeliveryAttempt
	}
	idle(t, clk)
	if seen[tried.ID] != 2 || seen[never.ID] != 1 {
		t.Fatalf("delivery attempts after the restart %v, want %s: 2, %s: 1", seen, tried.ID, never.ID)
	}
	for id, n := range map[string]int{tried.ID: 2, never.ID: 1} {
		if d := lookup(t, store, id); d.State != review.DeliveryDelivered || d.Attempts != n || d.LastStatus != 204 {
			t.Errorf("%s: %+v, want delivered after %d attempts", id, d, n)
		}
	}
	rcv.none(t)
}

// TestWebhookCloseCutsAnAttempt: Close cuts the POST in flight and records nothing: the
// delivery stays pending for the next start.
func TestWebhookCloseCutsAnAttempt(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	store := review.NewMemoryWith(review.Options{Clock: clk, Outbox: true})
	it := answered(t, store, false)
	arrived := make(chan struct{})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the server sees the client leave once the body is read
		close(arrived)
		<-r.Context().Done()
	}))
	defer rcv.Close()
	s, err := New(Config{Store: store, URL: rcv.URL, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	<-arrived
	s.Close()
	s.Close()
	if d := lookup(t, store, it.ID); d.State != review.DeliveryPending || d.Attempts != 0 {
		t.Errorf("after a cut attempt: %+v, want pending, no attempt", d)
	}
	var nilSender *Sender
	nilSender.Wake()
	nilSender.Close()
}

// TestNewRefuses: a config without a store, with a URL that is not http(s), or with a
// negative setting is an error.
func TestNewRefuses(t *testing.T) {
	store := review.NewMemory(nil)
	for name, cfg := range map[string]Config{
		"no store":         {URL: "https://hooks.example"},
		"no url":           {Store: store},
		"ftp":              {Store: store, URL: "ftp://hooks.example"},
		"relative":         {Store: store, URL: "/hooks"},
		"negative backoff": {Store: store, URL: "https://hooks.example", Backoff: -time.Second},
		"negative tries":   {Store: store, URL: "https://hooks.example", Attempts: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(Config{Store: store, URL: "http://127.0.0.1:9/hooks", Secret: afloat.Secret("x")}); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}
