package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/shed"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	clientKey   = "ck-acme-7f3a9c1e5b"
	otherKey    = "ck-globex-2d8e4b6a0c"
	adminToken  = "adm-4c1f9e7b2a6d"
	providerKey = "sk-provider-91b7e3d5f0"
)

const triageSchema = `{"type":"object","properties":{"department":{"enum":["technical","billing","sales","other",null]},"is_urgent":{"type":"number","minimum":0,"maximum":1},"urgency_score":{"type":"number","minimum":0,"maximum":3}},"required":["department","is_urgent","urgency_score"],"additionalProperties":false}`

const moderationSchema = `{"type":"object","properties":{"allowed":{"type":"boolean"},"reason":{"type":"string"}},"required":["allowed"],"additionalProperties":false}`

const triageAnswer = `{"department":"technical","is_urgent":0.8,"urgency_score":2}`

// mockUpstream is an OpenAI-compatible server whose behaviour a test sets. It records the
// requests it got.
type mockUpstream struct {
	t      testing.TB
	srv    *httptest.Server
	calls  atomic.Int64
	mu     sync.Mutex
	mode   string // ok | fail | hang | cut | answer | tool (see toolAnswer) | refuse
	answer string
	bodies [][]byte
	auth   []string
}

func newMockUpstream(t testing.TB, answer string) *mockUpstream {
	m := &mockUpstream{t: t, mode: "ok", answer: answer}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *mockUpstream) set(mode string) {
	m.mu.Lock()
	m.mode = mode
	m.mu.Unlock()
}

func (m *mockUpstream) serve(w http.ResponseWriter, r *http.Request) {
	m.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	mode, answer := m.mode, m.answer
	m.bodies = append(m.bodies, body)
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	m.mu.Unlock()
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	switch mode {
	case "fail":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"internal error","type":"server_error","code":null}}`)
		return
	case "hang":
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	case "tool":
		toolAnswer(w, body, req.Stream)
		return
	case "refuse":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"the request breaks the usage policy","type":"invalid_request_error","code":"content_policy_violation"}}`)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		content, _ := json.Marshal(answer)
		fmt.Fprintf(w, `{"id":"up-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`, content)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	half := len(answer) / 2
	for _, part := range []string{answer[:half], answer[half:]} {
		b, _ := json.Marshal(part)
		fmt.Fprintf(w, "data: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", b)
		fl.Flush()
		if mode == "cut" {
			// Die after the first chunk: a broken connection, no [DONE].
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
	}
	fmt.Fprint(w, "data: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7,\"total_tokens\":19}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t        testing.TB
	primary  *mockUpstream
	backup   *mockUpstream
	engine   *cascade.Engine
	faults   map[string]*fault.Provider
	flags    *flags.Memory
	review   *review.Memory
	gw       *Gateway
	srv      *httptest.Server
	logs     *syncBuffer
	registry *prometheus.Registry
	// pressure is the scheduling latency the engine's shedder reads (shed threshold 10ms).
	pressure atomic.Int64
}

type envOption func(*Config)

// newEnv starts a gateway in-process over two OpenAI-compatible mock upstreams: task
// "triage" (enrichment), "moderation" (critical, human), "gate" (critical, block) and
// route "support-agent" (assistance), each over primary then backup.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, primary: newMockUpstream(t, triageAnswer), backup: newMockUpstream(t, triageAnswer),
		faults: map[string]*fault.Provider{}, flags: flags.NewMemory(), review: review.NewMemory(nil),
		logs: &syncBuffer{}, registry: prometheus.NewRegistry()}
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics, err := telemetry.New(e.registry)
	if err != nil {
		t.Fatal(err)
	}
	var pcs []cascade.ProviderConfig
	for _, up := range []struct {
		name string
		m    *mockUpstream
	}{{"primary", e.primary}, {"backup", e.backup}} {
		c, err := openai.New(openai.Config{Name: up.name, BaseURL: up.m.srv.URL + "/v1", APIKey: providerKey, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		f := fault.Wrap(up.name, c, nil)
		e.faults[up.name] = f
		pcs = append(pcs, cascade.ProviderConfig{Name: up.name, Provider: f, Retry: cascade.RetryConfig{Max: -1}})
	}
	shedder := shed.New(10*time.Millisecond, func() time.Duration { return time.Duration(e.pressure.Load()) })
	e.engine, err = cascade.New(cascade.Config{Providers: pcs, Flags: e.flags, Review: e.review, Metrics: metrics, Logger: logger, Shed: shedder})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := func(name string) *prompt.Template {
		p, err := prompt.Parse(name, "--- system\nAnswer with JSON.\n--- user\n{{.message}}")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tiers := func(task string) []cascade.Tier {
		return []cascade.Tier{{Provider: "primary", Prompt: tmpl(task + "/primary.v2.tmpl")}, {Provider: "backup", Prompt: tmpl(task + "/backup.v1.tmpl")}}
	}
	tasks := map[string]*cascade.Task{}
	for _, tc := range []cascade.TaskConfig{
		{Name: "triage", Criticality: afloat.Enrichment, Budget: 2 * time.Second, Schema: []byte(triageSchema),
			InputSchema: []byte(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
			Heuristic:   cascade.Rules{{Default: map[string]any{"department": nil, "is_urgent": 0.2, "urgency_score": 0.5}}}},
		{Name: "moderation", Criticality: afloat.Critical, Budget: 2 * time.Second, Schema: []byte(moderationSchema), ReviewSLA: 30 * time.Minute},
		{Name: "gate", Criticality: afloat.Critical, OnExhausted: cascade.PolicyBlock, Budget: 2 * time.Second, Schema: []byte(moderationSchema)},
	} {
		tc.Cascade = tiers(tc.Name)
		task, err := e.engine.Task(tc)
		if err != nil {
			t.Fatal(err)
		}
		tasks[tc.Name] = task
	}
	route, err := e.engine.Route(cascade.RouteConfig{Name: "support-agent", Criticality: afloat.Assistance, Budget: 5 * time.Second,
		Cascade: []cascade.RouteTier{{Provider: "primary"}, {Provider: "backup", System: "You are the backup support agent. {{.system}}"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Engine: e.engine, Tasks: tasks, Routes: map[string]*cascade.Route{"support-agent": route},
		Faults: e.faults, Flags: e.flags, Review: e.review, AdminToken: adminToken,
		Tenants:  map[string][]string{"acme": {clientKey}, "globex": {otherKey}},
		Gatherer: e.registry, Logger: logger, MaxBody: 64 << 10}
	for _, o := range opts {
		o(&cfg)
	}
	e.gw, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.gw.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

// do sends a request with a bearer token ("" for none) and returns the status, headers and
// body.
func (e *env) do(method, path, token, body string, hdr ...string) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

type envelope = afloat.Result[json.RawMessage]
