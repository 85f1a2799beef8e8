package main

// End-to-end scenarios of the attempt core (shared/DESIGN.md §2): a live `afloat serve`, run
// in process by run() on a loopback port with a config written to t.TempDir(), calls local
// mock upstreams that speak OpenAI's chat completions wire format, over real HTTP and on real
// timers. The mocks' latency is the scenario; the tests wait for no state by sleeping, and
// their bounds are orders of magnitude, not milliseconds.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scenarioAdmin is the admin token of the scenarios' gateways: a test value, no credential.
const scenarioAdmin = "adm-scenario-test-3f9a"

// ---- mock upstream ----

// chatMessage is one message of a chat completions request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatCall is what a mock upstream received: the request's model and messages.
type chatCall struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
}

// firstUser returns the content of the call's first user message.
func (c chatCall) firstUser() string {
	for _, m := range c.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// lastUser returns the content of the call's last user message.
func (c chatCall) lastUser() string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" {
			return c.Messages[i].Content
		}
	}
	return ""
}

// has reports whether the call holds a message of role.
func (c chatCall) has(role string) bool {
	return slices.ContainsFunc(c.Messages, func(m chatMessage) bool { return m.Role == role })
}

// upstreamReply is how a mock answers one call.
type upstreamReply struct {
	delay   time.Duration   // before answering; the caller hanging up ends the wait
	gate    <-chan struct{} // when set, also wait for it to close (bounded by gateMax)
	status  int             // 0 means 200
	content string
	finish  string // "" means stop
}

// gateMax bounds a mock's wait on a gate: a guard against a hang, never a wait for a state.
const gateMax = 2 * time.Second

// mockUpstream is a local OpenAI-compatible chat completions server. reply decides each
// answer from the call's number (from 1) and its body.
type mockUpstream struct {
	*httptest.Server
	reply       func(n int, c chatCall) upstreamReply
	hits        atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu    sync.Mutex
	calls []chatCall
}

// newMock starts a mock upstream on 127.0.0.1; it is closed when the test ends, after the
// gateway (cleanups run last-in first-out, and the gateway is started after its mocks).
func newMock(t *testing.T, reply func(n int, c chatCall) upstreamReply) *mockUpstream {
	t.Helper()
	m := &mockUpstream{reply: reply}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *mockUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var c chatCall
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	n := int(m.hits.Add(1))
	cur := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for {
		old := m.maxInFlight.Load()
		if cur <= old || m.maxInFlight.CompareAndSwap(old, cur) {
			break
		}
	}
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()

	rep := m.reply(n, c)
	if rep.delay > 0 {
		timer := time.NewTimer(rep.delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		}
	}
	if rep.gate != nil {
		guard := time.NewTimer(gateMax)
		defer guard.Stop()
		select {
		case <-rep.gate:
		case <-guard.C:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.status != 0 && rep.status != http.StatusOK {
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"error":{"message":"mock failure %d","type":"server_error"}}`, rep.status)
		return
	}
	finish := rep.finish
	if finish == "" {
		finish = "stop"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-mock", "object": "chat.completion", "created": 1, "model": c.Model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": finish,
			"message": map[string]any{"role": "assistant", "content": rep.content},
		}},
		"usage": map[string]any{"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
	})
}

// received returns a copy of the calls the mock received.
func (m *mockUpstream) received() []chatCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// jitter returns a duration drawn uniformly from [lo, hi].
func jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

// validTriage is a valid triage answer.
const validTriage = `{"department": "technical", "is_urgent": 0.9, "urgency_score": 2.5}`

// ---- live gateway ----

// liveServe is a running `afloat serve`.
type liveServe struct {
	t      *testing.T
	base   string
	client *http.Client
	logs   *syncWriter
}

// triageFiles are the triage schema and prompt of examples/, copied for each provider named.
func triageFiles(t *testing.T, providers ...string) map[string]string {
	t.Helper()
	schema, err := os.ReadFile("../../examples/schemas/triage.json")
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := os.ReadFile("../../examples/prompts/triage/sim-primary.v3.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"schemas/triage.json": string(schema)}
	for _, p := range providers {
		files["prompts/triage/"+p+".v1.tmpl"] = string(prompt)
	}
	return files
}

// triageConfig is a gateway config with one enrichment triage task (heuristic rules as its
// policy) whose cascade is order; urls maps each provider to its mock, and extra to more keys
// of its YAML flow mapping (", timeouts: {min: 20ms}"). No breaker of it probes during a
// test: recovery is 5m.
func triageConfig(budget string, order []string, urls map[string]string, extra map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  admin_token: %s\n", scenarioAdmin)
	b.WriteString("defaults:\n  breaker: {recovery: 5m}\n")
	b.WriteString("providers:\n")
	for _, p := range order {
		fmt.Fprintf(&b, "  %s: {type: openai, base_url: %q, model: mock-%s%s}\n", p, urls[p]+"/v1", p, extra[p])
	}
	fmt.Fprintf(&b, `tasks:
  triage:
    criticality: enrichment
    budget: %s
    input: {subject: {type: string}, message: {type: string}}
    schema: schemas/triage.json
    cascade:
`, budget)
	for _, p := range order {
		fmt.Fprintf(&b, "      - {provider: %s, prompt: prompts/triage/%s.v1.tmpl}\n", p, p)
	}
	b.WriteString(`    heuristic:
      - {when_any: ["urgente", "не работает"], set: {is_urgent: 0.8, urgency_score: 2.0}}
      - {default: {is_urgent: 0.2, urgency_score: 0.5, department: null}}
`)
	return b.String()
}

// startServe writes the config and its triage files to a temporary folder and runs `afloat
// serve` on it, in process, on a free loopback port; it returns once /healthz answers. The
// gateway stops when the test ends.
func startServe(t *testing.T, yaml string, providers ...string) *liveServe {
	t.Helper()
	path := writeConfig(t, yaml, triageFiles(t, providers...))
	pr, pw := io.Pipe()
	stdout := &syncWriter{w: pw}
	stderr := &syncWriter{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-c", path, "-listen", "127.0.0.1:0", "-grace", "5s"}, stdout, stderr)
		pw.Close()
	}()
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(pr)
		l, _ := br.ReadString('\n')
		lines <- l
		_, _ = io.Copy(io.Discard, br)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("afloat serve did not listen within 30s; stderr:\n%s", stderr.String())
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "afloat listening on ")
	if !ok {
		cancel()
		t.Fatalf("afloat serve printed %q; stderr:\n%s", line, stderr.String())
	}
	g := &liveServe{t: t, base: base, logs: stderr, client: &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
	}}
	t.Cleanup(func() {
		// Close the client's idle connections first: a connection the transport dialed but
		// never sent a request on (it lost a race to a connection freed meanwhile) is new to
		// the server, and http.Server.Shutdown waits 5s before it counts such a one as idle.
		g.client.CloseIdleConnections()
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("afloat serve exited %d; stderr:\n%s", code, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Error("afloat serve did not stop within 15s")
		}
	})
	g.waitHealthy()
	return g
}

// waitHealthy polls /healthz in a bounded loop.
func (g *liveServe) waitHealthy() {
	g.t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last error
	for range 500 {
		resp, err := g.client.Get(g.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		<-tick.C
	}
	g.t.Fatalf("/healthz never answered 200: %v; stderr:\n%s", last, g.logs.String())
}

// do sends one request and returns the status and body; it is safe to call from several
// goroutines.
func (g *liveServe) do(method, path, token, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, g.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// attemptJSON is one attempt of an envelope.
type attemptJSON struct {
	Provider  string `json:"provider"`
	Outcome   string `json:"outcome"`
	LatencyMS int64  `json:"latency_ms"`
	Reask     bool   `json:"reask"`
}

// envelope is the part of a task's answer the scenarios read.
type envelope struct {
	Result    map[string]any `json:"result"`
	Source    string         `json:"source"`
	Degraded  bool           `json:"degraded"`
	Reason    *string        `json:"reason"`
	Provider  *string        `json:"provider"`
	Attempts  []attemptJSON  `json:"attempts"`
	LatencyMS int64          `json:"latency_ms"`
}

func (e envelope) provider() string {
	if e.Provider == nil {
		return ""
	}
	return *e.Provider
}

func (e envelope) reason() string {
	if e.Reason == nil {
		return ""
	}
	return *e.Reason
}

// String is a short line of the envelope for failure messages.
func (e envelope) String() string {
	var at []string
	for _, a := range e.Attempts {
		s := fmt.Sprintf("%s:%s:%dms", a.Provider, a.Outcome, a.LatencyMS)
		if a.Reask {
			s += ":reask"
		}
		at = append(at, s)
	}
	return fmt.Sprintf("source=%s provider=%s degraded=%v reason=%s latency=%dms attempts=[%s]",
		e.Source, e.provider(), e.Degraded, e.reason(), e.LatencyMS, strings.Join(at, " "))
}

// triage calls the triage task with a subject and message; it is safe to call from several
// goroutines.
func (g *liveServe) triage(subject, message string) (envelope, error) {
	body, _ := json.Marshal(map[string]any{"input": map[string]any{"subject": subject, "message": message}})
	status, b, err := g.do("POST", "/v1/tasks/triage", "", string(body))
	if err != nil {
		return envelope{}, err
	}
	if status != http.StatusOK {
		return envelope{}, fmt.Errorf("POST /v1/tasks/triage: %d %s", status, b)
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return envelope{}, fmt.Errorf("envelope %s: %w", b, err)
	}
	return env, nil
}

// mustTriage is triage on the test's goroutine.
func (g *liveServe) mustTriage(subject, message string) envelope {
	g.t.Helper()
	env, err := g.triage(subject, message)
	if err != nil {
		g.t.Fatalf("%v; stderr:\n%s", err, g.logs.String())
	}
	return env
}

// failedAttempt is an "attempt failed" line of the gateway's log: the envelope leaves the
// attempts' error texts out (they are the operators' business), the log of a degraded call
// has them.
type failedAttempt struct {
	Provider string `json:"provider"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error"`
}

// failedAttempts returns the failed attempts the gateway has logged, of provider.
func (g *liveServe) failedAttempts(provider string) []failedAttempt {
	var out []failedAttempt
	for _, line := range strings.Split(g.logs.String(), "\n") {
		var l struct {
			Msg string `json:"msg"`
			failedAttempt
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "attempt failed" && l.Provider == provider {
			out = append(out, l.failedAttempt)
		}
	}
	return out
}

// providerState is a provider in /admin/status.
type providerState struct {
	Breaker  string `json:"breaker"`
	InFlight int    `json:"in_flight"`
	Tasks    map[string]struct {
		P95MS         *int64 `json:"p95_ms"`
		ReadTimeoutMS int64  `json:"read_timeout_ms"`
	} `json:"tasks"`
}

// status reads the providers of /admin/status.
func (g *liveServe) status() map[string]providerState {
	g.t.Helper()
	code, b, err := g.do("GET", "/admin/status", scenarioAdmin, "")
	if err != nil || code != http.StatusOK {
		g.t.Fatalf("GET /admin/status: %d %s %v", code, b, err)
	}
	var doc struct {
		Providers map[string]providerState `json:"providers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		g.t.Fatalf("status %s: %v", b, err)
	}
	return doc.Providers
}

// metric reads the value of the series of name whose labels include want from /metrics;
// it fails the test when no such series is exported.
func (g *liveServe) metric(name string, want map[string]string) float64 {
	g.t.Helper()
	code, b, err := g.do("GET", "/metrics", "", "")
	if err != nil || code != http.StatusOK {
		g.t.Fatalf("GET /metrics: %d %v", code, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		got := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = strings.Trim(v, `"`)
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if match {
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				g.t.Fatalf("metric line %q: %v", line, err)
			}
			return f
		}
	}
	g.t.Fatalf("/metrics has no %s%v", name, want)
	return 0
}

// percentile returns the q-quantile (nearest rank) of xs.
func percentile(xs []int64, q float64) int64 {
	s := slices.Clone(xs)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ---- scenarios ----

// TestServeBudgetSqueeze: p0 fails (HTTP 500) after 0.8 of the budget, which leaves the
// backup p1 (answering after 0.47 of it) too little. p1's attempts in those calls are cut by
// what p0 left of the budget: outcome deadline, never a failure of p1, so p1's breaker stays
// closed while p0's opens; from then on p1 has the whole budget and answers every call.
func TestServeBudgetSqueeze(t *testing.T) {
	const (
		budget = 300 * time.Millisecond
		calls  = 30
	)
	p0 := newMock(t, func(int, chatCall) upstreamReply {
		return upstreamReply{delay: budget * 8 / 10, status: http.StatusInternalServerError}
	})
	p1 := newMock(t, func(int, chatCall) upstreamReply {
		return upstreamReply{delay: jitter(budget*45/100, budget*49/100), content: validTriage}
	})
	// p1's shortest read timeout is low, so that before it is measured the tier is started
	// with what p0 left (about 0.2 of the budget) and is cut by the budget, rather than
	// skipped: the cut is what must not move p1's breaker.
	cfg := triageConfig(budget.String(), []string{"p0", "p1"},
		map[string]string{"p0": p0.URL, "p1": p1.URL},
		map[string]string{"p1": ", timeouts: {min: 20ms}"})
	g := startServe(t, cfg, "p0", "p1")

	var envs []envelope
	fromP1, p1Deadline, p1Started := 0, 0, 0
	for i := range calls {
		env := g.mustTriage("Invoice", fmt.Sprintf("I was charged twice, call %d", i))
		envs = append(envs, env)
		t.Logf("call %2d: %v", i, env)
		if env.Source == "model" && env.provider() == "p1" {
			fromP1++
		}
		for _, a := range env.Attempts {
			if a.Provider != "p1" {
				continue
			}
			switch a.Outcome {
			case "ok":
			case "deadline":
				p1Deadline++
				if a.LatencyMS > 0 {
					p1Started++
				}
			default:
				t.Errorf("call %d: p1 attempt %s: only ok or deadline may happen to the backup here", i, a.Outcome)
			}
		}
		if env.LatencyMS > 3*budget.Milliseconds() {
			t.Errorf("call %d took %dms, budget %v", i, env.LatencyMS, budget)
		}
	}
	cutByBudget := 0
	for _, a := range g.failedAttempts("p1") {
		if a.Outcome != "deadline" || a.Error != "cut by the call's budget" {
			t.Errorf("logged p1 attempt %+v, want deadline, cut by the call's budget", a)
		}
		cutByBudget++
	}
	share := float64(fromP1) / calls
	t.Logf("answered by p1: %d/%d (%.0f%%); p1 deadline attempts %d (started and cut %d, logged as cut by the call's budget %d); mock hits p0=%d p1=%d",
		fromP1, calls, 100*share, p1Deadline, p1Started, cutByBudget, p0.hits.Load(), p1.hits.Load())
	if share < 0.8 {
		t.Errorf("p1 answered %.0f%% of the calls, want ≥ 80%%", 100*share)
	}
	for i, env := range envs[calls-15:] {
		if env.Source != "model" || env.provider() != "p1" || !env.Degraded {
			t.Errorf("call %d of the last 15: %v, want a degraded model answer from p1", i, env)
		}
	}
	if p1Started == 0 || cutByBudget != p1Deadline {
		t.Errorf("p1 attempts started and cut %d, logged as cut by the call's budget %d, of %d deadline attempts: the squeeze did not happen as planned",
			p1Started, cutByBudget, p1Deadline)
	}
	if n := g.metric("afloat_attempts_total", map[string]string{"task": "triage", "provider": "p1", "outcome": "deadline"}); int(n) != p1Deadline {
		t.Errorf("afloat_attempts_total{p1,deadline} = %v, want %d", n, p1Deadline)
	}
	st := g.status()
	if st["p1"].Breaker != "closed" {
		t.Errorf("p1's breaker is %q, want closed", st["p1"].Breaker)
	}
	if st["p0"].Breaker != "open" {
		t.Errorf("p0's breaker is %q, want open", st["p0"].Breaker)
	}
	if n := g.metric("afloat_circuit_opened_total", map[string]string{"provider": "p1"}); n != 0 {
		t.Errorf("afloat_circuit_opened_total{provider=p1} = %v, want 0", n)
	}
	if n := g.metric("afloat_circuit_opened_total", map[string]string{"provider": "p0"}); n < 1 {
		t.Errorf("afloat_circuit_opened_total{provider=p0} = %v, want ≥ 1", n)
	}
}

// TestServeBrownout: p0 answers in 40–60ms until it has warmed up its estimate, then takes
// 10s. Each of its attempts is cut at its read timeout (about 1.5 × its healthy p95), far
// below the call's budget; p1 answers each call; p0's breaker opens within a few calls and
// after that p0 is skipped at once.
func TestServeBrownout(t *testing.T) {
	const (
		budget  = 2 * time.Second
		healthy = 30 // ≥ timeouts.min_samples (20) + margin
		brown   = 12
	)
	var slow atomic.Bool
	p0 := newMock(t, func(int, chatCall) upstreamReply {
		if slow.Load() {
			return upstreamReply{delay: 10 * time.Second, content: validTriage}
		}
		return upstreamReply{delay: jitter(40*time.Millisecond, 60*time.Millisecond), content: validTriage}
	})
	p1 := newMock(t, func(int, chatCall) upstreamReply {
		return upstreamReply{delay: jitter(130*time.Millisecond, 170*time.Millisecond), content: validTriage}
	})
	cfg := triageConfig(budget.String(), []string{"p0", "p1"},
		map[string]string{"p0": p0.URL, "p1": p1.URL},
		map[string]string{"p0": ", timeouts: {min: 20ms}"})
	g := startServe(t, cfg, "p0", "p1")

	var healthyLat []int64
	fromP0 := 0
	for i := range healthy {
		env := g.mustTriage("Login", fmt.Sprintf("cannot log in, call %d", i))
		if env.Source == "model" && env.provider() == "p0" {
			fromP0++
			healthyLat = append(healthyLat, env.Attempts[0].LatencyMS)
		}
	}
	if fromP0 < healthy-3 || len(healthyLat) < 20 {
		t.Fatalf("healthy p0 answered %d/%d calls", fromP0, healthy)
	}
	st := g.status()
	p95 := st["p0"].Tasks["triage"].P95MS
	if p95 == nil {
		t.Fatalf("p0's latency is not measured after %d answers: %+v", fromP0, st["p0"])
	}
	healthyP95 := percentile(healthyLat, 0.95)
	t.Logf("healthy p0: %d/%d answers, envelope p95 %dms, gateway p95 %dms, read timeout %dms",
		fromP0, healthy, healthyP95, *p95, st["p0"].Tasks["triage"].ReadTimeoutMS)

	slow.Store(true)
	openedAfter := 0
	var cutLat []int64
	for i := 1; i <= brown; i++ {
		env := g.mustTriage("Login", fmt.Sprintf("cannot log in, brownout call %d", i))
		t.Logf("brownout call %2d: %v", i, env)
		if env.Source != "model" || env.provider() != "p1" || !env.Degraded {
			t.Errorf("brownout call %d: %v, want a degraded answer from p1", i, env)
		}
		if env.LatencyMS > budget.Milliseconds()/2 {
			t.Errorf("brownout call %d took %dms, want well within the %v budget", i, env.LatencyMS, budget)
		}
		if len(env.Attempts) == 0 || env.Attempts[0].Provider != "p0" {
			t.Fatalf("brownout call %d: no p0 attempt first: %v", i, env)
		}
		a := env.Attempts[0]
		switch {
		case openedAfter == 0:
			if a.Outcome != "timeout" {
				t.Errorf("brownout call %d: p0 attempt %s, want timeout", i, a.Outcome)
			}
			cutLat = append(cutLat, a.LatencyMS)
			if a.LatencyMS > 3*healthyP95 || a.LatencyMS > budget.Milliseconds()/4 {
				t.Errorf("brownout call %d: p0 waited %dms, want ≤ 3 × its healthy p95 (%dms) and far below the budget", i, a.LatencyMS, healthyP95)
			}
			if g.status()["p0"].Breaker == "open" {
				openedAfter = i
			}
		default:
			if a.Outcome != "circuit_open" || a.LatencyMS != 0 {
				t.Errorf("brownout call %d, after p0's breaker opened: p0 attempt %s in %dms, want circuit_open in 0ms", i, a.Outcome, a.LatencyMS)
			}
			if env.reason() != "circuit_open" {
				t.Errorf("brownout call %d: reason %q, want circuit_open", i, env.reason())
			}
		}
	}
	t.Logf("p0's breaker opened after %d brownout calls; p0 cut after %v ms", openedAfter, cutLat)
	if openedAfter == 0 || openedAfter > 6 {
		t.Errorf("p0's breaker opened after %d brownout calls (0: never), want 1–6", openedAfter)
	}
}

// TestServeNoSpillUnderDefaults: 128 concurrent clients over a fast primary (about 5ms) never
// fill the default bulkhead: no call reaches the backup.
func TestServeNoSpillUnderDefaults(t *testing.T) {
	const clients, each = 128, 4
	primary := newMock(t, func(int, chatCall) upstreamReply {
		return upstreamReply{delay: jitter(4*time.Millisecond, 6*time.Millisecond), content: validTriage}
	})
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	// The primary's shortest read timeout is raised from 200ms to 1s, and only that: under
	// -race on two cores the gateway, the mocks and 128 clients share one CPU-bound process,
	// and a 5ms upstream measures up to ~200ms inside it. This test is about the bulkhead's
	// default, not the read timeout.
	cfg := triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL},
		map[string]string{"primary": ", timeouts: {min: 1s}"})
	g := startServe(t, noShedding(cfg), "primary", "backup")

	envs, errs := burst(g, clients, each)
	for _, err := range errs {
		t.Error(err)
	}
	bad := 0
	var lat, primaryLat []int64
	for _, env := range envs {
		lat = append(lat, env.LatencyMS)
		if len(env.Attempts) > 0 {
			primaryLat = append(primaryLat, env.Attempts[0].LatencyMS)
		}
		if env.Source != "model" || env.provider() != "primary" || len(env.Attempts) != 1 {
			if bad++; bad <= 5 {
				t.Errorf("answer not from the primary alone: %v", env)
			}
		}
	}
	if len(envs) == 0 {
		t.Fatal("no answers")
	}
	st := g.status()["primary"]
	t.Logf("%d calls: primary hits %d, backup hits %d, primary max in flight %d, not from the primary %d; call latency p50 %dms p99 %dms; primary attempt p50 %dms max %dms; primary read timeout now %dms",
		len(envs), primary.hits.Load(), backup.hits.Load(), primary.maxInFlight.Load(), bad, percentile(lat, 0.5), percentile(lat, 0.99),
		percentile(primaryLat, 0.5), slices.Max(primaryLat), st.Tasks["triage"].ReadTimeoutMS)
	if n := backup.hits.Load(); n != 0 {
		t.Errorf("the backup was called %d times, want 0", n)
	}
	if n := primary.hits.Load(); n != clients*each {
		t.Errorf("the primary was called %d times, want %d", n, clients*each)
	}
}

// TestServeSpillOverMaxInFlight: with providers.primary.max_in_flight 8 the same burst spills:
// the calls beyond 8 in flight and the 8 its queue holds skip the primary at once (outcome
// bulkhead) and the backup answers; the primary never sees more than 8 calls at once.
func TestServeSpillOverMaxInFlight(t *testing.T) {
	const clients, each, limit = 128, 2, 8
	// The first calls at the primary hold until the backup has answered one call, so that
	// the burst surely finds the bulkhead full (bounded by gateMax).
	spilled := make(chan struct{})
	var once sync.Once
	primary := newMock(t, func(n int, _ chatCall) upstreamReply {
		rep := upstreamReply{delay: jitter(4*time.Millisecond, 6*time.Millisecond), content: validTriage}
		if n <= limit {
			rep.gate = spilled
		}
		return rep
	})
	backup := newMock(t, func(int, chatCall) upstreamReply {
		once.Do(func() { close(spilled) })
		return upstreamReply{content: validTriage}
	})
	// A budget of 5 s: the held calls are cut at the budget minus the backup's reserve (its
	// 2 s read timeout), and at 3 s a CI machine running the whole suite took over a second to
	// bring the burst's first spill to the backup, so that three held calls were cut first.
	cfg := triageConfig("5s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL},
		// The backup takes the spill of a 128-call burst at once: its read timeout must not
		// fall to the 200 ms floor under a loaded test machine (what is tested is the primary's
		// bulkhead, not the backup's speed).
		map[string]string{"primary": fmt.Sprintf(", max_in_flight: %d", limit), "backup": ", timeouts: {min: 2s, initial: 2s}"})
	g := startServe(t, noShedding(cfg), "primary", "backup")

	envs, errs := burst(g, clients, each)
	for _, err := range errs {
		t.Error(err)
	}
	fromBackup, bulkhead := 0, 0
	for _, env := range envs {
		if env.Source != "model" {
			t.Errorf("answer %v, want a model's", env)
			continue
		}
		if env.provider() == "backup" {
			fromBackup++
			if len(env.Attempts) != 2 || env.Attempts[0].Provider != "primary" || env.Attempts[0].Outcome != "bulkhead" ||
				env.Attempts[0].LatencyMS != 0 || !env.Degraded || env.reason() != "bulkhead" {
				t.Errorf("a spilled call: %v, want primary:bulkhead in 0ms then the backup, degraded, reason bulkhead", env)
			} else {
				bulkhead++
			}
		}
	}
	t.Logf("%d calls: primary hits %d (max in flight %d), backup hits %d, answers from the backup %d (with a bulkhead attempt %d)",
		len(envs), primary.hits.Load(), primary.maxInFlight.Load(), backup.hits.Load(), fromBackup, bulkhead)
	if bulkhead == 0 {
		t.Errorf("no call spilled over the bulkhead of %d", limit)
	}
	if n := primary.maxInFlight.Load(); n > limit {
		t.Errorf("the primary saw %d calls at once, over its max_in_flight %d", n, limit)
	}
	if n := g.metric("afloat_attempts_total", map[string]string{"task": "triage", "provider": "primary", "outcome": "bulkhead"}); int(n) != bulkhead {
		t.Errorf("afloat_attempts_total{primary,bulkhead} = %v, want %d", n, bulkhead)
	}
}

// noShedding turns shedding off in a triageConfig (server.shed_latency: off). A burst test
// is about a provider's limit; under -race on two cores its own 128 clients, the mocks and
// the gateway share one process, whose scheduler then waits long enough for the shedder to
// shed some of the burst (21 of 512 calls in one CI run). Shedding has tests of its own, with
// the pressure set (cascade/shed_test.go, gateway/shed_test.go).
func noShedding(cfg string) string {
	return strings.Replace(cfg, "server:\n", "server:\n  shed_latency: \"off\"\n", 1)
}

// burst runs clients goroutines that each make calls triage calls, and returns the
// envelopes and errors.
func burst(g *liveServe, clients, calls int) ([]envelope, []error) {
	var (
		mu   sync.Mutex
		envs []envelope
		errs []error
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for c := range clients {
		wg.Go(func() {
			<-start
			for i := range calls {
				env, err := g.triage("Export", fmt.Sprintf("client %d call %d: the export is slow", c, i))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					envs = append(envs, env)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return envs, errs
}

// TestServeFinishReason: the provider's finish reason takes part in normalization. An
// answer that stopped by itself and lacks only its closing brace after a number is repaired;
// one cut by the length limit is a contract violation at stage truncated, re-asked once with
// a message that says it was cut, and, when the re-ask is cut too, handed to the next tier.
func TestServeFinishReason(t *testing.T) {
	const (
		stopUnclosed = `{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3`
		cutAnswer    = `{"department": "technical", "is_urgent": 0.9, "urgen`
	)
	p0 := newMock(t, func(_ int, c chatCall) upstreamReply {
		switch user := c.firstUser(); {
		case strings.Contains(user, "stop-unclosed"):
			return upstreamReply{content: stopUnclosed, finish: "stop"}
		case strings.Contains(user, "length-then-ok"):
			if c.has("assistant") {
				return upstreamReply{content: validTriage}
			}
			return upstreamReply{content: cutAnswer, finish: "length"}
		case strings.Contains(user, "length-always"):
			return upstreamReply{content: cutAnswer, finish: "length"}
		}
		return upstreamReply{content: validTriage}
	})
	p1 := newMock(t, func(int, chatCall) upstreamReply {
		return upstreamReply{content: `{"department": "other", "is_urgent": 0.5, "urgency_score": 1}`}
	})
	cfg := triageConfig("5s", []string{"p0", "p1"}, map[string]string{"p0": p0.URL, "p1": p1.URL}, nil)
	g := startServe(t, cfg, "p0", "p1")

	t.Run("stop, closer missing after a number: repaired", func(t *testing.T) {
		env := g.mustTriage("stop-unclosed", "a second charge on my card")
		t.Logf("%v result %v", env, env.Result)
		if env.Source != "model" || env.provider() != "p0" || env.Degraded || len(env.Attempts) != 1 || env.Attempts[0].Outcome != "ok" {
			t.Fatalf("%v, want p0's answer at once", env)
		}
		if env.Result["urgency_score"] != 0.3 || env.Result["department"] != "billing" || env.Result["is_urgent"] != 0.1 {
			t.Errorf("result %v, want billing, 0.1, 0.3", env.Result)
		}
	})

	t.Run("length, unclosed: truncated, re-asked", func(t *testing.T) {
		before := len(p0.received())
		env := g.mustTriage("length-then-ok", "the app crashes on start")
		t.Logf("%v result %v", env, env.Result)
		if env.Source != "model" || env.provider() != "p0" || env.Degraded {
			t.Fatalf("%v, want p0's answer", env)
		}
		if len(env.Attempts) != 2 ||
			env.Attempts[0].Outcome != "contract_violation" || env.Attempts[0].Reask ||
			env.Attempts[1].Outcome != "ok" || !env.Attempts[1].Reask ||
			env.Attempts[0].Provider != "p0" || env.Attempts[1].Provider != "p0" {
			t.Fatalf("attempts %v, want p0 contract_violation then p0 ok with reask", env)
		}
		if n := g.metric("afloat_contract_violations_total", map[string]string{"task": "triage", "provider": "p0", "stage": "truncated"}); n != 1 {
			t.Errorf("afloat_contract_violations_total{p0,truncated} = %v, want 1", n)
		}
		if env.Result["urgency_score"] != 2.5 {
			t.Errorf("result %v, want the re-ask's answer", env.Result)
		}
		calls := p0.received()[before:]
		if len(calls) != 2 {
			t.Fatalf("p0 received %d requests for the call, want 2", len(calls))
		}
		reask := calls[1]
		t.Logf("re-ask's last user message: %q", reask.lastUser())
		if !strings.Contains(strings.ToLower(reask.lastUser()), "cut") {
			t.Errorf("the re-ask's last user message %q does not say the answer was cut", reask.lastUser())
		}
		if n := len(reask.Messages); n < 4 || reask.Messages[n-2].Role != "assistant" || reask.Messages[n-2].Content != cutAnswer {
			t.Errorf("the re-ask does not quote the cut answer as the assistant's turn: %+v", reask.Messages)
		}
	})

	t.Run("length twice: next tier", func(t *testing.T) {
		env := g.mustTriage("length-always", "the app crashes on start")
		t.Logf("%v", env)
		if env.Source != "model" || env.provider() != "p1" || !env.Degraded || env.reason() != "contract_violation" {
			t.Fatalf("%v, want p1's degraded answer with reason contract_violation", env)
		}
		want := []string{"p0:contract_violation:false", "p0:contract_violation:true", "p1:ok:false"}
		var got []string
		for _, a := range env.Attempts {
			got = append(got, fmt.Sprintf("%s:%s:%v", a.Provider, a.Outcome, a.Reask))
		}
		if !slices.Equal(got, want) {
			t.Errorf("attempts %v, want %v", got, want)
		}
		logged := g.failedAttempts("p0")
		if len(logged) != 2 {
			t.Fatalf("p0's failed attempts logged: %+v, want the two of this call", logged)
		}
		for _, a := range logged {
			if a.Outcome != "contract_violation" || !strings.HasPrefix(a.Error, "contract violation at truncated") {
				t.Errorf("logged p0 attempt %+v, want a contract violation at truncated", a)
			}
		}
	})

	if n := g.metric("afloat_contract_violations_total", map[string]string{"task": "triage", "provider": "p0", "stage": "truncated"}); n != 3 {
		t.Errorf("afloat_contract_violations_total{p0,truncated} = %v, want 3", n)
	}
	if st := g.status(); st["p0"].Breaker != "closed" {
		t.Errorf("p0's breaker is %q after contract violations only, want closed", st["p0"].Breaker)
	}
}

// TestServeRetries: a provider whose port refuses connections is tried once and the next
// tier answers at once (a dial failure is never retried on the same provider); one 502 is
// retried once on the same provider, which the retry budget's floor allows on a quiet
// gateway.
func TestServeRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: a dial is refused
	flaky := newMock(t, func(n int, _ chatCall) upstreamReply {
		if n == 1 {
			return upstreamReply{status: http.StatusBadGateway}
		}
		return upstreamReply{content: validTriage}
	})
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := triageConfig("5s", []string{"refused", "flaky", "backup"},
		map[string]string{"refused": refused, "flaky": flaky.URL, "backup": backup.URL}, nil)
	g := startServe(t, cfg, "refused", "flaky", "backup")

	env := g.mustTriage("Login", "cannot log in")
	t.Logf("%v", env)
	var got []string
	for _, a := range env.Attempts {
		got = append(got, a.Provider+":"+a.Outcome)
	}
	if want := []string{"refused:unavailable", "flaky:unavailable", "flaky:ok"}; !slices.Equal(got, want) {
		t.Errorf("attempts %v, want %v (the refused dial once, the 502 retried once)", got, want)
	}
	if env.Source != "model" || env.provider() != "flaky" {
		t.Errorf("%v, want flaky's answer", env)
	}
	if env.Attempts[0].LatencyMS > 500 {
		t.Errorf("the refused dial took %dms, want at once", env.Attempts[0].LatencyMS)
	}
	if n := backup.hits.Load(); n != 0 {
		t.Errorf("the backup was called %d times, want 0", n)
	}
}
