package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestContinuation(t *testing.T) {
	if got := newClient(t, "http://127.0.0.1", nil).Continuation(); got != "prefill" {
		t.Errorf("Continuation() = %q, want prefill", got)
	}
}

// cut is a conversation whose answer was cut on another provider after a space.
var cut = []afloat.Message{
	{Role: afloat.RoleSystem, Content: "Отвечай JSON."},
	{Role: afloat.RoleUser, Content: "Куда отправить тикет?"},
	{Role: afloat.RoleAssistant, Content: "{\"department\": \n"},
}

// TestPrefillRequestShape: the cut answer goes last, as the assistant turn the API
// continues, without its trailing white space (which the API refuses) and without the
// forced answer tool, which would answer anew.
func TestPrefillRequestShape(t *testing.T) {
	schema := &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: json.RawMessage(`{"type":"object"}`)}
	const want = `{"model":"claude-sonnet-4-5","max_tokens":4096,"system":"Отвечай JSON.","messages":[
		{"role":"user","content":"Куда отправить тикет?"},{"role":"assistant","content":"{\"department\":"}]}`
	for _, stream := range []bool{false, true} {
		srv := fixture.NewServer(t)
		srv.Handle(messagesPath, read(t, map[bool]string{false: "msg_continued.http", true: "stream_continued.http"}[stream]))
		c := newClient(t, srv.URL, nil)
		req := &afloat.Request{Messages: cut, Continue: true, ResponseFormat: schema}
		var text string
		if stream {
			s, err := c.Stream(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := fixture.Drain(t, s)
			if err != io.EOF {
				t.Fatal(err)
			}
			got := fixture.Assemble(chunks)
			if got.Empty > 0 {
				t.Error("an empty chunk was returned")
			}
			text = strings.Join(got.Deltas, "")
		} else {
			resp, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			text = resp.Content
		}
		w := want
		if stream {
			w = strings.TrimSuffix(w, "}") + `,"stream":true}`
		}
		if g, w := fixture.CanonJSON(t, srv.Last(t, messagesPath).Body), fixture.CanonJSON(t, []byte(w)); g != w {
			t.Errorf("stream %v: body\n got %s\nwant %s", stream, g, w)
		}
		// Only what the model added, without the white space the caller's text still ends
		// with: joined, the answer reads as one.
		if text != `"billing","is_urgent":true}` {
			t.Errorf("stream %v: continuation = %q", stream, text)
		}
		if joined := cut[2].Content + text; !json.Valid([]byte(joined)) {
			t.Errorf("stream %v: joined answer %q is not JSON", stream, joined)
		}
	}
}

// TestPrefillWithoutTrailingSpace: a prefill sent whole leaves the answer as it came.
func TestPrefillWithoutTrailingSpace(t *testing.T) {
	srv := replay(t, "msg_continued.http")
	msgs := []afloat.Message{cut[1], {Role: afloat.RoleAssistant, Content: `{"department":`}}
	resp, err := newClient(t, srv.URL, nil).Complete(t.Context(), &afloat.Request{Messages: msgs, Continue: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != ` "billing","is_urgent":true}` {
		t.Errorf("continuation = %q, want it as the model sent it", resp.Content)
	}
	var body struct {
		Messages []message `json:"messages"`
	}
	json.Unmarshal(srv.Last(t, messagesPath).Body, &body)
	if last := body.Messages[len(body.Messages)-1]; !reflect.DeepEqual(last, message{Role: "assistant", Content: `{"department":`}) {
		t.Errorf("last message sent = %+v, want the prefill unchanged", last)
	}
}

func TestContinueRejectsWhatCannotBeContinued(t *testing.T) {
	tests := []struct {
		name   string
		msgs   []afloat.Message
		errHas string
	}{
		{"last message from the user", cut[:2], "not an assistant message"},
		{"last message a tool call", []afloat.Message{cut[1], {Role: afloat.RoleAssistant,
			ToolCalls: []afloat.ToolCall{{ID: "t", Name: "f"}}}}, "holds tool calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay(t, "msg_ok.http")
			c := newClient(t, srv.URL, nil)
			for _, call := range fixture.Calls(t.Context(), c, &afloat.Request{Messages: tt.msgs, Continue: true}) {
				err := call.Do()
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) || pe.Kind != afloat.Contract || !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("%s: err = %v, want a contract error saying %q", call.Name, err, tt.errHas)
				}
			}
			if n := len(srv.Requests(messagesPath)); n != 0 {
				t.Errorf("sent %d requests, want none", n)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	srv := replay(t, "msg_refusal.http")
	resp, err := newClient(t, srv.URL, nil).Complete(t.Context(), hello)
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != afloat.Refused || pe.Status != 200 || pe.Code != "refusal" || resp != nil {
		t.Fatalf("Complete = %+v, %v; want a refused error", resp, err)
	}
	if pe.Kind.CountsAsFailure() || pe.Transient() || afloat.OutcomeError(err) != afloat.OutcomeRefused {
		t.Errorf("%v counts toward the breaker or may be retried", err)
	}
	if cause := errors.Unwrap(err); cause == nil || cause.Error() != "stop reason refusal" {
		t.Errorf("cause = %v, want the stop reason", cause)
	}
	if strings.Contains(err.Error(), "Step one") {
		t.Errorf("error %q quotes the text before the refusal", err)
	}
}

func TestProbe(t *testing.T) {
	tests := []struct {
		fixture string
		kind    afloat.Kind
		status  int
		errHas  string // "" means the probe passes
	}{
		{fixture: "models_ok.http"},
		{fixture: "err_401_authentication.http", kind: afloat.Unusable, status: 401, errHas: "invalid x-api-key"},
		{fixture: "err_529_overloaded.http", kind: afloat.Unavailable, status: 529, errHas: "Overloaded"},
		{fixture: "err_429_spend_limit.http", kind: afloat.Unusable, status: 429, errHas: "usage limits"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := fixture.NewServer(t)
			srv.Handle("/v1/models", read(t, tt.fixture))
			c := newClient(t, srv.URL, func(c *Config) { c.Headers = map[string]string{"anthropic-beta": "x"} })
			err := c.Probe(t.Context())
			got := srv.Last(t, "/v1/models")
			if got.Method != "GET" || got.Header.Get("X-Api-Key") != testKey || got.Header.Get("Anthropic-Version") != DefaultVersion ||
				got.Header.Get("Anthropic-Beta") != "x" {
				t.Errorf("probe sent %s with headers %v", got.Method, got.Header)
			}
			if len(srv.Requests(messagesPath)) != 0 {
				t.Error("probe sent a message")
			}
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("Probe = %v, want nil", err)
				}
				return
			}
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != tt.status || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Probe = %v, want a %s error of status %d saying %q", err, tt.kind, tt.status, tt.errHas)
			}
		})
	}
}
