package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// toolAnswer is the mock upstream's "tool" mode: asked without a tool result, it calls
// get_weather for Moscow; asked with one, it answers in text quoting the (last) result.
func toolAnswer(w http.ResponseWriter, body []byte, stream bool) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	result := ""
	for _, m := range req.Messages {
		if m.Role == "tool" {
			result = m.Content
		}
	}
	text, _ := json.Marshal("It is " + result + " in Moscow.")
	const call = `{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Moscow\"}"}}`
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		msg, finish := fmt.Sprintf(`{"role":"assistant","content":%s}`, text), "stop"
		if result == "" {
			msg, finish = `{"role":"assistant","content":null,"tool_calls":[`+call+`]}`, "tool_calls"
		}
		fmt.Fprintf(w, `{"id":"up-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}`, msg, finish)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	delta, finish := fmt.Sprintf(`{"content":%s}`, text), "stop"
	if result == "" {
		delta, finish = `{"tool_calls":[{"index":0,`+call[1:]+`]}`, "tool_calls"
	}
	fmt.Fprintf(w, "data: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta)
	fmt.Fprintf(w, "data: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", finish)
	fmt.Fprint(w, "data: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":9,\"total_tokens\":39}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// withAliases maps claude-sonnet-4-5 and gpt-4o-mini to the route support-agent.
func withAliases(c *Config) {
	c.Models = map[string]string{"claude-sonnet-4-5": "support-agent", "gpt-4o-mini": "support-agent"}
}

// postMessages sends a Messages request as Anthropic's SDKs do: the key in x-api-key, an
// anthropic-version header.
func (e *env) postMessages(body string) (int, http.Header, []byte) {
	e.t.Helper()
	return e.do("POST", "/v1/messages", "", body, "X-Api-Key", clientKey, "Anthropic-Version", "2023-06-01")
}

// message is an answer of /v1/messages as a client reads it.
type message struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  *string         `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// upstreamRequest is what an OpenAI-compatible upstream got.
type upstreamRequest struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct{ Name, Arguments string }
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice  json.RawMessage `json:"tool_choice"`
	MaxTokens   int             `json:"max_tokens"`
	Temperature *float64        `json:"temperature"`
}

func (m *mockUpstream) request(t *testing.T, i int) upstreamRequest {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if i >= len(m.bodies) {
		t.Fatalf("the upstream got %d requests, want at least %d", len(m.bodies), i+1)
	}
	return decode[upstreamRequest](t, m.bodies[i])
}

// TestMessagesPlain: a Messages request by an alias, its key in x-api-key, is answered in
// Anthropic's shape by the route's primary, with the upstream model and afloat's headers; the
// system prompt, max_tokens and temperature reach the upstream.
func TestMessagesPlain(t *testing.T) {
	e := newEnv(t, withAliases)
	e.primary.answer = "Ваш заказ в пути."
	status, hdr, body := e.postMessages(`{"model": "claude-sonnet-4-5", "max_tokens": 256, "temperature": 0.2,
		"system": "Be brief.", "messages": [{"role": "user", "content": "Где мой заказ?"}]}`)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	for k, want := range map[string]string{"X-Afloat-Source": "model", "X-Afloat-Provider": "primary", "X-Afloat-Degraded": "false",
		"X-Afloat-Route": "support-agent", CostHeader: "0", "Content-Type": "application/json"} {
		if hdr.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, hdr.Get(k), want)
		}
	}
	if id := hdr.Get(RequestIDHeader); id == "" || hdr.Get("Request-Id") != id {
		t.Errorf("request-id %q, X-Request-Id %q: want the same id in both", hdr.Get("Request-Id"), id)
	}
	m := decode[message](t, body)
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != "m" ||
		len(m.Content) != 1 || m.Content[0].Type != "text" || str(m.Content[0].Text) != "Ваш заказ в пути." ||
		str(m.StopReason) != "end_turn" || m.StopSequence != nil || m.Usage.InputTokens != 12 || m.Usage.OutputTokens != 7 {
		t.Fatalf("message %s", body)
	}
	up := e.primary.request(t, 0)
	if len(up.Messages) != 2 || up.Messages[0].Role != "system" || up.Messages[0].Content != "Be brief." ||
		up.Messages[1].Role != "user" || up.Messages[1].Content != "Где мой заказ?" || up.MaxTokens != 256 ||
		up.Temperature == nil || *up.Temperature != 0.2 {
		t.Fatalf("the upstream got %s", e.primary.bodies[0])
	}
}

// TestMessagesContentForms: system and content as text blocks are joined; a route's own name
// and the default route answer too.
func TestMessagesContentForms(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DefaultRoute = "support-agent" })
	for i, model := range []string{"support-agent", "gpt-9"} {
		status, hdr, body := e.postMessages(`{"model": "` + model + `", "max_tokens": 64,
			"system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
			"messages": [{"role": "user", "content": [{"type": "text", "text": "Where is "}, {"type": "text", "text": "my order?"}]}]}`)
		if status != 200 || hdr.Get("X-Afloat-Route") != "support-agent" {
			t.Fatalf("model %s: status %d, route %q: %s", model, status, hdr.Get("X-Afloat-Route"), body)
		}
		up := e.primary.request(t, i)
		if len(up.Messages) != 2 || up.Messages[0].Content != "Be brief.\n\nBe kind." || up.Messages[1].Content != "Where is my order?" {
			t.Fatalf("model %s: the upstream got %s", model, e.primary.bodies[i])
		}
	}
}

const weatherTool = `"tools": [{"name": "get_weather", "description": "Weather by city",
	"input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]`

// TestMessagesToolRoundTrip: tools reach the upstream in its own form, its call comes back
// as a tool_use block, and the tool_result sent next reaches it as the tool message of that
// call, after the assistant's call, and is answered in text.
func TestMessagesToolRoundTrip(t *testing.T) {
	e := newEnv(t, withAliases)
	e.primary.set("tool")
	status, _, body := e.postMessages(`{"model": "claude-sonnet-4-5", "max_tokens": 256, ` + weatherTool + `,
		"tool_choice": {"type": "any"}, "messages": [{"role": "user", "content": "Weather in Moscow?"}]}`)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	m := decode[message](t, body)
	if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].ID != "call_1" || m.Content[0].Name != "get_weather" ||
		string(m.Content[0].Input) != `{"city":"Moscow"}` || str(m.StopReason) != "tool_use" {
		t.Fatalf("message %s", body)
	}
	up := e.primary.request(t, 0)
	if len(up.Tools) != 1 || up.Tools[0].Function.Name != "get_weather" || !strings.Contains(string(up.Tools[0].Function.Parameters), `"required":["city"]`) ||
		string(up.ToolChoice) != `"required"` {
		t.Fatalf("the upstream got %s", e.primary.bodies[0])
	}

	status, _, body = e.postMessages(`{"model": "claude-sonnet-4-5", "max_tokens": 256, ` + weatherTool + `,
		"messages": [{"role": "user", "content": "Weather in Moscow?"},
			{"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Moscow"}}]},
			{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "8°C"}]}, {"type": "text", "text": "Thanks."}]}]}`)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	m = decode[message](t, body)
	if len(m.Content) != 1 || str(m.Content[0].Text) != "It is 8°C in Moscow." || str(m.StopReason) != "end_turn" {
		t.Fatalf("message %s", body)
	}
	up = e.primary.request(t, 1)
	roles := []string{}
	for _, msg := range up.Messages {
		roles = append(roles, msg.Role)
	}
	if !slices.Equal(roles, []string{"user", "assistant", "tool", "user"}) {
		t.Fatalf("roles %v; the upstream got %s", roles, e.primary.bodies[1])
	}
	call, result := up.Messages[1], up.Messages[2]
	if call.Content != "Let me look." || len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call_1" || call.ToolCalls[0].Function.Name != "get_weather" ||
		call.ToolCalls[0].Function.Arguments != `{"city":"Moscow"}` || result.ToolCallID != "call_1" || result.Content != "8°C" || up.Messages[3].Content != "Thanks." {
		t.Fatalf("the upstream got %s", e.primary.bodies[1])
	}
}

// sseEvent is one server-sent event: its event line and its data.
type sseEvent struct {
	name string
	data map[string]any
}

func readEvents(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
					t.Fatalf("event data %q: %v", line, err)
				}
			default:
				t.Fatalf("line %q in the stream:\n%s", line, body)
			}
		}
		if ev.name == "" || ev.data["type"] != ev.name {
			t.Fatalf("event %q whose data has type %v:\n%s", ev.name, ev.data["type"], body)
		}
		out = append(out, ev)
	}
	return out
}

func names(evs []sseEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.name)
	}
	return out
}

// field reads a nested field of an event's data by its keys.
func field(ev sseEvent, keys ...string) any {
	var v any = ev.data
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// TestMessagesStreamEvents: a streamed answer is Anthropic's event sequence, exactly: the
// text in one text block of text_delta events, then the stop reason and the usage; a tool
// call is a tool_use block whose input comes as input_json_delta.
func TestMessagesStreamEvents(t *testing.T) {
	e := newEnv(t, withAliases)
	e.primary.answer = "Your order is on its way."
	status, hdr, body := e.postMessages(`{"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": true,
		"messages": [{"role": "user", "content": "Where is my order?"}]}`)
	if status != 200 || hdr.Get("Content-Type") != "text/event-stream" || hdr.Get("X-Afloat-Provider") != "primary" || hdr.Get("X-Afloat-Route") != "support-agent" {
		t.Fatalf("status %d headers %v: %s", status, hdr, body)
	}
	evs := readEvents(t, body)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
		"content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names(evs), want) {
		t.Fatalf("events %v, want %v:\n%s", names(evs), want, body)
	}
	start := evs[0]
	if !strings.HasPrefix(field(start, "message", "id").(string), "msg_") || field(start, "message", "model") != "m" ||
		field(start, "message", "role") != "assistant" || field(start, "message", "stop_reason") != nil {
		t.Errorf("message_start %v", start.data)
	}
	if field(evs[1], "content_block", "type") != "text" || field(evs[1], "content_block", "text") != "" || field(evs[1], "index") != 0.0 {
		t.Errorf("content_block_start %v", evs[1].data)
	}
	text := ""
	for _, ev := range evs[3:5] {
		if field(ev, "delta", "type") != "text_delta" || field(ev, "index") != 0.0 {
			t.Errorf("delta %v", ev.data)
		}
		text += field(ev, "delta", "text").(string)
	}
	if text != e.primary.answer {
		t.Errorf("streamed text %q, want %q", text, e.primary.answer)
	}
	end := evs[6]
	if field(end, "delta", "stop_reason") != "end_turn" || field(end, "delta", "stop_sequence") != nil ||
		field(end, "usage", "output_tokens") != 7.0 || field(end, "usage", "input_tokens") != 12.0 {
		t.Errorf("message_delta %v", end.data)
	}

	e.primary.set("tool")
	status, _, body = e.postMessages(`{"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": true, ` + weatherTool + `,
		"tool_choice": {"type": "tool", "name": "get_weather"}, "messages": [{"role": "user", "content": "Weather in Moscow?"}]}`)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	evs = readEvents(t, body)
	want = []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names(evs), want) {
		t.Fatalf("events %v, want %v:\n%s", names(evs), want, body)
	}
	if b := evs[1]; field(b, "content_block", "type") != "tool_use" || field(b, "content_block", "id") != "call_1" ||
		field(b, "content_block", "name") != "get_weather" || fmt.Sprint(field(b, "content_block", "input")) != "map[]" {
		t.Errorf("content_block_start %v", b.data)
	}
	if d := evs[3]; field(d, "delta", "type") != "input_json_delta" || field(d, "delta", "partial_json") != `{"city":"Moscow"}` {
		t.Errorf("content_block_delta %v", d.data)
	}
	if field(evs[5], "delta", "stop_reason") != "tool_use" || field(evs[5], "usage", "output_tokens") != 9.0 {
		t.Errorf("message_delta %v", evs[5].data)
	}
	up := e.primary.request(t, 1)
	if string(up.ToolChoice) != `{"type":"function","function":{"name":"get_weather"}}` {
		t.Errorf("tool_choice reached the upstream as %s", up.ToolChoice)
	}
}

// TestMessagesStreamCut: a stream cut after its first chunk, which no tier can continue,
// ends with Anthropic's error event and no message_stop.
func TestMessagesStreamCut(t *testing.T) {
	e := newEnv(t, withAliases)
	e.primary.set("cut")
	status, _, body := e.postMessages(`{"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": true,
		"messages": [{"role": "user", "content": "Where is my order?"}]}`)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	evs := readEvents(t, body)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "error"}
	if !slices.Equal(names(evs), want) {
		t.Fatalf("events %v, want %v:\n%s", names(evs), want, body)
	}
	if field(evs[4], "error", "type") != "api_error" || !strings.Contains(field(evs[4], "error", "message").(string), "incomplete") {
		t.Errorf("error event %v", evs[4].data)
	}
}

// TestMessagesStopSequences: the text ends before the first stop sequence it completes,
// streamed or not, even when the sequence spans two chunks of the stream.
func TestMessagesStopSequences(t *testing.T) {
	e := newEnv(t, withAliases)
	e.primary.answer = "Hello STOP world" // streamed as "Hello ST" and "OP world"
	req := `{"model": "claude-sonnet-4-5", "max_tokens": 256, "stop_sequences": ["world", "STOP"], "stream": %t,
		"messages": [{"role": "user", "content": "hi"}]}`
	status, _, body := e.postMessages(fmt.Sprintf(req, false))
	m := decode[message](t, body)
	if status != 200 || len(m.Content) != 1 || str(m.Content[0].Text) != "Hello " || str(m.StopReason) != "stop_sequence" || str(m.StopSequence) != "STOP" {
		t.Fatalf("status %d %s", status, body)
	}
	_, _, body = e.postMessages(fmt.Sprintf(req, true))
	evs := readEvents(t, body)
	text := ""
	for _, ev := range evs {
		if ev.name == "content_block_delta" {
			text += field(ev, "delta", "text").(string)
		}
	}
	end := evs[len(evs)-2]
	if text != "Hello " || field(end, "delta", "stop_reason") != "stop_sequence" || field(end, "delta", "stop_sequence") != "STOP" {
		t.Fatalf("streamed %q, message_delta %v:\n%s", text, end.data, body)
	}
}

// TestStopperFeed: whatever the chunks, the text let out is the text before the first stop
// sequence it completes, and nothing of a sequence goes out before it is known not to be one.
func TestStopperFeed(t *testing.T) {
	tests := []struct {
		text string
		seqs []string
		want string
		hit  string
	}{
		{"Привет, мир! END and more", []string{"END"}, "Привет, мир! ", "END"},
		{"abc", []string{"abc", "b"}, "a", "b"}, // "b" completes first
		{"xxbc", []string{"bc", "c"}, "xx", "bc"},
		{"no stop here", []string{"STOP"}, "no stop here", ""},
		{"ends with ST", []string{"STOP"}, "ends with ST", ""},
		{"one. two.", []string{"."}, "one", "."},
		{"да — нет", []string{"—", "нет"}, "да ", "—"},
	}
	for _, tc := range tests {
		for split := 0; split <= len(tc.text); split++ {
			s := newStopper(tc.seqs)
			got := s.feed(tc.text[:split]) + s.feed(tc.text[split:])
			if s.hit == "" {
				got += s.flush()
			}
			if got != tc.want || s.hit != tc.hit {
				t.Errorf("%q split at %d: let out %q with %q, want %q with %q", tc.text, split, got, s.hit, tc.want, tc.hit)
			}
		}
		s := newStopper(tc.seqs)
		if got, hit := s.cut(tc.text); got != tc.want || hit != tc.hit {
			t.Errorf("cut(%q) = %q, %q; want %q, %q", tc.text, got, hit, tc.want, tc.hit)
		}
	}
}

// anthropicError is an error of /v1/messages as a client reads it.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// TestMessagesErrors: every error of /v1/messages is in Anthropic's shape, with the type of
// its status: a request without max_tokens, an unknown model, a missing or wrong key, two
// keys, content afloat cannot send, a wrong method or content type.
func TestMessagesErrors(t *testing.T) {
	e := newEnv(t, withAliases)
	const hi = `"messages": [{"role": "user", "content": "hi"}]`
	tests := []struct {
		name    string
		method  string
		body    string
		hdr     []string
		status  int
		typ     string
		message string
	}{
		{"no max_tokens", "POST", `{"model": "claude-sonnet-4-5", ` + hi + `}`, nil, 400, "invalid_request_error", "max_tokens: field required"},
		{"unknown model", "POST", `{"model": "claude-9", "max_tokens": 5, ` + hi + `}`, nil, 404, "not_found_error", `"claude-9"`},
		{"no model", "POST", `{"max_tokens": 5, ` + hi + `}`, nil, 400, "invalid_request_error", "model: field required"},
		{"image block", "POST", `{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}`, nil,
			400, "invalid_request_error", "messages.0.content.0.type"},
		{"result without a call", "POST", `{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "8"}]}]}`, nil,
			400, "invalid_request_error", "messages.0.content.0.tool_use_id"},
		{"system role", "POST", `{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}`, nil, 400, "invalid_request_error", "messages.0.role"},
		{"temperature", "POST", `{"model": "claude-sonnet-4-5", "max_tokens": 5, "temperature": 1.5, ` + hi + `}`, nil, 400, "invalid_request_error", "temperature"},
		{"unknown tool choice", "POST", `{"model": "claude-sonnet-4-5", "max_tokens": 5, ` + weatherTool + `, "tool_choice": {"type": "tool", "name": "x"}, ` + hi + `}`, nil,
			400, "invalid_request_error", "tool_choice.name"},
		{"server tool", "POST", `{"model": "claude-sonnet-4-5", "max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "web_search"}], ` + hi + `}`, nil,
			400, "invalid_request_error", "tools.0.type"},
		{"no key", "POST", `{}`, []string{}, 401, "authentication_error", "x-api-key"},
		{"wrong key", "POST", `{}`, []string{"X-Api-Key", "ck-nobody"}, 401, "authentication_error", "unknown client key"},
		{"bearer key", "POST", `{"max_tokens": 5, ` + hi + `}`, []string{"Authorization", "Bearer " + clientKey}, 400, "invalid_request_error", "model"},
		{"two keys", "POST", `{}`, []string{"X-Api-Key", clientKey, "Authorization", "Bearer " + otherKey}, 400, "invalid_request_error", "different keys"},
		{"wrong method", "GET", "", nil, 405, "invalid_request_error", "allowed POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := tt.hdr
			if hdr == nil {
				hdr = []string{"X-Api-Key", clientKey}
			}
			status, h, body := e.do(tt.method, "/v1/messages", "", tt.body, hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			eb := decode[anthropicError](t, body)
			if eb.Type != "error" || eb.Error.Type != tt.typ || !strings.Contains(eb.Error.Message, tt.message) {
				t.Fatalf("body %s, want type %s saying %q", body, tt.typ, tt.message)
			}
			if eb.RequestID == "" || eb.RequestID != h.Get(RequestIDHeader) || h.Get("Request-Id") != eb.RequestID {
				t.Errorf("request_id %q, X-Request-Id %q, Request-Id %q", eb.RequestID, h.Get(RequestIDHeader), h.Get("Request-Id"))
			}
		})
	}
	status, _, body := e.do("POST", "/v1/messages", "", "{}", "X-Api-Key", clientKey, "Content-Type", "text/plain")
	if eb := decode[anthropicError](t, body); status != 415 || eb.Error.Type != "invalid_request_error" {
		t.Errorf("text/plain: status %d %s", status, body)
	}
}

// TestMessagesExhausted: a route whose every tier failed answers overloaded_error with 529,
// Retry-After and X-Should-Retry: false (so that the SDKs raise it at once instead of
// retrying into the outage), afloat's headers saying so, streamed or not.
func TestMessagesExhausted(t *testing.T) {
	e := newEnv(t, withAliases)
	e.primary.set("fail")
	e.backup.set("fail")
	for _, stream := range []bool{false, true} {
		status, hdr, body := e.postMessages(fmt.Sprintf(`{"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": %t,
			"messages": [{"role": "user", "content": "hi"}]}`, stream))
		if status != 529 || hdr.Get("Retry-After") == "" || hdr.Get("X-Should-Retry") != "false" || hdr.Get("X-Afloat-Source") != "unavailable" ||
			hdr.Get("X-Afloat-Degraded") != "true" || hdr.Get("X-Afloat-Route") != "support-agent" || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("stream %t: status %d headers %v", stream, status, hdr)
		}
		if eb := decode[anthropicError](t, body); eb.Type != "error" || eb.Error.Type != "overloaded_error" || eb.Error.Message == "" {
			t.Fatalf("stream %t: body %s", stream, body)
		}
	}
}

// TestMessagesRefused: a provider's content-policy refusal is answered as Anthropic's API
// answers one, streamed or not: a message that stops for refusal, which no retry changes.
func TestMessagesRefused(t *testing.T) {
	e := newEnv(t, withAliases)
	e.primary.set("refuse")
	req := `{"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": %t, "messages": [{"role": "user", "content": "hi"}]}`
	status, hdr, body := e.postMessages(fmt.Sprintf(req, false))
	m := decode[message](t, body)
	if status != 200 || str(m.StopReason) != "refusal" || len(m.Content) != 1 || str(m.Content[0].Text) != "" ||
		hdr.Get("X-Afloat-Source") != "unavailable" || hdr.Get("X-Afloat-Provider") != "primary" || hdr.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d headers %v: %s", status, hdr, body)
	}
	status, hdr, body = e.postMessages(fmt.Sprintf(req, true))
	evs := readEvents(t, body)
	want := []string{"message_start", "content_block_start", "ping", "content_block_stop", "message_delta", "message_stop"}
	if status != 200 || hdr.Get("X-Afloat-Source") != "unavailable" || !slices.Equal(names(evs), want) || field(evs[4], "delta", "stop_reason") != "refusal" {
		t.Fatalf("status %d headers %v, events %v, want %v:\n%s", status, hdr, names(evs), want, body)
	}
	if got := e.backup.calls.Load(); got != 0 {
		t.Errorf("the backup was asked %d times after the refusal; on_refusal stop asks none", got)
	}
}

func FuzzDecodeMessagesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"r","max_tokens":5,"system":"s","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"r","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],` + weatherTool + `,"tool_choice":{"type":"tool","name":"get_weather"}}`,
		`{"model":"r","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"}]}]}],"stop_sequences":["x"],"stream":true}`,
		`{"model":"r"}`, `[]`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		mr, req, err := decodeMessagesRequest(body)
		if err != nil {
			if _, ok := err.(*paramError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if mr.Model == "" || req.MaxTokens < 1 || len(req.Messages) == 0 {
			t.Fatalf("accepted a request without model, max_tokens or messages: %s", body)
		}
		calls := map[string]bool{}
		for _, m := range req.Messages {
			switch m.Role {
			case "system", "user", "assistant":
			case "tool":
				if !calls[m.ToolCallID] {
					t.Fatalf("a tool message answers no earlier call: %s", body)
				}
			default:
				t.Fatalf("role %q passed", m.Role)
			}
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
				if !jsonObject(c.Arguments) {
					t.Fatalf("arguments %s are no object", c.Arguments)
				}
			}
		}
	})
}

// FuzzStopper: fed in two chunks, the stopper lets out what cut lets out of the whole text.
func FuzzStopper(f *testing.F) {
	f.Add("Hello STOP world", "STOP", "o w", 8)
	f.Add("да — нет", "—", "нет", 3)
	f.Fuzz(func(t *testing.T, text, a, b string, split int) {
		if a == "" || b == "" || split < 0 || split > len(text) {
			return
		}
		seqs := []string{a, b}
		want, hit := newStopper(seqs).cut(text)
		s := newStopper(seqs)
		got := s.feed(text[:split]) + s.feed(text[split:])
		if s.hit == "" {
			got += s.flush()
		}
		if got != want || s.hit != hit {
			t.Fatalf("%q split at %d by %q: fed gives %q with %q, cut %q with %q", text, split, seqs, got, s.hit, want, hit)
		}
	})
}
