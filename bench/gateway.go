package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
)

// adminToken opens each benchmark gateway's admin API.
const adminToken = "bench-admin-token-0123456789"

// triageSchema and triagePrompt are the triage task's contract and its one prompt, as in
// examples/.
const (
	triageSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
  },
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false
}`
	triagePrompt = `--- system
You triage customer support tickets. Answer with one JSON object and nothing else:
{"department": "technical" | "billing" | "sales" | "other" | null, "is_urgent": number 0..1, "urgency_score": number 0..3}
--- user
Subject: {{.subject}}
Message: {{.message}}
`
)

// gwConfig is the part of a gateway config a scenario chooses; yaml writes the whole file.
type gwConfig struct {
	// Providers are openai providers over mocks, in cascade order.
	Providers []gwProvider
	// Defaults is the body of the defaults block, one "key: value" a line ("" for none).
	Defaults []string
	// State is the state block as a flow mapping; "" means local (afloat.db in the temp dir).
	State string
	// Routes are chat routes over every provider, in order.
	Routes []gwRoute
	// TaskBudget, when set, adds the triage task (enrichment, heuristic rules) over every
	// provider, in order; Critical adds the moderation task too (critical, on_exhausted:
	// block) with the same budget, contract and tiers.
	TaskBudget time.Duration
	Critical   bool
	// TaskExtra is more keys of the tasks (", hedge: {after: p95}"), a line each indented.
	TaskExtra string
	// Server is more keys of the server block's flow mapping (", shed_latency: 20ms").
	Server string
}

type gwProvider struct {
	Name string
	URL  string // the mock's base URL, without /v1
	// Extra is more keys of the provider's flow mapping (", max_in_flight: 4096").
	Extra string
}

type gwRoute struct {
	Name   string
	Budget time.Duration
	// Tiers are provider names; nil means every provider.
	Tiers []string
	// Extra is more keys of the route's flow mapping (", hedge: {after: p95}").
	Extra string
}

func (c gwConfig) yaml() string {
	var b strings.Builder
	// access_log off: the bare proxy it is compared with logs nothing either.
	fmt.Fprintf(&b, "server: {admin_token: %s, access_log: off, log_level: error%s}\n", adminToken, c.Server)
	if c.State != "" {
		fmt.Fprintf(&b, "state: %s\n", c.State)
	}
	if len(c.Defaults) > 0 {
		b.WriteString("defaults:\n")
		for _, d := range c.Defaults {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	b.WriteString("providers:\n")
	var names []string
	for _, p := range c.Providers {
		// probe: off: no background GET /models, so the mocks count user calls only.
		fmt.Fprintf(&b, "  %s: {type: openai, base_url: %q, model: mock-%s, probe: off%s}\n", p.Name, p.URL+"/v1", p.Name, p.Extra)
		names = append(names, p.Name)
	}
	if c.TaskBudget > 0 {
		b.WriteString("tasks:\n")
		task := func(name, criticality, tail string) {
			fmt.Fprintf(&b, `  %s:
    criticality: %s
    budget: %s
    input: {subject: {type: string}, message: {type: string}}
    schema: schemas/triage.json
%s    cascade:
`, name, criticality, c.TaskBudget, c.TaskExtra)
			for _, p := range names {
				fmt.Fprintf(&b, "      - {provider: %s, prompt: prompts/triage.v1.tmpl}\n", p)
			}
			b.WriteString(tail)
		}
		task("triage", "enrichment", `    heuristic:
      - {when_any: ["urgente", "не работает", "down"], set: {is_urgent: 0.8, urgency_score: 2.0}}
      - {default: {is_urgent: 0.2, urgency_score: 0.5, department: null}}
`)
		if c.Critical {
			task("moderation", "critical", "    on_exhausted: block\n")
		}
	}
	if len(c.Routes) > 0 {
		b.WriteString("routes:\n")
		for _, r := range c.Routes {
			tiers := r.Tiers
			if tiers == nil {
				tiers = names
			}
			fmt.Fprintf(&b, "  %s: {criticality: assistance, budget: %s, cascade: [%s]%s}\n", r.Name, r.Budget, strings.Join(tiers, ", "), r.Extra)
		}
	}
	return b.String()
}

// instance is one afloat gateway, as `afloat serve` assembles it, serving on a free loopback
// port: built in this process (rt is set), or in a process of its own (proc is set).
type instance struct {
	URL  string
	rt   *config.Runtime
	srv  *http.Server
	proc *child
	dir  string
}

// startGateway writes the config and the triage files to a temporary folder and serves the
// gateway from it in this process.
func startGateway(c gwConfig) (*instance, error) {
	dir, err := writeGatewayDir(c)
	if err != nil {
		return nil, err
	}
	g, err := serveGateway(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("gateway config:\n%s\n%w", c.yaml(), err)
	}
	return g, nil
}

// startGatewayProcess is startGateway in a process of its own (bench -serve gateway DIR),
// with env added to its environment ("GOMAXPROCS=1").
func startGatewayProcess(c gwConfig, env ...string) (*instance, error) {
	dir, err := writeGatewayDir(c)
	if err != nil {
		return nil, err
	}
	proc, err := startChild("gateway", dir, env...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("gateway config:\n%s\n%w", c.yaml(), err)
	}
	return &instance{URL: proc.URL, proc: proc, dir: dir}, nil
}

// writeGatewayDir writes a gateway's config and files to a new temporary folder.
func writeGatewayDir(c gwConfig) (string, error) {
	dir, err := os.MkdirTemp("", "afloat-bench-")
	if err != nil {
		return "", err
	}
	files := map[string]string{"schemas/triage.json": triageSchema, "prompts/triage.v1.tmpl": triagePrompt, "afloat.yaml": c.yaml()}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// serveGateway builds the runtime from dir/afloat.yaml and serves the gateway on
// 127.0.0.1:0 in this process.
func serveGateway(dir string) (*instance, error) {
	f, err := config.Load(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.DiscardHandler)
	rt, err := f.Build(config.BuildOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	// The assembly of cmd/afloat/serve.go, with no tenants (open access on loopback).
	gw, err := gateway.New(gateway.Config{
		Engine: rt.Engine, Tasks: rt.Tasks, Routes: rt.Routes, Faults: rt.Faults, Flags: rt.State, State: rt.State,
		StateRequired: f.State.OnFailure == "fail", DrillMaxAge: f.Drill.MaxAge,
		Review: rt.Review, AdminToken: f.Server.AdminToken, MaxBody: int64(f.Server.MaxBody),
		Gatherer: rt.Registry, Logger: log, AccessLog: f.Server.AccessLog,
	})
	if err != nil {
		_ = rt.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = rt.Close()
		return nil, err
	}
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	return &instance{URL: "http://" + ln.Addr().String(), rt: rt, srv: srv, dir: dir}, nil
}

// Close stops the gateway, closes its runtime and removes its folder.
func (g *instance) Close() {
	if g.proc != nil {
		g.proc.Close()
	} else {
		_ = g.srv.Close()
		_ = g.rt.Close()
	}
	_ = os.RemoveAll(g.dir)
}

// metrics is what the gateway's /metrics says: its registry in this process, or a scrape.
func (g *instance) metrics() prometheus.Gatherer {
	if g.rt != nil {
		return g.rt.Registry
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		resp, err := http.Get(g.URL + "/metrics")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		fams, err := parseMetrics(resp.Body)
		if err != nil {
			return nil, err
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, f := range fams {
			out = append(out, f)
		}
		return out, nil
	})
}

// Breaker returns the state of a provider's breaker now.
func (g *instance) Breaker(provider string) breaker.Snapshot {
	return g.rt.Engine.Breaker(provider).Snapshot(context.Background())
}

// Opened is how many times the provider's breaker opened (afloat_circuit_opened_total).
func (g *instance) Opened(provider string) int {
	n := 0
	for _, v := range counters(g.metrics(), "afloat_circuit_opened_total", provider, "provider") {
		n += int(v)
	}
	return n
}

// Attempts is the provider's afloat_attempts_total by outcome.
func (g *instance) Attempts(provider string) map[string]int {
	out := map[string]int{}
	for k, v := range counters(g.metrics(), "afloat_attempts_total", provider, "outcome") {
		out[k] += int(v)
	}
	return out
}

// counters sums a counter's series of one provider by the value of the label by.
func counters(reg prometheus.Gatherer, name, provider, by string) map[string]float64 {
	out := map[string]float64{}
	fams, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider {
				out[labels[by]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// ForceOpen opens a provider's breaker through the admin API.
func (g *instance) ForceOpen(c *http.Client, provider string) error {
	req, _ := http.NewRequest(http.MethodPut, g.URL+"/admin/breakers/"+provider, strings.NewReader(`{"state":"open"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /admin/breakers/%s: status %d", provider, resp.StatusCode)
	}
	return nil
}

// breakerWatch polls a provider's breaker and keeps the first time it was seen to open (the
// breaker's own transition time).
type breakerWatch struct {
	done   chan struct{}
	result chan time.Time
}

func watchBreaker(g *instance, provider string, every time.Duration) *breakerWatch {
	w := &breakerWatch{done: make(chan struct{}), result: make(chan time.Time, 1)}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if s := g.Breaker(provider); s.State == breaker.StateOpen {
				w.result <- s.Since
				return
			}
			select {
			case <-t.C:
			case <-w.done:
				w.result <- time.Time{}
				return
			}
		}
	}()
	return w
}

// Opened stops the watch and returns when the breaker first opened; zero when it did not.
func (w *breakerWatch) Opened() time.Time {
	close(w.done)
	return <-w.result
}

// startProxy serves a bare httputil.ReverseProxy to target on a free loopback port. Its
// transport keeps as many idle connections per host as afloat's providers do (64): the
// default of 2 would make the proxy dial for nearly every request under load. It reads each
// request's body whole before proxying it, as afloat does: net/http's server closes a
// request's body once the handler writes its answer's headers, and its transport reads the
// body once more after sending it (to check it is not longer than declared), so a mock fast
// enough to answer before that read makes the transport drop the upstream connection and cut
// the answer it is relaying (golang/go#40747; the proxy logged "read error during body copy:
// use of closed network connection" and 1 % of its streams ended in "unexpected EOF").
func startProxy(target string) (string, func(), error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, Transport: tr}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); tr.CloseIdleConnections() }, nil
}

// newClient is the load generator's HTTP client: keep-alive connections, as many idle
// ones as conns, no overall timeout (each run's context bounds its requests).
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
		DisableCompression: true, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
}

// errBody says an answer was not the one the scenario expects.
var errBody = errors.New("unexpected answer")
