package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/jonboulle/clockwork"
)

// withRoute adds a route over primary then backup to the env's gateway.
func withRoute(t *testing.T, name string) envOption {
	return func(c *Config) {
		r, err := c.Engine.Route(cascade.RouteConfig{Name: name, Criticality: afloat.Assistance, Budget: 5 * time.Second,
			Cascade: []cascade.RouteTier{{Provider: "primary"}, {Provider: "backup"}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Routes[name] = r
	}
}

type modelList struct {
	Object string
	Data   []struct {
		ID      string
		Object  string
		Created int64
		OwnedBy string `json:"owned_by"`
	}
}

// TestModelsListsTheRoutes: GET /v1/models lists the routes by name in OpenAI's list shape,
// with the tenant key chat asks for.
func TestModelsListsTheRoutes(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	e := newEnv(t, withRoute(t, "zeta-bot"), withRoute(t, "alpha-bot"), func(c *Config) { c.Clock = clock })
	for _, key := range []string{clientKey, otherKey} {
		status, _, body := e.do("GET", "/v1/models", key, "")
		if status != 200 {
			t.Fatalf("status %d %s", status, body)
		}
		l := decode[modelList](t, body)
		var ids []string
		for _, m := range l.Data {
			ids = append(ids, m.ID)
			if m.Object != "model" || m.OwnedBy != "afloat" || m.Created != clock.Now().Unix() {
				t.Fatalf("model %+v", m)
			}
		}
		if l.Object != "list" || strings.Join(ids, ",") != "alpha-bot,support-agent,zeta-bot" {
			t.Fatalf("list %s", body)
		}
	}
	status, _, body := e.do("GET", "/v1/models/support-agent", clientKey, "")
	if m := decode[map[string]any](t, body); status != 200 || m["id"] != "support-agent" || m["object"] != "model" {
		t.Fatalf("one model: %d %s", status, body)
	}
	status, _, body = e.do("GET", "/v1/models/gpt-9", clientKey, "")
	if status != 404 || !strings.Contains(string(body), `"param":"model"`) || !strings.Contains(string(body), `"code":"model_not_found"`) {
		t.Fatalf("unknown model: %d %s", status, body)
	}
	for _, path := range []string{"/v1/models", "/v1/models/support-agent"} {
		if status, _, body := e.do("GET", path, "", ""); status != 401 {
			t.Fatalf("%s without a key: %d %s", path, status, body)
		}
		if status, _, body := e.do("GET", path, "ck-wrong-0000000000", ""); status != 401 {
			t.Fatalf("%s with a wrong key: %d %s", path, status, body)
		}
	}
}

// TestModelsOpenWithoutTenants: without tenants, /v1/models is open as chat is.
func TestModelsOpenWithoutTenants(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Tenants = nil })
	status, _, body := e.do("GET", "/v1/models", "", "")
	if l := decode[modelList](t, body); status != 200 || len(l.Data) != 1 || l.Data[0].ID != "support-agent" {
		t.Fatalf("status %d %s", status, body)
	}
}

// TestOpenAIErrorShape: every error of the OpenAI-compatible API is in OpenAI's shape, every
// key present, with the type of its status; afloat's own API keeps its shape.
func TestOpenAIErrorShape(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBody = 1 << 10 })
	big := `{"model": "support-agent", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 2<<10) + `"}]}`
	tests := []struct {
		name                string
		method, path, token string
		body                string
		hdr                 []string
		status              int
		typ, code           string
		param               any
	}{
		{"no key", "POST", "/v1/chat/completions", "", chatBody, nil, 401, "authentication_error", "unauthorized", nil},
		{"wrong key", "POST", "/v1/chat/completions", "ck-wrong-0000000000", chatBody, nil, 401, "authentication_error", "unauthorized", nil},
		{"models, no key", "GET", "/v1/models", "", "", nil, 401, "authentication_error", "unauthorized", nil},
		{"body too large", "POST", "/v1/chat/completions", clientKey, big, nil, 413, "invalid_request_error", "body_too_large", nil},
		{"wrong content type", "POST", "/v1/chat/completions", clientKey, chatBody, []string{"Content-Type", "text/plain"}, 415, "invalid_request_error", "unsupported_media_type", nil},
		{"wrong method", "GET", "/v1/chat/completions", clientKey, "", nil, 405, "invalid_request_error", "method_not_allowed", nil},
		{"models, wrong method", "POST", "/v1/models", clientKey, "{}", nil, 405, "invalid_request_error", "method_not_allowed", nil},
		{"unknown route", "POST", "/v1/chat/completions", clientKey, `{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`, nil, 404, "invalid_request_error", "model_not_found", "model"},
		{"bad JSON", "POST", "/v1/chat/completions", clientKey, `{"model": `, nil, 400, "invalid_request_error", "invalid_request", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := e.do(tt.method, tt.path, tt.token, tt.body, tt.hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			var eb struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(body, &eb); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := eb.Error[k]; !ok {
					t.Fatalf("no %q in %s", k, body)
				}
			}
			if eb.Error["type"] != tt.typ || eb.Error["code"] != tt.code || eb.Error["param"] != tt.param || eb.Error["message"] == "" {
				t.Fatalf("error %s, want type %s code %s param %v", body, tt.typ, tt.code, tt.param)
			}
			if status == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	t.Run("two Authorization headers", func(t *testing.T) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add("Authorization", "Bearer "+clientKey)
		req.Header.Add("Authorization", "Bearer "+otherKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb struct {
			Error map[string]any `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		if p, ok := eb.Error["param"]; resp.StatusCode != 400 || eb.Error["type"] != "invalid_request_error" || !ok || p != nil {
			t.Fatalf("status %d error %v", resp.StatusCode, eb.Error)
		}
	})
	t.Run("tasks keep afloat's shape", func(t *testing.T) {
		status, _, body := e.do("POST", "/v1/tasks/triage", "", `{"input":{"message":"hi"}}`)
		if status != 401 || strings.Contains(string(body), `"type"`) || !strings.Contains(string(body), `"code":"unauthorized"`) {
			t.Fatalf("status %d %s", status, body)
		}
	})
}

// TestChatMaxTokensByTheClientsName: the cap reaches an OpenAI upstream under the name the
// client gave it.
func TestChatMaxTokensByTheClientsName(t *testing.T) {
	e := newEnv(t)
	for _, param := range []string{"max_completion_tokens", "max_tokens"} {
		before := len(e.primary.bodies)
		body := `{"model": "support-agent", "` + param + `": 50, "messages": [{"role": "user", "content": "hi"}]}`
		if status, _, out := e.do("POST", "/v1/chat/completions", clientKey, body); status != 200 {
			t.Fatalf("%s: status %d %s", param, status, out)
		}
		e.primary.mu.Lock()
		up := decode[map[string]any](t, e.primary.bodies[before])
		e.primary.mu.Unlock()
		other := "max_tokens"
		if param == other {
			other = "max_completion_tokens"
		}
		if _, sent := up[other]; up[param] != 50.0 || sent {
			t.Fatalf("client sent %s; upstream got %v", param, up)
		}
	}
	status, _, out := e.do("POST", "/v1/chat/completions", clientKey, `{"model": "support-agent", "max_completion_tokens": -1, "messages": [{"role": "user", "content": "hi"}]}`)
	if status != 400 || !strings.Contains(string(out), `"param":"max_completion_tokens"`) {
		t.Fatalf("negative: %d %s", status, out)
	}
}

// TestChatRetryAfterFromTheBreakers: an exhausted route's Retry-After is the time until its
// first breaker may admit a probe, at least 1 s; with no breaker open it is 30 s.
func TestChatRetryAfterFromTheBreakers(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	primary, backup := newMockUpstream(t, "hi"), newMockUpstream(t, "hi")
	var pcs []cascade.ProviderConfig
	for _, up := range []struct {
		name     string
		m        *mockUpstream
		recovery time.Duration
	}{{"primary", primary, 20 * time.Second}, {"backup", backup, 12 * time.Second}} {
		c, err := openai.New(openai.Config{Name: up.name, BaseURL: up.m.srv.URL + "/v1", APIKey: providerKey, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		pcs = append(pcs, cascade.ProviderConfig{Name: up.name, Provider: c, Retry: cascade.RetryConfig{Max: -1},
			Breaker: breaker.Config{Recovery: up.recovery}})
	}
	eng, err := cascade.New(cascade.Config{Providers: pcs, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	route, err := eng.Route(cascade.RouteConfig{Name: "support-agent", Criticality: afloat.Assistance, Budget: 5 * time.Second,
		Cascade: []cascade.RouteTier{{Provider: "primary"}, {Provider: "backup"}}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(Config{Engine: eng, Routes: map[string]*cascade.Route{"support-agent": route}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	retryAfter := func() string {
		t.Helper()
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		gw.Handler().ServeHTTP(rec, req)
		if rec.Code != 503 {
			t.Fatalf("status %d %s", rec.Code, rec.Body)
		}
		return rec.Header().Get("Retry-After")
	}

	// Both fail with their breakers closed: nothing says when they will answer.
	primary.set("fail")
	backup.set("fail")
	if got := retryAfter(); got != "30" {
		t.Fatalf("breakers closed: Retry-After %s, want 30", got)
	}
	for _, p := range []string{"primary", "backup"} {
		if err := eng.Breaker(p).Force(t.Context(), breaker.StateOpen); err != nil {
			t.Fatal(err)
		}
	}
	calls := primary.calls.Load() + backup.calls.Load()
	clock.Advance(4 * time.Second)
	if got := retryAfter(); got != "8" {
		t.Fatalf("backup probes in 8 s: Retry-After %s", got)
	}
	clock.Advance(7*time.Second + 500*time.Millisecond)
	if got := retryAfter(); got != "1" {
		t.Fatalf("backup probes in 0.5 s: Retry-After %s, want the 1 s floor", got)
	}
	if n := primary.calls.Load() + backup.calls.Load(); n != calls {
		t.Fatalf("open breakers let %d calls through", n-calls)
	}
}
