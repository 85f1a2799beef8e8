package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/review"
	"github.com/jonboulle/clockwork"
)

// countingStore counts the probes (Pings) of a review store and fails them while failing is
// set.
type countingStore struct {
	review.Store
	pings   atomic.Int64
	failing atomic.Bool
}

func (s *countingStore) Ping(ctx context.Context) error {
	s.pings.Add(1)
	if s.failing.Load() {
		return errors.New("database or disk is full")
	}
	return s.Store.Ping(ctx)
}

// noProvider is a provider /readyz never calls.
type noProvider struct{}

func (noProvider) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	return nil, errors.New("not called")
}

func newReadyzGateway(t *testing.T, clk clockwork.Clock, store review.Store) http.Handler {
	t.Helper()
	engine, err := cascade.New(cascade.Config{Providers: []cascade.ProviderConfig{{Name: "none", Provider: noProvider{}}}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Engine: engine, Review: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return g.Handler()
}

func readyz(h http.Handler) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// TestReadyzProbesOncePerInterval: /readyz is unauthenticated and the review store's probe
// is a synced write, so a thousand calls, one after another or all at once, probe the store
// once per second; the next second probes again.
func TestReadyzProbesOncePerInterval(t *testing.T) {
	clk := clockwork.NewFakeClock()
	store := &countingStore{Store: review.NewMemory(clk)}
	h := newReadyzGateway(t, clk, store)

	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 500 { // a cold start: all wait for one probe
		wg.Go(func() {
			if code, _ := readyz(h); code != http.StatusOK {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	for range 500 {
		if code, body := readyz(h); code != http.StatusOK {
			t.Fatalf("/readyz: %d %s", code, body)
		}
	}
	if bad.Load() != 0 || store.pings.Load() != 1 {
		t.Fatalf("1,000 calls in one interval: %d probes, %d not ready; want 1 probe, all ready", store.pings.Load(), bad.Load())
	}
	clk.Advance(readyInterval - time.Millisecond)
	readyz(h)
	if got := store.pings.Load(); got != 1 {
		t.Fatalf("within the interval: %d probes, want 1", got)
	}
	clk.Advance(time.Millisecond)
	for range 1000 {
		readyz(h)
	}
	if got := store.pings.Load(); got != 2 {
		t.Fatalf("1,000 calls in the next interval: %d probes in all, want 2", got)
	}
}

// TestReadyzShowsFailureAndRecovery: a failed probe answers 503 with its reason, and is not
// trusted for an interval: the call after the store recovers is ready again, then cached.
func TestReadyzShowsFailureAndRecovery(t *testing.T) {
	clk := clockwork.NewFakeClock()
	store := &countingStore{Store: review.NewMemory(clk)}
	h := newReadyzGateway(t, clk, store)
	if code, _ := readyz(h); code != http.StatusOK {
		t.Fatalf("healthy: %d", code)
	}
	store.failing.Store(true)
	if code, _ := readyz(h); code != http.StatusOK {
		t.Fatalf("within the interval of a ready probe: %d, want the cached 200", code)
	}
	clk.Advance(readyInterval)
	code, body := readyz(h)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "disk is full") {
		t.Fatalf("store failing: %d %s, want 503 with the reason", code, body)
	}
	store.failing.Store(false)
	if code, body := readyz(h); code != http.StatusOK {
		t.Fatalf("the call after recovery: %d %s, want 200", code, body)
	}
	n := store.pings.Load()
	for range 100 {
		readyz(h)
	}
	if got := store.pings.Load(); got != n {
		t.Fatalf("after recovery: %d more probes within the interval, want 0", got-n)
	}
}
