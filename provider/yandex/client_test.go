package yandex

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
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "api key", cfg: Config{APIKey: testKey}},
		{name: "iam token with folder", cfg: Config{IAMToken: testToken, FolderID: "b1g"}},
		{name: "no credentials", cfg: Config{}, wantErr: "an api key or an iam token is required"},
		{name: "both", cfg: Config{APIKey: testKey, IAMToken: testToken}, wantErr: "not both"},
		{name: "folder with a key", cfg: Config{APIKey: testKey, FolderID: "b1g"}, wantErr: "folder id goes with an iam token"},
		{name: "key newline", cfg: Config{APIKey: testKey + "\n"}, wantErr: "control character"},
		{name: "bad url", cfg: Config{APIKey: testKey, BaseURL: "llm.api.cloud.yandex.net"}, wantErr: "not an absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testToken) {
					t.Errorf("error quotes a credential: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name() != "yandexgpt" || c.endpoint != DefaultBaseURL+"/foundationModels/v1/completion" {
				t.Errorf("defaults not applied: %+v", c)
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
		noHdr    []string
		wantBody string
	}{
		{
			name: "api key, minimal (the reference's request)",
			req: afloat.Request{Temperature: ptr(0.3), MaxTokens: 2000, Messages: []afloat.Message{
				{Role: afloat.RoleSystem, Content: "Ты помощник"}, {Role: afloat.RoleUser, Content: "Привет"}}},
			wantHdr: map[string]string{"Authorization": "Api-Key " + testKey},
			noHdr:   []string{"X-Folder-Id"},
			wantBody: `{"modelUri":"gpt://b1gexamplefolder/yandexgpt/latest",
				"completionOptions":{"stream":false,"temperature":0.3,"maxTokens":"2000"},
				"messages":[{"role":"system","text":"Ты помощник"},{"role":"user","text":"Привет"}]}`,
		},
		{
			name:    "iam token with folder, model override",
			mod:     func(c *Config) { c.APIKey, c.IAMToken, c.FolderID = "", testToken, "b1gexamplefolder" },
			req:     afloat.Request{Model: "gpt://b1gexamplefolder/yandexgpt-lite/rc", Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "<hi>"}}},
			wantHdr: map[string]string{"Authorization": "Bearer " + testToken, "X-Folder-Id": "b1gexamplefolder"},
			wantBody: `{"modelUri":"gpt://b1gexamplefolder/yandexgpt-lite/rc","completionOptions":{"stream":false},
				"messages":[{"role":"user","text":"<hi>"}]}`,
		},
		{
			name: "tools and a round trip: toolCallList, then toolResultList by name",
			req: afloat.Request{
				Messages: []afloat.Message{
					{Role: afloat.RoleUser, Content: "Погода?"},
					{Role: afloat.RoleAssistant, ToolCalls: []afloat.ToolCall{
						{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Saint Petersburg"}`)},
						{ID: "call_2", Name: "get_time"}}},
					{Role: afloat.RoleTool, ToolCallID: "call_1", Name: "get_weather", Content: "8°C"},
					{Role: afloat.RoleTool, ToolCallID: "call_2", Content: "12:00"},
				},
				Tools:      []afloat.Tool{{Name: "get_weather", Description: "Weather by city", Parameters: weatherParams}, {Name: "get_time"}},
				ToolChoice: &afloat.ToolChoice{Mode: "auto"},
			},
			wantHdr: map[string]string{"Authorization": "Api-Key " + testKey},
			wantBody: `{"modelUri":"gpt://b1gexamplefolder/yandexgpt/latest","completionOptions":{"stream":false},
				"messages":[{"role":"user","text":"Погода?"},
					{"role":"assistant","toolCallList":{"toolCalls":[
						{"functionCall":{"name":"get_weather","arguments":{"city":"Saint Petersburg"}}},
						{"functionCall":{"name":"get_time","arguments":{}}}]}},
					{"role":"user","toolResultList":{"toolResults":[
						{"functionResult":{"name":"get_weather","content":"8°C"}},
						{"functionResult":{"name":"get_time","content":"12:00"}}]}}],
				"tools":[{"function":{"name":"get_weather","description":"Weather by city",
					"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
					{"function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}],
				"toolChoice":{"mode":"AUTO"}}`,
		},
		{
			name: "named tool",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				Tools: []afloat.Tool{{Name: "a"}}, ToolChoice: &afloat.ToolChoice{Mode: "tool", Name: "a"}},
			wantHdr: map[string]string{"Authorization": "Api-Key " + testKey},
			wantBody: `{"modelUri":"gpt://b1gexamplefolder/yandexgpt/latest","completionOptions":{"stream":false},
				"messages":[{"role":"user","text":"x"}],"tools":[{"function":{"name":"a","parameters":{"type":"object","properties":{}}}}],
				"toolChoice":{"functionName":"a"}}`,
		},
		{
			name: "json schema",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: weatherParams}},
			wantHdr: map[string]string{"Authorization": "Api-Key " + testKey},
			wantBody: `{"modelUri":"gpt://b1gexamplefolder/yandexgpt/latest","completionOptions":{"stream":false},
				"messages":[{"role":"user","text":"x"}],
				"jsonSchema":{"schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`,
		},
		{
			name: "json object",
			req: afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_object"}},
			wantHdr: map[string]string{"Authorization": "Api-Key " + testKey},
			wantBody: `{"modelUri":"gpt://b1gexamplefolder/yandexgpt/latest","completionOptions":{"stream":false},
				"messages":[{"role":"user","text":"x"}],"jsonObject":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "completion_ok.http")
			if _, err := newClient(t, srv.URL, tt.mod).Complete(t.Context(), &tt.req); err != nil {
				t.Fatal(err)
			}
			got := srv.Last(t, completionPath)
			if got.Method != "POST" || got.Header.Get("Content-Type") != "application/json" {
				t.Errorf("request: %s %v", got.Method, got.Header)
			}
			for k, v := range tt.wantHdr {
				if got.Header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), v)
				}
			}
			for _, k := range tt.noHdr {
				if got.Header.Get(k) != "" {
					t.Errorf("header %s sent", k)
				}
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
		{"negative cap", &afloat.Request{MaxTokens: -1, Messages: hello.Messages}, "negative"},
		{"unknown role", &afloat.Request{Messages: []afloat.Message{{Role: "developer"}}}, "unknown role"},
		{"result of an unknown call", &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleTool, ToolCallID: "x"}}}, "names no function"},
		{"unknown format", &afloat.Request{Messages: hello.Messages, ResponseFormat: &afloat.ResponseFormat{Type: "xml"}}, "unknown response format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "completion_ok.http")
			_, err := newClient(t, srv.URL, nil).Complete(t.Context(), tt.req)
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != afloat.Contract || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("err = %v, want a contract error saying %q", err, tt.errHas)
			}
			if n := len(srv.Requests(completionPath)); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
	t.Run("no model uri", func(t *testing.T) {
		srv := replay(t, "completion_ok.http")
		_, err := newClient(t, srv.URL, func(c *Config) { c.ModelURI = "" }).Complete(t.Context(), hello)
		if afloat.KindOf(err) != afloat.Contract || !strings.Contains(err.Error(), "no model uri") {
			t.Fatalf("err = %v, want a contract error", err)
		}
	})
}

func TestCompleteDecodes(t *testing.T) {
	tests := []struct {
		fixture string
		want    *afloat.Response
		kind    afloat.Kind
		errHas  string
	}{
		{fixture: "completion_ok.http", want: &afloat.Response{Content: "Привет! Чем могу помочь?", FinishReason: "stop",
			Model: modelURI, Usage: afloat.Usage{InputTokens: 19, OutputTokens: 6}}},
		{fixture: "completion_truncated.http", want: &afloat.Response{Content: `{"department": "tech`, FinishReason: "length",
			Model: modelURI, Usage: afloat.Usage{InputTokens: 120, OutputTokens: 8}}},
		// The filter's own account of the refusal is the cause, for the caller to pass on.
		{fixture: "completion_content_filter.http", kind: afloat.Refused,
			errHas: "refused: status 200 (ALTERNATIVE_STATUS_CONTENT_FILTER): В интернете есть много сайтов с информацией на эту тему. [Посмотрите, что нашлось в поиске](https://ya.ru)"},
		{fixture: "completion_tool_calls.http", want: &afloat.Response{FinishReason: "tool_calls", Model: modelURI,
			ToolCalls: []afloat.ToolCall{
				{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Saint Petersburg"}`)},
				{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Moscow"}`)}},
			Usage: afloat.Usage{InputTokens: 115, OutputTokens: 26}}},
		{fixture: "completion_bad_arguments.http", kind: afloat.Contract, errHas: `tool "get_weather": arguments are not a json object`},
		{fixture: "completion_no_alternatives.http", kind: afloat.Unavailable, errHas: "no alternatives"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			got, err := newClient(t, srv.URL, nil).Complete(t.Context(), hello)
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
			clearIDs(t, got.ToolCalls)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCountAcceptsStringsAndNumbers(t *testing.T) {
	tests := []struct {
		in   string
		want count
		ok   bool
	}{
		{`"19"`, 19, true}, {`19`, 19, true}, {`null`, 0, true}, {`""`, 0, true}, {`"-1"`, 0, false}, {`"x"`, 0, false}, {`1.5`, 0, false},
	}
	for _, tt := range tests {
		var n count
		err := json.Unmarshal([]byte(tt.in), &n)
		if (err == nil) != tt.ok || n != tt.want {
			t.Errorf("%s: %d, %v; want %d, ok %v", tt.in, n, err, tt.want, tt.ok)
		}
	}
}
