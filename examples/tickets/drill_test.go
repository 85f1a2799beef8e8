package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// hangingUpstream is an OpenAI-compatible server that never answers in time: each request
// hangs for 5 s or until the client gives up. It counts the requests it received and
// signals each arrival on the returned channel (dropped when nobody listens).
func hangingUpstream(t *testing.T) (*httptest.Server, *atomic.Int64, <-chan struct{}) {
	t.Helper()
	var n atomic.Int64
	arrived := make(chan struct{}, 256)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		// Reading the body lets the server notice when the client hangs up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			http.Error(w, "upstream timeout", http.StatusGatewayTimeout)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n, arrived
}

// newTestService runs the ticket service against upstream through the real OpenAI adapter.
func newTestService(t *testing.T, upstream string, mod func(*Config)) (*Service, *httptest.Server) {
	t.Helper()
	client, err := openai.New(openai.Config{Name: "primary", BaseURL: upstream, Model: "t-lite"})
	if err != nil {
		t.Fatal(err)
	}
	pc := cascade.ProviderConfig{Name: "primary", Provider: client}
	// The drill must fail without the breaker: AFLOAT_DRILL_WITHOUT_BREAKER=1 shows it.
	if os.Getenv("AFLOAT_DRILL_WITHOUT_BREAKER") != "" {
		pc.Breaker = breaker.Config{Disabled: true}
	}
	cfg := Config{Providers: []cascade.ProviderConfig{pc}, Budget: 400 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return svc, srv
}

func postTicket(t *testing.T, base, subject, message string) (Ticket, time.Duration) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"subject": subject, "message": message})
	start := time.Now()
	resp, err := http.Post(base+"/tickets", "application/json", bytes.NewReader(body))
	took := time.Since(start)
	if err != nil {
		t.Error(err)
		return Ticket{}, took
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("POST /tickets: status %d", resp.StatusCode)
	}
	var tk Ticket
	if err := json.NewDecoder(resp.Body).Decode(&tk); err != nil {
		t.Error(err)
	}
	return tk, took
}

// TestDrillProviderUnavailable is the seeds' unavailability drill: the model hangs, and
// still every ticket is created, evaluated by the heuristic and marked degraded; the
// breaker opens and, once open, tickets are created fast although the provider hangs for
// seconds.
func TestDrillProviderUnavailable(t *testing.T) {
	upstream, hits, _ := hangingUpstream(t)
	svc, srv := newTestService(t, upstream.URL, nil)

	var took []time.Duration
	for i := range 20 {
		tk, d := postTicket(t, srv.URL, fmt.Sprintf("Сайт не работает #%d", i), "Ошибка 502 при входе, срочно")
		took = append(took, d)
		ev := tk.Evaluation
		if ev.Source != afloat.SourceHeuristic || !ev.Degraded {
			t.Fatalf("ticket %d: evaluation %+v, want a degraded heuristic one", i, ev)
		}
		if ev.Department == nil || *ev.Department != "technical" || ev.IsUrgent != 0.8 {
			t.Fatalf("ticket %d: the heuristic rules did not apply: %+v", i, ev)
		}
	}
	for i, d := range took[15:] {
		if d >= 100*time.Millisecond {
			t.Errorf("ticket %d took %v, want < 100ms once the breaker is open", 15+i, d)
		}
	}
	if st := svc.Engine().Breaker("primary").State(context.Background()); st != breaker.StateOpen {
		t.Errorf("breaker %v after 20 tickets on a hanging provider, want open", st)
	}
	if n := hits.Load(); n > 6 {
		t.Errorf("the hanging upstream got %d requests; an open breaker must stop calling it", n)
	}
	m := svc.Engine().Metrics()
	if got := testutil.ToFloat64(m.Attempts.WithLabelValues("triage", "primary", "circuit_open")); got < 15 {
		t.Errorf("circuit_open attempts %v, want ≥ 15", got)
	}
	if got := testutil.ToFloat64(m.Requests.WithLabelValues("triage", "heuristic", "true", "circuit_open")); got < 15 {
		t.Errorf("degraded requests with reason circuit_open: %v", got)
	}

	// The stored tickets read back the same.
	resp, err := http.Get(srv.URL + "/tickets/20")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tk Ticket
	if err := json.NewDecoder(resp.Body).Decode(&tk); err != nil || resp.StatusCode != 200 || tk.Evaluation.Source != afloat.SourceHeuristic {
		t.Fatalf("GET /tickets/20: %d %+v %v", resp.StatusCode, tk, err)
	}
}

// TestEndpointsWithoutAIKeepTheirLatency holds 50 concurrent POST /tickets on a hanging
// provider and shows that GET /tickets/{id}, which needs no AI, keeps its normal latency:
// the bulkhead and the deadline keep the hanging provider from taking every worker.
func TestEndpointsWithoutAIKeepTheirLatency(t *testing.T) {
	upstream, _, arrived := hangingUpstream(t)
	svc, srv := newTestService(t, upstream.URL, func(c *Config) {
		c.Workers = 16
		c.Providers[0].MaxInFlight = 4
	})
	svc.mu.Lock()
	svc.tickets["seed"] = &Ticket{ID: "seed", Subject: "hello"}
	svc.mu.Unlock()

	get := func() time.Duration {
		start := time.Now()
		resp, err := http.Get(srv.URL + "/tickets/seed")
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	var baseline []time.Duration
	for range 20 {
		baseline = append(baseline, get())
	}

	var wg sync.WaitGroup
	posts := make([]time.Duration, 50)
	for i := range 50 {
		wg.Go(func() {
			tk, d := postTicket(t, srv.URL, "Сервис не работает", "Ошибка")
			posts[i] = d
			if !tk.Evaluation.Degraded {
				t.Errorf("post %d: evaluation not degraded: %+v", i, tk.Evaluation)
			}
		})
	}
	// Measure GETs while the posts hang: wait until the bulkhead's four calls arrived.
	for range 4 {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("the posts never reached the provider")
		}
	}
	var during []time.Duration
	for range 20 {
		during = append(during, get())
	}
	wg.Wait()

	sort.Slice(during, func(i, j int) bool { return during[i] < during[j] })
	sort.Slice(baseline, func(i, j int) bool { return baseline[i] < baseline[j] })
	t.Logf("GET p50/max: baseline %v/%v, under 50 hanging posts %v/%v", baseline[10], baseline[19], during[10], during[19])
	if during[19] >= 100*time.Millisecond {
		t.Errorf("GET took up to %v while posts hung on the provider, want < 100ms", during[19])
	}
	sort.Slice(posts, func(i, j int) bool { return posts[i] < posts[j] })
	if posts[49] > 2*time.Second {
		t.Errorf("a post took %v; the 400ms budget must bound it", posts[49])
	}
}
