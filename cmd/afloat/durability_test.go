package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	durableAdmin  = "adm-durable-8e1f4b2c9a"
	durableClient = "ck-acme-durable-5a3d7e1b"
)

// durableConfig is a gateway whose critical task's only provider always fails, over a
// SQLite review store beside the config.
const durableConfig = `
server:
  admin_token: ` + durableAdmin + `
tenants:
  acme: {keys: [` + durableClient + `]}
review:
  sqlite: {path: data/queue.db}
  claim_ttl: 1h
defaults: {retry: {max: 0}}
providers:
  down: {type: sim, error_rate: 1}
tasks:
  moderation:
    criticality: critical
    review_sla: 30m
    schema: schemas/mod.json
    cascade: [{provider: down, prompt: prompts/mod/a.v1.tmpl}]
`

// TestReviewQueueSurvivesKill9 builds the afloat binary, queues review items through a
// running gateway, works some of them, kills the process with SIGKILL and starts it again
// on the same database: every item is there, in the same state, and a retried call with
// the same Idempotency-Key finds its first review.
func TestReviewQueueSurvivesKill9(t *testing.T) {
	bin := buildAfloat(t, "builds and runs the afloat binary")
	files := map[string]string{"data/.keep": ""}
	for k, v := range testFiles {
		files[k] = v
	}
	cfg := writeConfig(t, durableConfig, files)

	gw := startGateway(t, bin, cfg)
	var ids []string
	for i := range 6 {
		var hdr []string
		if i == 0 {
			hdr = []string{"Idempotency-Key", "order-42"}
		}
		status, body := gw.call("POST", "/v1/tasks/moderation", durableClient, fmt.Sprintf(`{"input": {"text": "item %d"}}`, i), hdr...)
		var env struct {
			ReviewID   string `json:"review_id"`
			ExpectedBy string `json:"expected_by"`
		}
		if err := json.Unmarshal(body, &env); err != nil || status != http.StatusAccepted || env.ReviewID == "" || env.ExpectedBy == "" {
			t.Fatalf("call %d: %d %s", i, status, body)
		}
		ids = append(ids, env.ReviewID)
	}
	work := []struct{ op, id, operator, body string }{
		{"claim", ids[1], "alice", ""},
		{"resolve", ids[2], "alice", `{"result": {"allowed": false}}`},
		{"reject", ids[3], "bob", `{"reason": "not a moderation request"}`},
		{"claim", ids[4], "bob", ""},
	}
	for _, w := range work {
		status, body := gw.call("POST", "/admin/reviews/"+w.id+"/"+w.op, durableAdmin, w.body, "X-Afloat-Operator", w.operator)
		if status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", w.op, w.id, status, body)
		}
	}
	before := map[string]string{}
	for _, id := range ids {
		status, body := gw.call("GET", "/admin/reviews/"+id, durableAdmin, "")
		if status != http.StatusOK {
			t.Fatalf("show %s: %d %s", id, status, body)
		}
		before[id] = string(body)
	}

	gw.kill9()
	gw = startGateway(t, bin, cfg)

	states := map[string]int{}
	for _, id := range ids {
		status, body := gw.call("GET", "/admin/reviews/"+id, durableAdmin, "")
		if status != http.StatusOK || string(body) != before[id] {
			t.Errorf("%s after kill -9: %d\n got %s\nwant %s", id, status, body, before[id])
		}
		var it struct{ Status string }
		_ = json.Unmarshal(body, &it)
		states[it.Status]++
	}
	if want := map[string]int{"pending": 2, "claimed": 2, "resolved": 1, "rejected": 1}; fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("states after kill -9 %v, want %v", states, want)
	}
	status, body := gw.call("GET", "/v1/reviews/"+ids[2], durableClient, "")
	if status != http.StatusOK || !strings.Contains(string(body), `"status":"resolved"`) || !strings.Contains(string(body), `"result":{"allowed":false}`) {
		t.Errorf("the caller's view of the resolved item: %d %s", status, body)
	}
	status, body = gw.call("POST", "/admin/reviews/"+ids[1]+"/claim", durableAdmin, "", "X-Afloat-Operator", "bob")
	if status != http.StatusConflict || !strings.Contains(string(body), "claimed by alice") {
		t.Errorf("alice's claim did not survive: %d %s", status, body)
	}
	status, body = gw.call("POST", "/v1/tasks/moderation", durableClient, `{"input": {"text": "item 0"}}`, "Idempotency-Key", "order-42")
	if status != http.StatusAccepted || !strings.Contains(string(body), `"review_id":"`+ids[0]+`"`) {
		t.Errorf("retried call after kill -9: %d %s, want review %s again", status, body, ids[0])
	}
	status, body = gw.call("GET", "/admin/reviews?limit=500", durableAdmin, "")
	var page struct{ Items []json.RawMessage }
	if err := json.Unmarshal(body, &page); err != nil || status != http.StatusOK || len(page.Items) != len(ids) {
		t.Errorf("after kill -9 the queue holds %d items (%d), want %d", len(page.Items), status, len(ids))
	}
	gw.kill9()
}

// gatewayProc is a running afloat serve.
type gatewayProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	stderr *syncWriter
	done   chan struct{}
}

// startGateway runs afloat serve on a free loopback port and waits for its listening line.
func startGateway(t *testing.T, bin, cfg string) *gatewayProc {
	t.Helper()
	g := &gatewayProc{t: t, stderr: &syncWriter{}, done: make(chan struct{})}
	g.cmd = exec.Command(bin, "serve", "-c", cfg, "-listen", "127.0.0.1:0")
	g.cmd.Stderr = g.stderr
	stdout, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = g.cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(g.kill9)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "afloat listening on ") {
				lines <- l
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-lines:
		g.base = strings.TrimPrefix(l, "afloat listening on ")
	case <-g.done:
		t.Fatalf("afloat serve exited before listening; stderr:\n%s", g.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("afloat serve did not listen within 30s; stderr:\n%s", g.stderr.String())
	}
	return g
}

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (g *gatewayProc) kill9() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Kill()
	<-g.done
}

func (g *gatewayProc) call(method, path, token, body string, hdr ...string) (int, []byte) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v; stderr:\n%s", method, path, err, g.stderr.String())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
