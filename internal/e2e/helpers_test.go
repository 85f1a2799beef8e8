package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
	"github.com/jonboulle/clockwork"
)

// Paths of the replayed endpoints.
const (
	gigachatAuth = "/api/v2/oauth"
	gigachatChat = "/api/v1/chat/completions"
	yandexPath   = "/foundationModels/v1/completion"
	tlitePath    = "/v1/chat/completions"
)

// Credentials of the tests: none may appear in an answer.
const (
	gigachatKey = "ZTJlLWNsaWVudDplMmUtc2VjcmV0LWdpZ2FjaGF0"
	yandexKey   = "AQVNe2e-yandex-SECRET"
)

// fixtureOf reads a fixture of this package's testdata, or of an adapter's ("gigachat/…").
func fixtureOf(t *testing.T, name string) fixture.Response {
	t.Helper()
	if dir, file := filepath.Split(name); dir != "" {
		return fixture.Read(t, filepath.Join("..", "..", "provider", dir, "testdata", file))
	}
	return fixture.Read(t, filepath.Join("testdata", name))
}

// servers are the local stand-ins of the three providers of the seeds' cascade.
type servers struct {
	gigachat, yandex, tlite *fixture.Server
}

func newServers(t *testing.T) *servers {
	s := &servers{gigachat: fixture.NewServer(t), yandex: fixture.NewServer(t), tlite: fixture.NewServer(t)}
	// A token that outlives the test: the runtime runs on the real clock.
	s.gigachat.Handle(gigachatAuth, fixtureOf(t, "gigachat_oauth.http"))
	return s
}

const schema = `{
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

const prompt = "--- system\nОтветь одним JSON-объектом.\n--- user\nТема: {{.subject}}\nСообщение: {{.message}}\n"

// runtime builds the seeds' cascade (gigachat-pro → yandexgpt → t-lite) over s, from a
// config file as `afloat serve` reads one, on the real clock.
func (s *servers) runtime(t *testing.T) *config.Runtime {
	t.Helper()
	return s.runtimeOn(t, nil)
}

// runtimeOn is runtime on clk; nil is the real clock.
func (s *servers) runtimeOn(t *testing.T, clk clockwork.Clock) *config.Runtime {
	t.Helper()
	yaml := fmt.Sprintf(`
providers:
  gigachat-pro:
    type: gigachat
    model: GigaChat-Pro
    auth_key: %s
    base_url: %s/api/v1
    auth_url: %s%s
  yandexgpt:
    type: yandex
    model_uri: gpt://b1ge2efolder/yandexgpt/latest
    api_key: %s
    base_url: %s
  t-lite:
    type: openai
    dialect: vllm
    model: t-tech/T-lite-it-1.0
    base_url: %s/v1
tasks:
  triage:
    criticality: enrichment
    budget: 5s
    input: {subject: {type: string}, message: {type: string}}
    schema: triage.json
    cascade:
      - {provider: gigachat-pro, prompt: prompts/gigachat-pro.v3.tmpl}
      - {provider: yandexgpt, prompt: prompts/yandexgpt.v2.tmpl}
      - {provider: t-lite, prompt: prompts/t-lite.v1.tmpl}
    heuristic:
      - {default: {department: null, is_urgent: 0.2, urgency_score: 0.5}}
routes:
  support-agent:
    criticality: assistance
    budget: 5s
    cascade: [gigachat-pro, yandexgpt, t-lite]
`, gigachatKey, s.gigachat.URL, s.gigachat.URL, gigachatAuth, yandexKey, s.yandex.URL, s.tlite.URL)
	dir := t.TempDir()
	files := map[string]string{
		"afloat.yaml": yaml, "triage.json": schema, "prompts/gigachat-pro.v3.tmpl": prompt,
		"prompts/yandexgpt.v2.tmpl": prompt, "prompts/t-lite.v1.tmpl": prompt,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := config.Load(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(config.BuildOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// gatewayOf serves rt's gateway on a local listener, in process.
func gatewayOf(t *testing.T, rt *config.Runtime) *httptest.Server {
	t.Helper()
	gw, err := gateway.New(gateway.Config{
		Engine: rt.Engine, Tasks: rt.Tasks, Routes: rt.Routes, Faults: rt.Faults, Flags: rt.Flags,
		Review: rt.Review, Gatherer: rt.Registry,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// cut is a handler that starts an SSE answer, sends the events, then drops the connection
// without ending the body.
func cut(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			fmt.Fprint(w, e)
		}
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}
