package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/afloat-dev/afloat/internal/pgtest"
)

// postgresConfig is durableConfig with its review queue in the PostgreSQL database at url.
func postgresConfig(url string) string {
	return strings.Replace(durableConfig, "  sqlite: {path: data/queue.db}\n",
		fmt.Sprintf("  store: postgres\n  postgres: {url: %q}\n", url), 1)
}

// queueReviews sends n critical calls whose only provider fails and returns the review ids
// of their 202s.
func queueReviews(t *testing.T, gw *gatewayProc, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		status, body := gw.call("POST", "/v1/tasks/moderation", durableClient, fmt.Sprintf(`{"input": {"text": "item %d"}}`, i))
		var env struct {
			ReviewID string `json:"review_id"`
		}
		if err := json.Unmarshal(body, &env); err != nil || status != http.StatusAccepted || env.ReviewID == "" {
			t.Fatalf("call %d: %d %s", i, status, body)
		}
		ids = append(ids, env.ReviewID)
	}
	return ids
}

// TestPostgresFleetClaimsNeverShared: two afloat serve gateways share one PostgreSQL review
// queue. Items queued through one are seen by both; four operators, two on each gateway's
// admin API, race to claim them all, each in its own order: every item goes to exactly one
// operator, and both gateways say who.
func TestPostgresFleetClaimsNeverShared(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildAfloat(t, "builds and runs two afloat gateways over PostgreSQL")
	cfg := writeConfig(t, postgresConfig(url), testFiles)
	gws := []*gatewayProc{startGateway(t, bin, cfg), startGateway(t, bin, cfg)}
	ids := queueReviews(t, gws[0], 40)

	operators := []string{"alice", "bob", "carol", "dave"}
	won := make([][]string, len(operators))
	errs := make(chan string, len(operators)*len(ids))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, op := range operators {
		gw := gws[i%2]
		wg.Go(func() {
			order := slices.Clone(ids)
			rand.New(rand.NewPCG(uint64(i), 3)).Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
			<-start
			for _, id := range order {
				status, body, err := claim(gw, id, op)
				switch {
				case err != nil:
					errs <- fmt.Sprintf("%s claiming %s: %v", op, id, err)
				case status == http.StatusOK:
					won[i] = append(won[i], id)
				case status != http.StatusConflict:
					errs <- fmt.Sprintf("%s claiming %s: %d %s", op, id, status, body)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	owner := map[string]string{}
	for i, list := range won {
		for _, id := range list {
			if prev, ok := owner[id]; ok {
				t.Fatalf("%s claimed by both %s and %s", id, prev, operators[i])
			}
			owner[id] = operators[i]
		}
	}
	if len(owner) != len(ids) {
		t.Fatalf("%d items claimed, want %d", len(owner), len(ids))
	}
	for _, id := range ids {
		for g, gw := range gws {
			status, body := gw.call("GET", "/admin/reviews/"+id, durableAdmin, "")
			var it struct{ Status, Operator string }
			if err := json.Unmarshal(body, &it); err != nil || status != http.StatusOK || it.Status != "claimed" || it.Operator != owner[id] {
				t.Fatalf("gateway %d: %s: %d %s, want claimed by %s", g, id, status, body, owner[id])
			}
		}
	}
}

// claim claims review id for operator through the gateway's admin API.
func claim(gw *gatewayProc, id, operator string) (int, []byte, error) {
	req, err := http.NewRequest("POST", gw.base+"/admin/reviews/"+id+"/claim", nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+durableAdmin)
	req.Header.Set("X-Afloat-Operator", operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestPostgresDownAnswers503: when the gateway loses its PostgreSQL review store, a critical
// call answers 503 review_unavailable (never a default), /readyz says the store cannot
// commit, and afloat_review_store_healthy is 0; once the database is back, calls queue
// again and the gateway is ready.
func TestPostgresDownAnswers503(t *testing.T) {
	url := pgtest.Schema(t)
	proxy := pgtest.NewProxy(t, pgtest.HostPort(t, url))
	bin := buildAfloat(t, "builds and runs an afloat gateway over PostgreSQL")
	cfg := writeConfig(t, postgresConfig(proxy.URL(url)), testFiles)
	gw := startGateway(t, bin, cfg)
	queueReviews(t, gw, 1)

	proxy.Cut()
	status, body := gw.call("POST", "/v1/tasks/moderation", durableClient, `{"input": {"text": "during the outage"}}`)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"review_unavailable"`) || !strings.Contains(string(body), "not queued") {
		t.Fatalf("critical call with the store down: %d %s, want 503 review_unavailable", status, body)
	}
	status, body = gw.call("GET", "/readyz", "", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "cannot commit") {
		t.Errorf("/readyz with the store down: %d %s, want 503 saying the store cannot commit", status, body)
	}
	if _, body := gw.call("GET", "/metrics", "", ""); !strings.Contains(string(body), "\nafloat_review_store_healthy 0\n") {
		t.Errorf("afloat_review_store_healthy is not 0 with the store down")
	}

	proxy.Restore()
	status, body = gw.call("GET", "/readyz", "", "")
	if status != http.StatusOK {
		t.Errorf("/readyz once the store is back: %d %s", status, body)
	}
	queueReviews(t, gw, 1)
	if _, body := gw.call("GET", "/metrics", "", ""); !strings.Contains(string(body), "\nafloat_review_store_healthy 1\n") {
		t.Errorf("afloat_review_store_healthy is not 1 once the store is back")
	}
	status, body = gw.call("GET", "/admin/reviews?limit=500", durableAdmin, "")
	var page struct{ Items []json.RawMessage }
	if err := json.Unmarshal(body, &page); err != nil || status != http.StatusOK || len(page.Items) != 2 {
		t.Errorf("the queue holds %d items (%d), want the 2 acknowledged", len(page.Items), status)
	}
}
