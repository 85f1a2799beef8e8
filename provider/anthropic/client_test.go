package anthropic

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name         string
		cfg          Config
		wantErr      string
		wantName     string
		wantEndpoint string
	}{
		{name: "defaults", cfg: Config{APIKey: testKey}, wantName: "anthropic", wantEndpoint: "https://api.anthropic.com/v1/messages"},
		{name: "trailing slash", cfg: Config{Name: "claude", APIKey: testKey, BaseURL: "http://127.0.0.1:9000/v1/"},
			wantName: "claude", wantEndpoint: "http://127.0.0.1:9000/v1/messages"},
		{name: "no key", cfg: Config{}, wantErr: "api key is required"},
		{name: "relative url", cfg: Config{APIKey: testKey, BaseURL: "/v1"}, wantErr: "not an absolute http(s) url"},
		{name: "key newline", cfg: Config{APIKey: testKey + "\nX-Evil: 1"}, wantErr: "api key holds a control character"},
		{name: "bad header", cfg: Config{APIKey: testKey, Headers: map[string]string{"a b": "x"}}, wantErr: "invalid header name"},
		{name: "negative max tokens", cfg: Config{APIKey: testKey, MaxTokens: -1}, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Errorf("error quotes the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name() != tt.wantName || c.endpoint != tt.wantEndpoint || c.maxTokens != DefaultMaxTokens || c.version != DefaultVersion {
				t.Errorf("client = %+v", c)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestCompleteRequestShape(t *testing.T) {
	tests := []struct {
		name     string
		mod      func(*Config)
		req      afloat.Request
		wantHdr  map[string]string
		wantBody string
	}{
		{
			name: "system lifted, default max tokens",
			req: afloat.Request{Messages: []afloat.Message{
				{Role: afloat.RoleSystem, Content: "Ты помощник"},
				{Role: afloat.RoleSystem, Content: "Отвечай JSON"},
				{Role: afloat.RoleUser, Content: "<b>Привет</b>"}}},
			wantBody: `{"model":"claude-sonnet-4-5","max_tokens":4096,"system":"Ты помощник\n\nОтвечай JSON",
				"messages":[{"role":"user","content":"<b>Привет</b>"}]}`,
		},
		{
			name: "model override, cap, temperature, beta header",
			mod: func(c *Config) {
				c.Headers = map[string]string{"anthropic-beta": "tools-2024-05-16"}
				c.Version = "2024-01-01"
			},
			req: afloat.Request{Model: "claude-haiku-4-5", MaxTokens: 200, Temperature: ptr(0.0),
				Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hi"}}},
			wantHdr:  map[string]string{"Anthropic-Beta": "tools-2024-05-16", "Anthropic-Version": "2024-01-01"},
			wantBody: `{"model":"claude-haiku-4-5","max_tokens":200,"messages":[{"role":"user","content":"hi"}],"temperature":0}`,
		},
		{
			name: "tool round trip: tool_use then tool_result blocks in one user turn",
			req: afloat.Request{
				Messages: []afloat.Message{
					{Role: afloat.RoleUser, Content: "Погода в Москве и Казани?"},
					{Role: afloat.RoleAssistant, Content: "Сейчас узнаю.", ToolCalls: []afloat.ToolCall{
						{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Moscow"}`)},
						{ID: "toolu_2", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Kazan"}`)}}},
					{Role: afloat.RoleTool, ToolCallID: "toolu_1", Name: "get_weather", Content: "8°C"},
					{Role: afloat.RoleTool, ToolCallID: "toolu_2", Name: "get_weather", Content: "5°C"},
				},
				Tools:      []afloat.Tool{{Name: "get_weather", Description: "Weather by city", Parameters: weatherParams}},
				ToolChoice: &afloat.ToolChoice{Mode: "auto"},
			},
			wantBody: `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[
				{"role":"user","content":"Погода в Москве и Казани?"},
				{"role":"assistant","content":[{"type":"text","text":"Сейчас узнаю."},
					{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Moscow"}},
					{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Kazan"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"8°C"},
					{"type":"tool_result","tool_use_id":"toolu_2","content":"5°C"}]}],
				"tools":[{"name":"get_weather","description":"Weather by city",
					"input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
				"tool_choice":{"type":"auto"}}`,
		},
		{
			name: "calls without ids (from GigaChat or Yandex) get ids, results match by name",
			req: afloat.Request{
				Messages: []afloat.Message{
					{Role: afloat.RoleAssistant, ToolCalls: []afloat.ToolCall{{Name: "now"}}},
					{Role: afloat.RoleTool, Name: "now", Content: "12:00"},
				},
				Tools:      []afloat.Tool{{Name: "now"}},
				ToolChoice: &afloat.ToolChoice{Mode: "required"},
			},
			wantBody: `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_afloat_0_0","name":"now","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_afloat_0_0","content":"12:00"}]}],
				"tools":[{"name":"now","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any"}}`,
		},
		{
			name: "named tool choice",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				Tools: []afloat.Tool{{Name: "now"}}, ToolChoice: &afloat.ToolChoice{Mode: "tool", Name: "now"}},
			wantBody: `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":"x"}],
				"tools":[{"name":"now","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"now"}}`,
		},
		{
			name: "json schema as a forced answer tool",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: weatherParams}},
			wantBody: `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":"x"}],
				"tools":[{"name":"triage","description":"Give the answer.",
					"input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
				"tool_choice":{"type":"tool","name":"triage"}}`,
		},
		{
			name: "json schema beside tools is left to the prompt",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				Tools:          []afloat.Tool{{Name: "now"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Schema: weatherParams}},
			wantBody: `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":"x"}],
				"tools":[{"name":"now","input_schema":{"type":"object","properties":{}}}]}`,
		},
		{
			name: "json object is left to the prompt",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_object"}},
			wantBody: `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":"x"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "msg_ok.http")
			c := newClient(t, srv.URL, tt.mod)
			if _, err := c.Complete(t.Context(), &tt.req); err != nil {
				t.Fatal(err)
			}
			got := srv.Last(t, messagesPath)
			if got.Method != "POST" {
				t.Errorf("method = %s", got.Method)
			}
			want := map[string]string{"X-Api-Key": testKey, "Anthropic-Version": DefaultVersion,
				"Content-Type": "application/json", "Accept": "application/json"}
			for k, v := range tt.wantHdr {
				want[k] = v
			}
			for k, v := range want {
				if got.Header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), v)
				}
			}
			if got.Header.Get("Authorization") != "" {
				t.Error("an Authorization header was sent: the key goes in x-api-key")
			}
			if g, w := fixture.CanonJSON(t, got.Body), fixture.CanonJSON(t, []byte(tt.wantBody)); g != w {
				t.Errorf("body\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestCompleteRejectsBadRequests(t *testing.T) {
	tests := []struct {
		name   string
		req    *afloat.Request
		errHas string
	}{
		{"nil", nil, "nil request"},
		{"no model", &afloat.Request{Model: "", Messages: hello.Messages}, "no model"},
		{"negative cap", &afloat.Request{MaxTokens: -1, Messages: hello.Messages}, "negative"},
		{"unknown role", &afloat.Request{Messages: []afloat.Message{{Role: "developer"}}}, "unknown role"},
		{"orphan tool result", &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleTool, Name: "now"}}}, "answers no call"},
		{"unknown tool choice", &afloat.Request{Messages: hello.Messages, Tools: []afloat.Tool{{Name: "now"}},
			ToolChoice: &afloat.ToolChoice{Mode: "sometimes"}}, "unknown tool choice"},
		{"unknown format", &afloat.Request{Messages: hello.Messages, ResponseFormat: &afloat.ResponseFormat{Type: "xml"}}, "unknown response format"},
		{"schema missing", &afloat.Request{Messages: hello.Messages, ResponseFormat: &afloat.ResponseFormat{Type: "json_schema"}}, "no schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "msg_ok.http")
			c := newClient(t, srv.URL, func(c *Config) {
				if tt.name == "no model" {
					c.Model = ""
				}
			})
			_, err := c.Complete(t.Context(), tt.req)
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != afloat.Contract || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("err = %v, want a contract error saying %q", err, tt.errHas)
			}
			if n := len(srv.Requests(messagesPath)); n != 0 {
				t.Errorf("%d requests sent for a request that cannot be rendered", n)
			}
		})
	}
}

func TestCompleteDecodes(t *testing.T) {
	tests := []struct {
		fixture string
		req     *afloat.Request
		want    *afloat.Response
		kind    afloat.Kind
		errHas  string
	}{
		{fixture: "msg_ok.http", req: hello, want: &afloat.Response{
			Content: `{"department":"billing","is_urgent":0.9,"urgency_score":2.5}`, FinishReason: "stop",
			Model: "claude-sonnet-4-5-20250929", Usage: afloat.Usage{InputTokens: 102, OutputTokens: 24}}},
		{fixture: "msg_tool_use.http", req: hello, want: &afloat.Response{
			Content: "Сейчас узнаю погоду.", FinishReason: "tool_calls", Model: "claude-sonnet-4-5-20250929",
			ToolCalls: []afloat.ToolCall{
				{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Moscow"}`)},
				{ID: "toolu_01B77x", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Kazan"}`)}},
			Usage: afloat.Usage{InputTokens: 410, OutputTokens: 88}}},
		{fixture: "msg_answer_tool.http", req: &afloat.Request{Messages: hello.Messages,
			ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: json.RawMessage(`{"type":"object"}`)}},
			want: &afloat.Response{Content: `{"department":"technical","is_urgent":0.8,"urgency_score":2}`, FinishReason: "stop",
				Model: "claude-sonnet-4-5-20250929", Usage: afloat.Usage{InputTokens: 300, OutputTokens: 40}}},
		{fixture: "msg_answer_tool.http", req: hello, want: &afloat.Response{FinishReason: "tool_calls",
			Model: "claude-sonnet-4-5-20250929", Usage: afloat.Usage{InputTokens: 300, OutputTokens: 40},
			ToolCalls: []afloat.ToolCall{{ID: "toolu_01Zz", Name: "triage",
				Arguments: json.RawMessage(`{"department":"technical","is_urgent":0.8,"urgency_score":2}`)}}}},
		{fixture: "msg_bad_input.http", req: hello, kind: afloat.Contract, errHas: `tool "get_weather": arguments are not a json object`},
		{fixture: "msg_not_message.http", req: hello, kind: afloat.Unavailable, errHas: "not a message"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			got, err := newClient(t, srv.URL, nil).Complete(t.Context(), tt.req)
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
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
