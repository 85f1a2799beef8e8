// Package scrape runs a small afloat gateway over simulated providers through the paths its
// metrics watch (answers of tier 0 and of the backup, a contract violation and its re-ask, an
// open breaker, the heuristic, a review queued and resolved, a stream cut and continued, a
// drill, calls naming tasks and routes that do not exist) and scrapes its /metrics, for the
// tests that hold the metric names to the design, the shipped alerting rules and dashboard,
// and the example scrape:
//
//	g := scrape.Start(t)
//	g.Drive(t)
//	families := g.Families(t) // by metric name
package scrape

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
	"github.com/afloat-dev/afloat/state"
)

// The credentials of the run: a tenant, its key, the admin token. A test may look for them in
// the scrape: none may be there.
const (
	Tenant     = "acme-tenant"
	ClientKey  = "ck-scrape-5d1f8a2c7e9b"
	AdminToken = "adm-scrape-3e8c1b7a9f2d"
)

// Unknown are the names of tasks and routes the run asks for that do not exist.
var Unknown = []string{"no-such-task", "no-such-route"}

const configText = `
server:
  admin_token: ` + AdminToken + `
tenants:
  ` + Tenant + `: {keys: [` + ClientKey + `]}
state:
  backend: local
defaults:
  breaker: {consecutive_failures: 2, recovery: 1m, max_recovery: 1m, ramp_up: 0s}
  timeouts: {min: 200ms, initial: 2s}
  retry: {max: 1, budget_floor: 100}
providers:
  primary:
    type: sim
    latency: {p50: 1ms, p95: 2ms}
    seed: 1
    price: {input_per_1m: 2, output_per_1m: 6, currency: USD}
  backup:
    type: sim
    latency: {p50: 1ms, p95: 2ms}
    seed: 2
    price: {input_per_1m: 1, output_per_1m: 3, currency: USD}
tasks:
  triage:
    criticality: enrichment
    budget: 3s
    input: {message: {type: string}}
    schema: schemas/triage.json
    cascade:
      - {provider: primary, prompt: prompts/triage/primary.v1.tmpl}
      - {provider: backup,  prompt: prompts/triage/backup.v1.tmpl}
    heuristic:
      - {default: {department: null, is_urgent: 0.2}}
    # A canary whose candidate takes one call in 10,000: its series are exported, and the run's
    # answers stay the incumbent's.
    canary: {prompt: prompts/triage/primary.v2.tmpl, share: 0.01%, by: request}
  moderation:
    criticality: critical
    on_exhausted: human
    budget: 3s
    review_sla: 30m
    input: {text: {type: string}}
    schema: schemas/moderation.json
    cascade:
      - {provider: primary, prompt: prompts/moderation/primary.v1.tmpl}
      - {provider: backup,  prompt: prompts/moderation/backup.v1.tmpl}
routes:
  support:
    criticality: assistance
    budget: 5s
    cascade: [primary, backup]
alerts:
  fallback_share: {above: 0.3, for: 10m}
  primary_open: {for: 1m}
  contract_violation_rate: {above: 0.1, for: 5m}
  review_sla: {}
  unusable: {}
  drill_stale: {}
  canary_rolled_back: {}
`

var files = map[string]string{
	"schemas/triage.json": `{"type": "object", "properties": {"department": {"enum": ["technical", "billing", "other", null]},
 "is_urgent": {"type": "number", "minimum": 0, "maximum": 1}}, "required": ["department", "is_urgent"], "additionalProperties": false}`,
	"schemas/moderation.json":            `{"type": "object", "properties": {"allowed": {"type": "boolean"}}, "required": ["allowed"], "additionalProperties": false}`,
	"prompts/triage/primary.v1.tmpl":     "--- system\nTriage the ticket as JSON.\n--- user\n{{.message}}\n",
	"prompts/triage/primary.v2.tmpl":     "--- system\nTriage the ticket; JSON only.\n--- user\n{{.message}}\n",
	"prompts/triage/backup.v1.tmpl":      "--- system\nClassify the ticket; answer JSON only.\n--- user\n{{.message}}\n",
	"prompts/moderation/primary.v1.tmpl": "--- system\nModerate the text as JSON.\n--- user\n{{.text}}\n",
	"prompts/moderation/backup.v1.tmpl":  "--- system\nIs the text allowed? JSON only.\n--- user\n{{.text}}\n",
}

// Gateway is a running gateway of the run's config.
type Gateway struct {
	Runtime *config.Runtime
	URL     string
	client  *http.Client
}

// Start builds the run's config in a temporary folder and serves it until the test ends.
func Start(t testing.TB) *Gateway {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := config.Parse([]byte(configText), dir, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	gw, err := gateway.New(gateway.Config{
		Engine: rt.Engine, Tasks: rt.Tasks, Routes: rt.Routes, Faults: rt.Faults, Flags: rt.State, State: rt.State,
		Review: rt.Review, Tenants: map[string][]string{Tenant: {ClientKey}}, AdminToken: AdminToken,
		Gatherer: rt.Registry,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return &Gateway{Runtime: rt, URL: srv.URL, client: srv.Client()}
}

// Do sends a request with a bearer token and a JSON body ("" for none) and returns the
// status, the headers (trailers included) and the body.
func (g *Gateway) Do(t testing.TB, method, path, token, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h := resp.Header.Clone()
	for k, v := range resp.Trailer {
		h[k] = v
	}
	return resp.StatusCode, h, b
}

// must sends a request and fails the test unless it is answered with want.
func (g *Gateway) must(t testing.TB, want int, method, path, token, body string) []byte {
	t.Helper()
	status, _, b := g.Do(t, method, path, token, body)
	if status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
	}
	return b
}

// Source calls a task and returns its envelope's source, provider and whether it is degraded.
func (g *Gateway) Source(t testing.TB, task, input string) string {
	t.Helper()
	status, _, b := g.Do(t, "POST", "/v1/tasks/"+task, ClientKey, `{"input": `+input+`}`)
	if status != http.StatusOK && status != http.StatusAccepted {
		t.Fatalf("task %s: %d %s", task, status, b)
	}
	var env struct {
		Source   string `json:"source"`
		Provider string `json:"provider"`
		Degraded bool   `json:"degraded"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s/%s/%v", env.Source, env.Provider, env.Degraded)
}

// Fault injects a fault into a provider through the admin API; mode "" clears it.
func (g *Gateway) Fault(t testing.TB, provider, fault string) {
	t.Helper()
	if fault == "" {
		g.must(t, http.StatusOK, "DELETE", "/admin/faults/"+provider, AdminToken, "")
		return
	}
	g.must(t, http.StatusOK, "PUT", "/admin/faults/"+provider, AdminToken, fault)
}

const ticket = `{"message": "The site is down: error 502"}`

// Drive runs the gateway through the paths the metrics watch, in a fixed order; it fails the
// test if an answer is not the one the path expects.
func (g *Gateway) Drive(t testing.TB) {
	t.Helper()
	expect := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("answer %s, want %s", got, want)
		}
	}
	for range 3 {
		expect(g.Source(t, "triage", ticket), "model/primary/false")
	}
	expect(g.Source(t, "moderation", `{"text": "hello"}`), "model/primary/false")

	// The primary answers prose: a contract violation, its re-ask, then the backup.
	g.Fault(t, "primary", `{"mode": "malformed"}`)
	expect(g.Source(t, "triage", ticket), "model/backup/true")

	// The primary fails: retried, then its breaker opens after two failed calls.
	g.Fault(t, "primary", `{"mode": "unavailable", "status": 503}`)
	for range 3 {
		expect(g.Source(t, "triage", ticket), "model/backup/true")
	}
	// Both down: the heuristic, and a review item.
	g.Fault(t, "backup", `{"mode": "unavailable", "status": 503}`)
	expect(g.Source(t, "triage", ticket), "heuristic//true")
	expect(g.Source(t, "moderation", `{"text": "buy cheap watches"}`), "human//true")
	g.Fault(t, "primary", "")
	g.Fault(t, "backup", "")
	for _, p := range []string{"primary", "backup"} {
		g.must(t, http.StatusOK, "PUT", "/admin/breakers/"+p, AdminToken, `{"state": "closed"}`)
	}
	var page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(g.must(t, http.StatusOK, "GET", "/admin/reviews?status=pending", AdminToken, ""), &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("pending reviews %+v, %v; want the one item", page, err)
	}
	g.must(t, http.StatusOK, "POST", "/admin/reviews/"+page.Items[0].ID+"/resolve", AdminToken, `{"result": {"allowed": false}}`)

	// The chat route: an answer; a stream cut after its first chunk, continued by the backup.
	chat := `{"model": "support", "messages": [{"role": "user", "content": "Where is my order?"}]}`
	g.must(t, http.StatusOK, "POST", "/v1/chat/completions", ClientKey, chat)
	g.Fault(t, "primary", `{"mode": "stream_cut", "after_chunks": 1}`)
	stream := `{"model": "support", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "Where is my order?"}]}`
	if b := g.must(t, http.StatusOK, "POST", "/v1/chat/completions", ClientKey, stream); !bytes.Contains(b, []byte("continued_by")) {
		t.Fatalf("the cut stream was not continued: %s", b)
	}
	g.Fault(t, "primary", "")

	// A passing drill.
	now := time.Now().UTC()
	drill := fmt.Sprintf(`{"scope": "task:triage", "provider": "primary", "mode": "unavailable", "passed": true, "started_at": %q, "finished_at": %q}`,
		now.Add(-time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	g.must(t, http.StatusOK, "POST", "/admin/drills", AdminToken, drill)
	// A drill kept for a task this config does not have (dropped since, or another
	// replica's): the admin API refuses it, and the store may still hold one.
	if err := g.Runtime.State.SaveDrill(context.Background(), state.Drill{Scope: "task:" + Unknown[0], Provider: "primary",
		Mode: "unavailable", Passed: true, StartedAt: now.Add(-time.Minute), FinishedAt: now}); err != nil {
		t.Fatal(err)
	}

	// What does not exist is answered 404, and counted nowhere.
	g.must(t, http.StatusNotFound, "POST", "/v1/tasks/"+Unknown[0], ClientKey, `{"input": {"message": "hi"}}`)
	g.must(t, http.StatusNotFound, "POST", "/v1/chat/completions", ClientKey,
		`{"model": "`+Unknown[1]+`", "messages": [{"role": "user", "content": "hi"}]}`)
	g.must(t, http.StatusNotFound, "GET", "/v1/models/"+Unknown[1], ClientKey, "")
	g.must(t, http.StatusNotFound, "GET", "/v1/reviews/"+Unknown[0], ClientKey, "")
}

// Text returns the body of GET /metrics.
func (g *Gateway) Text(t testing.TB) []byte {
	t.Helper()
	return g.must(t, http.StatusOK, "GET", "/metrics", "", "")
}

// Families parses GET /metrics by metric name.
func (g *Gateway) Families(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := Parse(g.Text(t))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Parse reads a scrape in Prometheus's text format, by metric name.
func Parse(text []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(bytes.NewReader(text))
}

// Afloat returns the names of afloat's own metric families (afloat_*), sorted.
func Afloat(fams map[string]*dto.MetricFamily) []string {
	var names []string
	for name := range fams {
		if strings.HasPrefix(name, "afloat_") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
