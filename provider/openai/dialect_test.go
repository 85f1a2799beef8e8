package openai

import (
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestDialectRequestShape(t *testing.T) {
	msgs := []afloat.Message{{Role: afloat.RoleUser, Content: "x"}}
	two := []afloat.Tool{{Name: "a"}, {Name: "b"}}
	schema := &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: weatherParams, Strict: true}
	const head = `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"x"}]`
	const toolA = `{"type":"function","function":{"name":"a"}}`
	const toolB = `{"type":"function","function":{"name":"b"}}`
	const params = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	tests := []struct {
		name    string
		dialect string
		req     afloat.Request
		want    string
	}{
		{"openai json schema", DialectOpenAI, afloat.Request{Messages: msgs, ResponseFormat: schema},
			head + `,"response_format":{"type":"json_schema","json_schema":{"name":"triage","schema":` + params + `,"strict":true}}}`},
		{"vllm takes the documented form", DialectVLLM, afloat.Request{Messages: msgs, ResponseFormat: schema, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "required"}},
			head + `,"tools":[` + toolA + `,` + toolB + `],"tool_choice":"required","response_format":{"type":"json_schema","json_schema":{"name":"triage","schema":` + params + `,"strict":true}}}`},
		{"llama.cpp json schema as json_object with schema", DialectLlamaCpp, afloat.Request{Messages: msgs, ResponseFormat: schema},
			head + `,"response_format":{"type":"json_object","schema":` + params + `}}`},
		{"llama.cpp json object unchanged", DialectLlamaCpp, afloat.Request{Messages: msgs, ResponseFormat: &afloat.ResponseFormat{Type: "json_object"}},
			head + `,"response_format":{"type":"json_object"}}`},
		{"ollama auto: no tool_choice", DialectOllama, afloat.Request{Messages: msgs, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "auto"}},
			head + `,"tools":[` + toolA + `,` + toolB + `]}`},
		{"ollama none: no tools", DialectOllama, afloat.Request{Messages: msgs, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "none"}},
			head + `}`},
		{"ollama named: that tool alone", DialectOllama, afloat.Request{Messages: msgs, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "tool", Name: "b"}},
			head + `,"tools":[` + toolB + `]}`},
		{"ollama required: the tools, unforced", DialectOllama, afloat.Request{Messages: msgs, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "required"}},
			head + `,"tools":[` + toolA + `,` + toolB + `]}`},
		{"yandex none kept", DialectYandex, afloat.Request{Messages: msgs, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "none"}},
			head + `,"tools":[` + toolA + `,` + toolB + `],"tool_choice":"none"}`},
		{"yandex named: that tool alone with auto", DialectYandex, afloat.Request{Messages: msgs, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "tool", Name: "a"}},
			head + `,"tools":[` + toolA + `],"tool_choice":"auto"}`},
		{"yandex required: auto", DialectYandex, afloat.Request{Messages: msgs, Tools: two, ToolChoice: &afloat.ToolChoice{Mode: "required"}},
			head + `,"tools":[` + toolA + `,` + toolB + `],"tool_choice":"auto"}`},
		{"yandex json schema as documented", DialectYandex, afloat.Request{Messages: msgs, ResponseFormat: schema},
			head + `,"response_format":{"type":"json_schema","json_schema":{"name":"triage","schema":` + params + `,"strict":true}}}`},
		{"openai max_completion_tokens by the client's name", DialectOpenAI, afloat.Request{Messages: msgs, MaxTokens: 64, MaxTokensParam: "max_completion_tokens"},
			head + `,"max_completion_tokens":64}`},
		{"default dialect max_completion_tokens by the client's name", "", afloat.Request{Messages: msgs, MaxTokens: 64, MaxTokensParam: "max_completion_tokens"},
			head + `,"max_completion_tokens":64}`},
		{"openai max_tokens by the client's name", DialectOpenAI, afloat.Request{Messages: msgs, MaxTokens: 64, MaxTokensParam: "max_tokens"},
			head + `,"max_tokens":64}`},
		{"vllm max_completion_tokens as max_tokens", DialectVLLM, afloat.Request{Messages: msgs, MaxTokens: 64, MaxTokensParam: "max_completion_tokens"},
			head + `,"max_tokens":64}`},
		{"llama.cpp max_completion_tokens as max_tokens", DialectLlamaCpp, afloat.Request{Messages: msgs, MaxTokens: 64, MaxTokensParam: "max_completion_tokens"},
			head + `,"max_tokens":64}`},
		{"ollama max_completion_tokens as max_tokens", DialectOllama, afloat.Request{Messages: msgs, MaxTokens: 64, MaxTokensParam: "max_completion_tokens"},
			head + `,"max_tokens":64}`},
		{"yandex max_completion_tokens as max_tokens", DialectYandex, afloat.Request{Messages: msgs, MaxTokens: 64, MaxTokensParam: "max_completion_tokens"},
			head + `,"max_tokens":64}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "chat_ok.http")
			c := newClient(t, srv.URL, func(c *Config) {
				c.Dialect = tt.dialect
				if tt.dialect == DialectYandex {
					c.Headers = map[string]string{"OpenAI-Project": "b1gfolder"}
				}
			})
			if _, err := c.Complete(t.Context(), &tt.req); err != nil {
				t.Fatal(err)
			}
			got := srv.Last(t, chatPath)
			if g, w := fixture.CanonJSON(t, got.Body), fixture.CanonJSON(t, []byte(tt.want)); g != w {
				t.Errorf("body\n got %s\nwant %s", g, w)
			}
			if tt.dialect == DialectYandex && (got.Header.Get("OpenAI-Project") != "b1gfolder" || got.Header.Get("Authorization") != "Bearer "+testKey) {
				t.Errorf("yandex headers = %v", got.Header)
			}
		})
	}
}

func TestDialectUnknown(t *testing.T) {
	_, err := New(Config{Dialect: "lmstudio"})
	if err == nil || !strings.Contains(err.Error(), `unknown dialect "lmstudio"`) {
		t.Fatalf("err = %v, want an unknown dialect", err)
	}
}

// TestDialectKeepsErrors: a choice a dialect cannot place is still refused, not dropped.
func TestDialectKeepsErrors(t *testing.T) {
	for _, d := range []string{DialectOllama, DialectYandex} {
		_, err := encodeFor(&afloat.Request{Model: "m", Tools: []afloat.Tool{{Name: "a"}},
			ToolChoice: &afloat.ToolChoice{Mode: "sometimes"}}, "", false, d)
		if err == nil || !strings.Contains(err.Error(), "unknown tool choice") {
			t.Errorf("%s: err = %v, want an unknown tool choice", d, err)
		}
	}
}
