package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/internal/pgtest"
)

// TestPostgresSurvivesKill9UnderLoad is TestReviewQueueSurvivesKill9UnderLoad over the
// PostgreSQL store: 32 clients queue review items through the HTTP API as fast as the gateway
// takes them; after two seconds the process is killed with SIGKILL in the middle of the load
// and started again on the same database. Every item a client got a 202 for is there,
// exactly once, and a retried call with its Idempotency-Key finds it instead of queueing
// twice.
func TestPostgresSurvivesKill9UnderLoad(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildAfloat(t, "builds and runs the afloat binary over PostgreSQL under load")
	cfg := writeConfig(t, postgresConfig(url), testFiles)
	gw := startGateway(t, bin, cfg)

	const writers = 32
	type ack struct{ key, body, id string }
	var (
		mu    sync.Mutex
		acks  []ack
		sent  atomic.Int64
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		other atomic.Value // an answer other than 202 before the kill
	)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: writers}}
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%02d-%06d", w, i)
				body := fmt.Sprintf(`{"input": {"text": "call %s"}}`, key)
				sent.Add(1)
				status, resp, err := post(client, gw.base+"/v1/tasks/moderation", key, body)
				if err != nil {
					continue // the process is gone: this call was never answered
				}
				var env struct {
					ReviewID string `json:"review_id"`
				}
				if status != http.StatusAccepted || json.Unmarshal(resp, &env) != nil || env.ReviewID == "" {
					other.CompareAndSwap(nil, fmt.Sprintf("%s: %d %s", key, status, resp))
					continue
				}
				mu.Lock()
				acks = append(acks, ack{key, body, env.ReviewID})
				mu.Unlock()
			}
		})
	}
	<-time.After(2 * time.Second) // load for two seconds, then kill in the middle of it
	gw.kill9()
	close(stop)
	wg.Wait()
	if v := other.Load(); v != nil {
		t.Fatalf("a call answered otherwise than 202: %v", v)
	}
	if len(acks) < writers {
		t.Fatalf("only %d calls acknowledged under load", len(acks))
	}
	t.Logf("%d calls sent, %d acknowledged in 2s (%.0f/s) before kill -9", sent.Load(), len(acks), float64(len(acks))/2)

	gw = startGateway(t, bin, cfg)
	stored := storedReviews(t, gw)
	seen := map[string]bool{}
	for _, a := range acks {
		if seen[a.id] {
			t.Errorf("review %s acknowledged for two calls", a.id)
		}
		seen[a.id] = true
		if stored[a.id] != 1 {
			t.Errorf("acknowledged review %s (%s) stored %d times after kill -9, want once", a.id, a.key, stored[a.id])
		}
	}
	if int64(len(stored)) > sent.Load() {
		t.Errorf("%d items stored for %d calls sent", len(stored), sent.Load())
	}
	for _, a := range acks[:min(len(acks), 100)] {
		status, resp, err := post(client, gw.base+"/v1/tasks/moderation", a.key, a.body)
		if err != nil || status != http.StatusAccepted || !bytes.Contains(resp, []byte(`"review_id":"`+a.id+`"`)) {
			t.Errorf("retry of %s after kill -9: %d %s %v, want review %s", a.key, status, resp, err, a.id)
		}
	}
	if after := storedReviews(t, gw); len(after) != len(stored) {
		t.Errorf("%d items after the retries, %d before: a retry queued again", len(after), len(stored))
	}
	gw.kill9()
}
