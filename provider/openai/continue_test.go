package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// cut is a conversation whose answer was cut on another provider.
var cut = []afloat.Message{
	{Role: afloat.RoleUser, Content: "Куда отправить тикет?"},
	{Role: afloat.RoleAssistant, Content: `{"department":"bill`},
}

func TestContinuation(t *testing.T) {
	tests := []struct {
		dialect string
		want    string
	}{
		{"", "none"}, {DialectOpenAI, "none"}, {DialectOllama, "none"}, {DialectYandex, "none"},
		{DialectVLLM, "prefill"}, {DialectLlamaCpp, "prefill"},
	}
	for _, tt := range tests {
		c, err := New(Config{Dialect: tt.dialect})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Continuation(); got != tt.want {
			t.Errorf("dialect %q: Continuation() = %q, want %q", tt.dialect, got, tt.want)
		}
	}
}

func TestContinueRequestShape(t *testing.T) {
	schema := &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: weatherParams}
	const msgs = `"messages":[{"role":"user","content":"Куда отправить тикет?"},{"role":"assistant","content":"{\"department\":\"bill"}]`
	tests := []struct {
		name    string
		dialect string
		req     afloat.Request
		want    string
	}{
		{"vllm continues the final message", DialectVLLM, afloat.Request{Messages: cut, Continue: true},
			`{"model":"t-tech/T-lite-it-1.0",` + msgs + `,"continue_final_message":true,"add_generation_prompt":false}`},
		// A schema's grammar would restart the document: the joined answer is checked instead.
		{"vllm drops the response format", DialectVLLM, afloat.Request{Messages: cut, Continue: true, ResponseFormat: schema},
			`{"model":"t-tech/T-lite-it-1.0",` + msgs + `,"continue_final_message":true,"add_generation_prompt":false}`},
		{"llama.cpp continues a final assistant message as sent", DialectLlamaCpp,
			afloat.Request{Messages: cut, Continue: true, ResponseFormat: &afloat.ResponseFormat{Type: "json_object"}},
			`{"model":"t-tech/T-lite-it-1.0",` + msgs + `}`},
		{"without continue nothing is added", DialectVLLM, afloat.Request{Messages: cut},
			`{"model":"t-tech/T-lite-it-1.0",` + msgs + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				srv := fixture.NewServer(t)
				srv.Handle(chatPath, read(t, map[bool]string{false: "chat_ok.http", true: "stream_ok.http"}[stream]))
				c := newClient(t, srv.URL, func(c *Config) { c.Dialect = tt.dialect })
				if stream {
					s, err := c.Stream(t.Context(), &tt.req)
					if err != nil {
						t.Fatal(err)
					}
					fixture.Drain(t, s)
					s.Close()
				} else if _, err := c.Complete(t.Context(), &tt.req); err != nil {
					t.Fatal(err)
				}
				want := tt.want
				if stream {
					want = strings.TrimSuffix(want, "}") + `,"stream":true,"stream_options":{"include_usage":true}}`
				}
				if g, w := fixture.CanonJSON(t, srv.Last(t, chatPath).Body), fixture.CanonJSON(t, []byte(want)); g != w {
					t.Errorf("stream %v: body\n got %s\nwant %s", stream, g, w)
				}
			}
		})
	}
}

// TestContinueRefusedUnsent: a dialect without prefill, or a request with nothing to
// continue, fails as Contract before anything is sent, so a misconfiguration never passes
// for the provider's failure.
func TestContinueRefusedUnsent(t *testing.T) {
	tests := []struct {
		name    string
		dialect string
		msgs    []afloat.Message
		errHas  string
	}{
		{"openai", DialectOpenAI, cut, "cannot continue"},
		{"ollama", DialectOllama, cut, "cannot continue"},
		{"yandex", DialectYandex, cut, "cannot continue"},
		{"vllm, last message from the user", DialectVLLM, cut[:1], "not an assistant message"},
		{"llama.cpp, last message a tool call", DialectLlamaCpp, []afloat.Message{cut[0],
			{Role: afloat.RoleAssistant, ToolCalls: []afloat.ToolCall{{ID: "c", Name: "f"}}}}, "holds tool calls"},
		{"vllm, no messages", DialectVLLM, nil, "no messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "chat_ok.http")
			c := newClient(t, srv.URL, func(c *Config) { c.Dialect = tt.dialect })
			req := &afloat.Request{Messages: tt.msgs, Continue: true}
			for _, call := range fixture.Calls(t.Context(), c, req) {
				err := call.Do()
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) || pe.Kind != afloat.Contract || pe.Status != 0 || !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("%s: err = %v, want an unsent contract error saying %q", call.Name, err, tt.errHas)
				}
			}
			if n := len(srv.Requests(chatPath)); n != 0 {
				t.Errorf("sent %d requests, want none", n)
			}
		})
	}
}
