package gigachat

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "defaults", cfg: Config{AuthKey: testKey}},
		{name: "no key", cfg: Config{}, wantErr: "auth key is required"},
		{name: "key newline", cfg: Config{AuthKey: testKey + "\r\nX-Evil: 1"}, wantErr: "auth key holds a control character"},
		{name: "bad base url", cfg: Config{AuthKey: testKey, BaseURL: "gigachat"}, wantErr: "base url"},
		{name: "bad auth url", cfg: Config{AuthKey: testKey, AuthURL: "ftp://x/oauth"}, wantErr: "auth url"},
		{name: "scope newline", cfg: Config{AuthKey: testKey, Scope: "A\nB"}, wantErr: "scope holds a control character"},
		{name: "negative refresh", cfg: Config{AuthKey: testKey, RefreshBefore: -1}, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				noSecrets(t, "error", err.Error())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name() != "gigachat" || c.endpoint != DefaultBaseURL+"/chat/completions" || c.tokens.url != DefaultAuthURL ||
				c.tokens.scope != DefaultScope || c.tokens.margin != DefaultRefreshBefore {
				t.Errorf("defaults not applied: %+v %+v", c, c.tokens)
			}
		})
	}
}

var rqUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestTokenExchangeShape asserts the OAuth request: Basic key, a fresh RqUID, the scope.
func TestTokenExchangeShape(t *testing.T) {
	srv := server(t, "chat_ok.http")
	c := newClient(t, srv, func(c *Config) { c.Scope = "GIGACHAT_API_B2B" })
	if _, err := c.Complete(t.Context(), hello); err != nil {
		t.Fatal(err)
	}
	got := srv.Last(t, authPath)
	if got.Method != "POST" || got.Header.Get("Authorization") != "Basic "+testKey ||
		got.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || got.Header.Get("Accept") != "application/json" {
		t.Errorf("token request: %s %v", got.Method, got.Header)
	}
	if id := got.Header.Get("RqUID"); !rqUID.MatchString(id) {
		t.Errorf("RqUID = %q, want a UUID v4", id)
	}
	form, err := url.ParseQuery(string(got.Body))
	if err != nil || form.Get("scope") != "GIGACHAT_API_B2B" || len(form) != 1 {
		t.Errorf("token body = %q, want scope=GIGACHAT_API_B2B", got.Body)
	}
	chat := srv.Last(t, chatPath)
	if chat.Header.Get("Authorization") != "Bearer "+tokenOne || chat.Header.Get("Accept") != "application/json" {
		t.Errorf("chat headers = %v", chat.Header)
	}
}

func TestCompleteRequestShape(t *testing.T) {
	tests := []struct {
		name     string
		schemas  bool
		req      afloat.Request
		wantBody string
	}{
		{
			name: "minimal",
			req:  afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleSystem, Content: "Ты помощник"}, {Role: afloat.RoleUser, Content: "<Привет>"}}},
			wantBody: `{"model":"GigaChat-Pro","messages":[{"role":"system","content":"Ты помощник"},
				{"role":"user","content":"<Привет>"}]}`,
		},
		{
			name: "model override, cap, temperature",
			req: afloat.Request{Model: "GigaChat-2-Max", MaxTokens: 200, Temperature: ptr(0.0),
				Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hi"}}},
			wantBody: `{"model":"GigaChat-2-Max","messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":200}`,
		},
		{
			name: "functions with auto, and a round trip that carries the state id",
			req: afloat.Request{
				Messages: []afloat.Message{
					{Role: afloat.RoleUser, Content: "Погода в Москве?"},
					{Role: afloat.RoleAssistant, ToolCalls: []afloat.ToolCall{{ID: "gcfs_77d3fb14", Name: "get_weather",
						Arguments: json.RawMessage(`{"city":"Москва"}`)}}},
					{Role: afloat.RoleTool, ToolCallID: "gcfs_77d3fb14", Name: "get_weather", Content: "8°C"},
				},
				Tools: []afloat.Tool{{Name: "get_weather", Description: "Weather by city", Parameters: weatherParams}},
			},
			wantBody: `{"model":"GigaChat-Pro","messages":[
				{"role":"user","content":"Погода в Москве?"},
				{"role":"assistant","content":"","function_call":{"name":"get_weather","arguments":{"city":"Москва"}},
					"functions_state_id":"77d3fb14"},
				{"role":"function","content":"\"8°C\"","name":"get_weather"}],
				"functions":[{"name":"get_weather","description":"Weather by city",
					"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
				"function_call":"auto"}`,
		},
		{
			name: "several calls in one turn become one call per turn, each with its result",
			req: afloat.Request{
				Messages: []afloat.Message{
					{Role: afloat.RoleAssistant, Content: "Проверю.", ToolCalls: []afloat.ToolCall{
						{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Moscow"}`)},
						{ID: "call_b", Name: "get_time"}}},
					{Role: afloat.RoleTool, ToolCallID: "call_b", Name: "get_time", Content: `{"time":"12:00"}`},
					{Role: afloat.RoleTool, ToolCallID: "call_a", Name: "get_weather", Content: "8°C"},
				},
				Tools:      []afloat.Tool{{Name: "get_weather", Parameters: weatherParams}, {Name: "get_time"}},
				ToolChoice: &afloat.ToolChoice{Mode: "none"},
			},
			wantBody: `{"model":"GigaChat-Pro","messages":[
				{"role":"assistant","content":"Проверю.","function_call":{"name":"get_weather","arguments":{"city":"Moscow"}}},
				{"role":"function","content":"\"8°C\"","name":"get_weather"},
				{"role":"assistant","content":"","function_call":{"name":"get_time","arguments":{}}},
				{"role":"function","content":"{\"time\":\"12:00\"}","name":"get_time"}],
				"functions":[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
					{"name":"get_time","parameters":{"type":"object","properties":{}}}],
				"function_call":"none"}`,
		},
		{
			name: "named function",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				Tools: []afloat.Tool{{Name: "a"}, {Name: "b"}}, ToolChoice: &afloat.ToolChoice{Mode: "tool", Name: "b"}},
			wantBody: `{"model":"GigaChat-Pro","messages":[{"role":"user","content":"x"}],
				"functions":[{"name":"a","parameters":{"type":"object","properties":{}}},{"name":"b","parameters":{"type":"object","properties":{}}}],
				"function_call":{"name":"b"}}`,
		},
		{
			name: "required with one function forces it",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				Tools: []afloat.Tool{{Name: "a"}}, ToolChoice: &afloat.ToolChoice{Mode: "required"}},
			wantBody: `{"model":"GigaChat-Pro","messages":[{"role":"user","content":"x"}],
				"functions":[{"name":"a","parameters":{"type":"object","properties":{}}}],"function_call":{"name":"a"}}`,
		},
		{
			name:    "json schema, flat, with structured output on",
			schemas: true,
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: weatherParams, Strict: true}},
			wantBody: `{"model":"GigaChat-Pro","messages":[{"role":"user","content":"x"}],
				"response_format":{"type":"json_schema","schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}`,
		},
		{
			name: "json schema left to the prompt by default",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: weatherParams, Strict: true}},
			wantBody: `{"model":"GigaChat-Pro","messages":[{"role":"user","content":"x"}]}`,
		},
		{
			name: "json object is left to the prompt",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_object"}},
			wantBody: `{"model":"GigaChat-Pro","messages":[{"role":"user","content":"x"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := server(t, "chat_ok.http")
			c := newClient(t, srv, func(c *Config) { c.StructuredOutput = tt.schemas })
			if _, err := c.Complete(t.Context(), &tt.req); err != nil {
				t.Fatal(err)
			}
			got := srv.Last(t, chatPath)
			if got.Method != "POST" || got.Header.Get("Content-Type") != "application/json" {
				t.Errorf("chat request: %s %v", got.Method, got.Header)
			}
			if g, w := fixture.CanonJSON(t, got.Body), fixture.CanonJSON(t, []byte(tt.wantBody)); g != w {
				t.Errorf("body\n got %s\nwant %s", g, w)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestCompleteRejectsBadRequests(t *testing.T) {
	tests := []struct {
		name   string
		req    *afloat.Request
		errHas string
	}{
		{"nil", nil, "nil request"},
		{"negative cap", &afloat.Request{MaxTokens: -1, Messages: hello.Messages}, "negative"},
		{"unknown role", &afloat.Request{Messages: []afloat.Message{{Role: "developer"}}}, "unknown role"},
		{"nameless tool result", &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleTool, Content: "x"}}}, "names no function"},
		{"unknown tool choice", &afloat.Request{Messages: hello.Messages, Tools: []afloat.Tool{{Name: "a"}},
			ToolChoice: &afloat.ToolChoice{Mode: "sometimes"}}, "unknown tool choice"},
		{"unknown format", &afloat.Request{Messages: hello.Messages, ResponseFormat: &afloat.ResponseFormat{Type: "xml"}}, "unknown response format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := server(t, "chat_ok.http")
			_, err := newClient(t, srv, nil).Complete(t.Context(), tt.req)
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != afloat.Contract || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("err = %v, want a contract error saying %q", err, tt.errHas)
			}
			if n := len(srv.Requests(chatPath)) + len(srv.Requests(authPath)); n != 0 {
				t.Errorf("%d requests sent for a request that cannot be rendered", n)
			}
		})
	}
}

var callID = regexp.MustCompile(`^call_[0-9a-f]{16}$`)

func TestCompleteDecodes(t *testing.T) {
	tests := []struct {
		fixture string
		want    *afloat.Response
		wantID  *regexp.Regexp // the call's synthetic id, when it is random
		kind    afloat.Kind
		errHas  string
	}{
		{fixture: "chat_ok.http", want: &afloat.Response{
			Content: `{"department": "billing", "is_urgent": 0.9, "urgency_score": 2.5}`, FinishReason: "stop",
			Model: "GigaChat-Pro:2.0.28.2", Usage: afloat.Usage{InputTokens: 118, OutputTokens: 26}}},
		{fixture: "chat_function_call.http", want: &afloat.Response{FinishReason: "tool_calls", Model: "GigaChat-Pro:2.0.28.2",
			ToolCalls: []afloat.ToolCall{{ID: "gcfs_77d3fb14-457a-46ba-937e-8d856156d003", Name: "get_weather",
				Arguments: json.RawMessage(`{"city":"Москва","num_days":0}`)}},
			Usage: afloat.Usage{InputTokens: 138, OutputTokens: 21}}},
		{fixture: "chat_function_call_no_state.http", wantID: callID, want: &afloat.Response{FinishReason: "tool_calls", Model: "GigaChat:1.0.26.20",
			ToolCalls: []afloat.ToolCall{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Казань"}`)}},
			Usage:     afloat.Usage{InputTokens: 90, OutputTokens: 15}}},
		{fixture: "chat_bad_arguments.http", kind: afloat.Contract, errHas: `tool "get_weather": arguments are not a json object`},
		{fixture: "chat_no_choices.http", kind: afloat.Unavailable, errHas: "no choices"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := server(t, tt.fixture)
			got, err := newClient(t, srv, nil).Complete(t.Context(), hello)
			if tt.errHas != "" {
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != 200 || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want a %s error with status 200 saying %q", err, tt.kind, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantID != nil {
				if len(got.ToolCalls) != 1 || !tt.wantID.MatchString(got.ToolCalls[0].ID) {
					t.Fatalf("calls = %+v, want one with a synthetic id", got.ToolCalls)
				}
				got.ToolCalls[0].ID = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestToolRoundTrip: the call GigaChat made goes back with its state id, one per turn, and
// the result as a function turn.
func TestToolRoundTrip(t *testing.T) {
	srv := server(t, "chat_function_call.http", "chat_ok.http")
	c := newClient(t, srv, nil)
	tools := []afloat.Tool{{Name: "get_weather", Description: "Weather by city", Parameters: weatherParams}}
	req := &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Погода?"}}, Tools: tools}
	first, err := c.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	call := first.ToolCalls[0]
	req.Messages = append(req.Messages,
		afloat.Message{Role: afloat.RoleAssistant, ToolCalls: first.ToolCalls},
		afloat.Message{Role: afloat.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: `{"temperature":8}`})
	if _, err := c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var sent chatRequest
	if err := json.Unmarshal(srv.Last(t, chatPath).Body, &sent); err != nil {
		t.Fatal(err)
	}
	want := []message{
		{Role: "user", Content: "Погода?"},
		{Role: "assistant", FunctionCall: &functionCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Москва","num_days":0}`)},
			FunctionsStateID: "77d3fb14-457a-46ba-937e-8d856156d003"},
		{Role: "function", Name: "get_weather", Content: `{"temperature":8}`},
	}
	if !reflect.DeepEqual(sent.Messages, want) {
		t.Errorf("messages\n got %+v\nwant %+v", sent.Messages, want)
	}
}
