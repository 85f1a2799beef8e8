package sdktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/afloat-dev/afloat/gateway"
	fs "github.com/afloat-dev/afloat/internal/faultserver"
)

// The front doors of issue 19: an app written for OpenAI or Anthropic that only changes its
// base URL. front serves two routes to one tenant:
//
//   - support-agent, over the weather upstream, answering also to the model names the apps
//     send (aliases): claude-sonnet-4-5, gpt-4o-mini, gpt-4o;
//   - outage, over an upstream that answers 503 to everything, as claude-haiku-4-5.
const (
	sonnet = "claude-sonnet-4-5" // an alias of support-agent
	haiku  = "claude-haiku-4-5"  // an alias of outage
	// weatherModel is the model the weather upstream names in its answers.
	weatherModel = "weather-model-1"
	// orderText is the weather upstream's answer when no tool is in play.
	orderText = "Your order left the warehouse today and arrives on Friday."
)

// frontModels is what GET /v1/models lists: the routes and their aliases, by name.
var frontModels = []string{haiku, sonnet, "gpt-4o", "gpt-4o-mini", "outage", "support-agent"}

// front is the gateway of the front-door tests and what it saw.
type front struct {
	// base is the gateway's root URL (Anthropic's SDKs take it as their base URL; OpenAI's
	// take base + "/v1").
	base string
	// weather is the upstream of support-agent; down the one of outage.
	weather *weatherServer
	down    *fs.Server
	// outageCalls counts the requests for the outage route the gateway received.
	outageCalls atomic.Int64
}

func newFront(t *testing.T) *front {
	t.Helper()
	f := &front{weather: newWeather(t), down: fs.New(t, fs.Config{Model: "down-model", Script: fs.Always(fs.Fault{Mode: fs.Status, Status: 503})})}
	yaml := fmt.Sprintf(`providers:
  weather: {type: openai, base_url: %q, model: %s}
  down: {type: openai, base_url: %q, model: down-model}
routes:
  support-agent:
    criticality: assistance
    cascade: [weather]
    models: [%s, gpt-4o-mini, gpt-4o]
  outage:
    criticality: assistance
    cascade: [down]
    models: [%s]
`, f.weather.URL+"/v1", weatherModel, f.down.URL+"/v1", sonnet, haiku)
	gw := serve(t, yaml, func(c *gateway.Config) { c.Tenants = map[string][]string{"acme": {tenantKey}} })
	f.base = f.counting(t, gw)
	return f
}

// counting puts a proxy in front of the gateway at target that counts the requests naming the
// outage route, so that a test sees how often an SDK tried: each retry of an SDK is a request
// here. It returns the proxy's URL.
func (f *front) counting(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // event streams go on at once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"`+haiku+`"`)) || strings.Contains(r.URL.Path, "outage") {
			f.outageCalls.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// weatherServer is an OpenAI-compatible upstream that knows one tool: asked with tools and
// no tool result, it calls get_weather for Moscow; asked with a tool result, it answers with
// the result in a sentence; otherwise it answers orderText. It streams when asked, and records
// what it was asked.
type weatherServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []weatherRequest
}

// weatherRequest is a request the weather upstream got.
type weatherRequest struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Stream     bool            `json:"stream"`
}

// toolResult is the content of the request's last tool message, and whether it has one.
func (r weatherRequest) toolResult() (string, bool) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Content, true
		}
	}
	return "", false
}

func newWeather(t *testing.T) *weatherServer {
	ws := &weatherServer{}
	ws.Server = httptest.NewServer(http.HandlerFunc(ws.serve))
	t.Cleanup(ws.Close)
	return ws
}

// requests returns what the upstream was asked so far.
func (ws *weatherServer) requests() []weatherRequest {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]weatherRequest(nil), ws.reqs...)
}

func (ws *weatherServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, weatherModel)
		return
	}
	var req weatherRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ws.mu.Lock()
	ws.reqs = append(ws.reqs, req)
	ws.mu.Unlock()

	result, answered := req.toolResult()
	var call map[string]any
	text := orderText
	switch {
	case answered:
		text = "It is " + result + " in Moscow."
	case len(req.Tools) > 0:
		call = map[string]any{"id": "call_w1", "type": "function",
			"function": map[string]string{"name": "get_weather", "arguments": `{"city":"Moscow"}`}}
		text = ""
	}
	finish := "stop"
	if call != nil {
		finish = "tool_calls"
	}
	usage := map[string]int{"prompt_tokens": 21, "completion_tokens": 13, "total_tokens": 34}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": text}
		if call != nil {
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}}
		}
		writeJSONTo(w, map[string]any{"id": "chatcmpl-w", "object": "chat.completion", "created": 1, "model": weatherModel,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-w", "object": "chat.completion.chunk", "created": 1, "model": weatherModel,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, word := range strings.SplitAfter(text, " ") {
		if word != "" {
			chunk(map[string]any{"content": word}, nil)
		}
	}
	if call != nil {
		call["index"] = 0
		chunk(map[string]any{"tool_calls": []any{call}}, nil)
	}
	chunk(map[string]any{}, finish)
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-w", "object": "chat.completion.chunk", "created": 1, "model": weatherModel,
		"choices": []any{}, "usage": usage})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}

func writeJSONTo(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// wantToolRoundTrip checks that the upstream was asked the tool round trip of the SDK tests:
// first with the tool (call forced), then with the assistant's call and the tool's result
// as the tool message of that call.
func wantToolRoundTrip(t *testing.T, reqs []weatherRequest, result string) {
	t.Helper()
	var first, second *weatherRequest
	for i := range reqs {
		r := &reqs[i]
		if _, ok := r.toolResult(); ok {
			second = r
		} else if len(r.Tools) > 0 && first == nil {
			first = r
		}
	}
	if first == nil || second == nil {
		t.Fatalf("the upstream was not asked a tool round trip: %+v", reqs)
	}
	if len(first.Tools) != 1 || first.Tools[0].Function.Name != "get_weather" || string(first.ToolChoice) != `"required"` {
		t.Errorf("the first request's tools %+v, tool_choice %s; want get_weather, required", first.Tools, first.ToolChoice)
	}
	n := len(second.Messages)
	if n < 3 {
		t.Fatalf("the second request has %d messages: %+v", n, second.Messages)
	}
	call, res := second.Messages[n-2], second.Messages[n-1]
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call_w1" || call.ToolCalls[0].Function.Name != "get_weather" ||
		call.ToolCalls[0].Function.Arguments != `{"city":"Moscow"}` {
		t.Errorf("the assistant's call reached the upstream as %+v", call)
	}
	if res.Role != "tool" || res.ToolCallID != "call_w1" || res.Content != result {
		t.Errorf("the tool result reached the upstream as %+v, want the tool message of call_w1 holding %q", res, result)
	}
}

// wantNoStorm checks that the error of the outage route was one request to the gateway, and
// at most one retry (the gateway's own) to the upstream: the SDK, at its default retries, did
// not come back.
func (f *front) wantNoStorm(t *testing.T, calls int) {
	t.Helper()
	if got := f.outageCalls.Load(); got != int64(calls) {
		t.Errorf("the gateway received %d requests for the outage route, want %d: the SDK retried", got, calls)
	}
	if got := len(f.down.Log().Chat()); got > 2*calls {
		t.Errorf("the outage upstream was asked %d times for %d calls, want at most %d", got, calls, 2*calls)
	}
}
