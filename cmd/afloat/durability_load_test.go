package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReviewQueueSurvivesKill9UnderLoad: 32 clients queue review items through the HTTP API
// as fast as the gateway takes them; after two seconds the process is killed with SIGKILL in
// the middle of the load, and started again on the same database. Every item a client got a
// 202 for is there, exactly once, and a retried call with its Idempotency-Key finds it again
// instead of queueing twice.
func TestReviewQueueSurvivesKill9UnderLoad(t *testing.T) {
	bin := buildAfloat(t, "builds and runs the afloat binary under load")
	files := map[string]string{"data/.keep": ""}
	for k, v := range testFiles {
		files[k] = v
	}
	survivesKill9UnderLoad(t, bin, writeConfig(t, durableConfig, files))
}

// survivesKill9UnderLoad is the load, the kill and the checks of
// TestReviewQueueSurvivesKill9UnderLoad, over the gateway that bin runs on cfg.
func survivesKill9UnderLoad(t *testing.T, bin, cfg string) {
	t.Helper()
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
	// Retried calls find their first review, on disk since before the kill.
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

// storedReviews counts each review id the gateway lists, page by page.
func storedReviews(t *testing.T, gw *gatewayProc) map[string]int {
	t.Helper()
	stored := map[string]int{}
	cursor := ""
	for {
		path := "/admin/reviews?limit=500"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		status, body := gw.call("GET", path, durableAdmin, "")
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil || status != http.StatusOK {
			t.Fatalf("list reviews: %d %s", status, body)
		}
		for _, it := range page.Items {
			stored[it.ID]++
		}
		if page.NextCursor == nil {
			return stored
		}
		cursor = *page.NextCursor
	}
}

func post(client *http.Client, u, key, body string) (int, []byte, error) {
	req, err := http.NewRequest("POST", u, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+durableClient)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
