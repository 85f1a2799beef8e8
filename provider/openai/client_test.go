package openai

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
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
		{name: "defaults", cfg: Config{}, wantName: "openai", wantEndpoint: "https://api.openai.com/v1/chat/completions"},
		{name: "trailing slash", cfg: Config{Name: "t-lite", BaseURL: "http://127.0.0.1:8000/v1/"},
			wantName: "t-lite", wantEndpoint: "http://127.0.0.1:8000/v1/chat/completions"},
		{name: "relative url", cfg: Config{BaseURL: "/v1"}, wantErr: "not an absolute http(s) url"},
		{name: "other scheme", cfg: Config{BaseURL: "ftp://example.com/v1"}, wantErr: "not an absolute http(s) url"},
		{name: "unparsable url", cfg: Config{BaseURL: "http://[::1"}, wantErr: "not an absolute http(s) url"},
		{name: "bad header name", cfg: Config{Headers: map[string]string{"OpenAI Project": "x"}}, wantErr: "invalid header name"},
		{name: "header value newline", cfg: Config{Headers: map[string]string{"OpenAI-Project": "a\r\nX-Evil: 1"}},
			wantErr: "control character"},
		{name: "key newline", cfg: Config{APIKey: "sk-abc\nX-Evil: 1"}, wantErr: "api key holds a control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "sk-abc") {
					t.Errorf("error quotes the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name() != tt.wantName || c.endpoint != tt.wantEndpoint {
				t.Errorf("name, endpoint = %q, %q; want %q, %q", c.Name(), c.endpoint, tt.wantName, tt.wantEndpoint)
			}
			if c.http == nil || c.clock == nil {
				t.Error("nil http client or clock after New")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

var weatherParams = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)

func TestCompleteRequestShape(t *testing.T) {
	conversation := []afloat.Message{
		{Role: afloat.RoleSystem, Content: "Ты помощник"},
		{Role: afloat.RoleUser, Content: "Погода в Москве?"},
		{Role: afloat.RoleAssistant, ToolCalls: []afloat.ToolCall{{ID: "call_abc", Name: "get_weather",
			Arguments: json.RawMessage(`{"city":"Moscow"}`)}}},
		{Role: afloat.RoleTool, ToolCallID: "call_abc", Name: "get_weather", Content: "8°C"},
	}
	tests := []struct {
		name     string
		mod      func(*Config)
		req      afloat.Request
		wantAuth string
		wantHdr  map[string]string
		wantBody string
	}{
		{
			name:     "minimal with key",
			req:      afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Привет"}}},
			wantAuth: "Bearer " + testKey,
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"Привет"}]}`,
		},
		{
			name:     "local server without key",
			mod:      func(c *Config) { c.APIKey = "" },
			req:      afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "<b>&</b>"}}},
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"<b>&</b>"}]}`,
		},
		{
			name: "yandex project header and model override",
			mod: func(c *Config) {
				c.Headers = map[string]string{"OpenAI-Project": "b1gfolder"}
			},
			req: afloat.Request{Model: "gpt://b1gfolder/yandexgpt/latest", MaxTokens: 200, Temperature: ptr(0.0),
				Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hi"}}},
			wantAuth: "Bearer " + testKey,
			wantHdr:  map[string]string{"Openai-Project": "b1gfolder"},
			wantBody: `{"model":"gpt://b1gfolder/yandexgpt/latest","messages":[{"role":"user","content":"hi"}],
				"max_tokens":200,"temperature":0}`,
		},
		{
			name: "tools and a tool round trip",
			req: afloat.Request{Messages: conversation,
				Tools:      []afloat.Tool{{Name: "get_weather", Description: "Weather by city", Parameters: weatherParams}},
				ToolChoice: &afloat.ToolChoice{Mode: "auto"}},
			wantAuth: "Bearer " + testKey,
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[
				{"role":"system","content":"Ты помощник"},
				{"role":"user","content":"Погода в Москве?"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function",
					"function":{"name":"get_weather","arguments":"{\"city\":\"Moscow\"}"}}]},
				{"role":"tool","content":"8°C","tool_call_id":"call_abc"}],
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather by city",
					"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
				"tool_choice":"auto"}`,
		},
		{
			name: "named tool choice, empty arguments",
			req: afloat.Request{
				Messages: []afloat.Message{{Role: afloat.RoleAssistant, Content: "checking",
					ToolCalls: []afloat.ToolCall{{ID: "c1", Name: "now"}}}},
				Tools:      []afloat.Tool{{Name: "now"}},
				ToolChoice: &afloat.ToolChoice{Mode: "tool", Name: "now"}},
			wantAuth: "Bearer " + testKey,
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"assistant","content":"checking",
				"tool_calls":[{"id":"c1","type":"function","function":{"name":"now","arguments":"{}"}}]}],
				"tools":[{"type":"function","function":{"name":"now"}}],
				"tool_choice":{"type":"function","function":{"name":"now"}}}`,
		},
		{
			name: "required tool choice",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				Tools: []afloat.Tool{{Name: "now"}}, ToolChoice: &afloat.ToolChoice{Mode: "required"}},
			wantAuth: "Bearer " + testKey,
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"x"}],
				"tools":[{"type":"function","function":{"name":"now"}}],"tool_choice":"required"}`,
		},
		{
			name: "json object",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_object"}, ToolChoice: &afloat.ToolChoice{Mode: "none"}},
			wantAuth: "Bearer " + testKey,
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"x"}],
				"tool_choice":"none","response_format":{"type":"json_object"}}`,
		},
		{
			name: "json schema with default name",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Schema: weatherParams, Strict: true}},
			wantAuth: "Bearer " + testKey,
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"x"}],
				"response_format":{"type":"json_schema","json_schema":{"name":"result",
				"schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}}`,
		},
		{
			name: "json schema named",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: json.RawMessage(`{}`)}},
			wantAuth: "Bearer " + testKey,
			wantBody: `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"x"}],
				"response_format":{"type":"json_schema","json_schema":{"name":"triage","schema":{},"strict":false}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "chat_ok.http")
			c := newClient(t, srv.URL, tt.mod)
			if _, err := c.Complete(t.Context(), &tt.req); err != nil {
				t.Fatal(err)
			}
			got := srv.Last(t, chatPath)
			if got.Method != "POST" || got.Path != "/v1/chat/completions" {
				t.Errorf("%s %s, want POST /v1/chat/completions", got.Method, got.Path)
			}
			if auth, ok := got.Header["Authorization"]; tt.wantAuth == "" && ok {
				t.Errorf("Authorization %q sent without a key", auth)
			} else if got.Header.Get("Authorization") != tt.wantAuth {
				t.Errorf("Authorization = %q, want %q", got.Header.Get("Authorization"), tt.wantAuth)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			for k, v := range tt.wantHdr {
				if got.Header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), v)
				}
			}
			if g, w := fixture.CanonJSON(t, got.Body), fixture.CanonJSON(t, []byte(tt.wantBody)); g != w {
				t.Errorf("body\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestCompleteRejectsBadRequests(t *testing.T) {
	user := []afloat.Message{{Role: afloat.RoleUser, Content: "x"}}
	tests := []struct {
		name    string
		mod     func(*Config)
		req     *afloat.Request
		wantErr string
	}{
		{"nil request", nil, nil, "nil request"},
		{"no model", func(c *Config) { c.Model = "" }, &afloat.Request{Messages: user}, "no model"},
		{"negative max tokens", nil, &afloat.Request{Messages: user, MaxTokens: -1}, "negative"},
		{"unknown tool choice", nil, &afloat.Request{Messages: user, ToolChoice: &afloat.ToolChoice{Mode: "any"}}, "unknown tool choice"},
		{"tool choice without name", nil, &afloat.Request{Messages: user, ToolChoice: &afloat.ToolChoice{Mode: "tool"}}, "names no tool"},
		{"unknown response format", nil, &afloat.Request{Messages: user, ResponseFormat: &afloat.ResponseFormat{Type: "yaml"}}, "unknown response format"},
		{"schema missing", nil, &afloat.Request{Messages: user, ResponseFormat: &afloat.ResponseFormat{Type: "json_schema"}}, "no schema"},
		{"parameters not json", nil, &afloat.Request{Messages: user,
			Tools: []afloat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":`)}}}, "encode request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "chat_ok.http")
			c := newClient(t, srv.URL, tt.mod)
			_, err := c.Complete(t.Context(), tt.req)
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != afloat.Contract || pe.Provider != "t-lite" {
				t.Fatalf("err = %v, want a contract *ProviderError of t-lite", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to say %q", err, tt.wantErr)
			}
			if n := len(srv.Requests(chatPath)); n != 0 {
				t.Errorf("sent %d requests, want none", n)
			}
		})
	}
}

func TestCompleteResponse(t *testing.T) {
	tests := []struct {
		fixture string
		want    *afloat.Response
	}{
		{"chat_ok.http", &afloat.Response{
			Content:      `{"department":"billing","is_urgent":0.9,"urgency_score":2.5}`,
			FinishReason: "stop", Model: "gpt-4o-2024-08-06",
			Usage: afloat.Usage{InputTokens: 87, OutputTokens: 21},
		}},
		{"chat_tool_call.http", &afloat.Response{
			ToolCalls: []afloat.ToolCall{
				{ID: "call_abc", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Moscow"}`)},
				{ID: "call_def", Name: "get_time", Arguments: json.RawMessage(`{}`)},
			},
			FinishReason: "tool_calls", Model: "gpt-4o-2024-08-06",
			Usage: afloat.Usage{InputTokens: 50, OutputTokens: 12},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			got, err := newClient(t, srv.URL, nil).Complete(t.Context(), &afloat.Request{
				Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeResponse(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantErr  string
		wantArgs string
		contract bool
	}{
		{name: "arguments as an object", body: `{"choices":[{"message":{"content":"","tool_calls":[{"id":"a","function":{"name":"f","arguments":{"x":1}}}]}}]}`, wantArgs: `{"x":1}`},
		{name: "arguments null", body: `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":null}}]}}]}`, wantArgs: `{}`},
		{name: "arguments blank string", body: `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"  "}}]}}]}`, wantArgs: `{}`},
		{name: "arguments an array", body: `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"[1]"}}]}}]}`, wantErr: "not an object", contract: true},
		{name: "arguments trailing junk", body: `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{} x"}}]}}]}`, wantErr: "arguments are not a json object", contract: true},
		{name: "not json", body: `<html>ok</html>`, wantErr: "decode response"},
		{name: "no choices field", body: `{"object":"chat.completion"}`, wantErr: "no choices"},
		{name: "choice without message", body: `{"choices":[{"index":0,"delta":{"content":"x"}}]}`, wantErr: "no choices"},
		{name: "content of the wrong type", body: `{"choices":[{"message":{"content":[{"type":"text"}]}}]}`, wantErr: "decode response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeResponse([]byte(tt.body))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if string(got.ToolCalls[0].Arguments) != tt.wantArgs {
					t.Errorf("arguments = %s, want %s", got.ToolCalls[0].Arguments, tt.wantArgs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			var ae *httpx.ArgumentsError
			if errors.As(err, &ae) != tt.contract {
				t.Errorf("ArgumentsError = %v, want %v", !tt.contract, tt.contract)
			}
		})
	}
}
