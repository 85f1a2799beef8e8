package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestStreamFixtures(t *testing.T) {
	schemaReq := &afloat.Request{Messages: hello.Messages,
		ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "triage", Schema: json.RawMessage(`{"type":"object"}`)}}
	tests := []struct {
		fixture string
		req     *afloat.Request
		deltas  []string
		finish  string
		calls   []afloat.ToolCall
		usage   *afloat.Usage
		kind    afloat.Kind // of the final error, when it is not io.EOF
		errHas  string
		model   string // on every chunk; "" means claude-sonnet-4-5-20250929
		skipped int
	}{
		{fixture: "stream_ok.http", req: hello, deltas: []string{"Здравствуйте", "! Чем помочь?"}, finish: "stop",
			usage: &afloat.Usage{InputTokens: 25, OutputTokens: 15}},
		// An event cut mid-line is skipped; message_stop says the answer is whole.
		{fixture: "stream_malformed.http", req: hello, deltas: []string{"Здравствуйте", "! Чем помочь?"}, finish: "stop",
			usage: &afloat.Usage{InputTokens: 25, OutputTokens: 15}, model: "claude-haiku-4-5-20251001", skipped: 1},
		{fixture: "stream_refusal.http", req: hello, deltas: []string{"Step one is to"}, kind: afloat.Refused,
			errHas: "refused: status 200 (refusal): stop reason refusal"},
		{fixture: "stream_tool_use.http", req: hello, deltas: []string{"Проверю погоду."}, finish: "tool_calls",
			calls: []afloat.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Moscow"}`)}},
			usage: &afloat.Usage{InputTokens: 472, OutputTokens: 89}},
		{fixture: "stream_answer_tool.http", req: schemaReq, deltas: []string{`{"department":"tech`, `nical"}`}, finish: "stop",
			usage: &afloat.Usage{InputTokens: 300, OutputTokens: 20}},
		{fixture: "stream_error_event.http", req: hello, deltas: []string{"Пере"}, kind: afloat.Unavailable, errHas: "error event: Overloaded"},
		{fixture: "stream_truncated.http", req: hello, deltas: []string{"Отдел: биллинг"}, kind: afloat.Unavailable, errHas: "before message_stop"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			s, err := newClient(t, srv.URL, nil).Stream(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sent := srv.Last(t, messagesPath)
			if sent.Header.Get("Accept") != "text/event-stream" || !strings.Contains(string(sent.Body), `"stream":true`) {
				t.Errorf("stream request: accept %q, body %s", sent.Header.Get("Accept"), sent.Body)
			}
			chunks, err := fixture.Drain(t, s)
			got := fixture.Assemble(chunks)
			want := fixture.Answer{Deltas: tt.deltas, Finish: tt.finish, Calls: tt.calls, Usage: tt.usage}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("answer\n got %+v\nwant %+v", got, want)
			}
			fixture.CheckEnd(t, err, tt.kind, tt.errHas)
			if _, again := s.Recv(); again != err {
				t.Errorf("Recv after the end = %v, want %v again", again, err)
			}
			model := tt.model
			if model == "" {
				model = "claude-sonnet-4-5-20250929"
			}
			for _, ch := range chunks {
				if ch.Model != model {
					t.Errorf("chunk %+v names model %q, want %q", ch, ch.Model, model)
				}
			}
			if n := s.(afloat.SkipCounter).Skipped(); n != tt.skipped {
				t.Errorf("skipped %d events, want %d", n, tt.skipped)
			}
		})
	}
}

func TestStreamEdges(t *testing.T) {
	const (
		start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
		text  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n"
		tool  = "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}\n\n"
		end   = "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":4}}\n\n"
		stop  = "data: {\"type\":\"message_stop\"}\n\n"
	)
	args := func(s string) string {
		return "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":" + s + "}}\n\n"
	}
	tests := []struct {
		name       string
		body       string
		answerTool string
		want       []afloat.Chunk
		kind       afloat.Kind
		errHas     string // "" means io.EOF
	}{
		{name: "events without event lines", body: start + text + tool + end + stop,
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "tool_calls", ToolCalls: []afloat.ToolCall{{ID: "t1", Name: "f", Arguments: json.RawMessage(`{}`)}},
				Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 4}}}},
		{name: "finished without message_stop ends cleanly", body: start + text + end[:len(end)-2],
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "tool_calls", Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 4}}}},
		{name: "message_stop without stop reason", body: text + stop,
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop", Usage: &afloat.Usage{}}}},
		{name: "bad tool input", body: start + tool + args(`"{\"x\""`) + end, kind: afloat.Contract, errHas: "arguments are not a json object"},
		{name: "answer tool without input", body: start + tool + end, answerTool: "f",
			want: []afloat.Chunk{{Delta: "{}", FinishReason: "stop", Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 4}}}},
		{name: "garbage", body: "data: {nope\n\n", kind: afloat.Unavailable, errHas: "before message_stop, 1 malformed events skipped (last: malformed stream event: decode stream event"},
		{name: "garbage skipped before message_stop", body: text + "data: {nope\n\n" + "event: content_block_delta\ndata: [1]\n\n" + stop,
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop", Usage: &afloat.Usage{}}}},
		{name: "error event that is not json is still an error", body: text + "event: error\ndata: upstream died\n\n" + stop,
			want: []afloat.Chunk{{Delta: "a"}}, kind: afloat.Unavailable, errHas: "error event: upstream died"},
		{name: "empty body", body: "", kind: afloat.Unavailable, errHas: "before message_stop"},
		{name: "error without wrapper", body: text + "event: error\ndata: {\"type\":\"error\"}\n\n",
			want: []afloat.Chunk{{Delta: "a"}}, kind: afloat.Unavailable, errHas: `error event: {"type":"error"}`},
		{name: "line too long", body: "data: \"" + strings.Repeat("x", maxLine) + "\"\n\n", kind: afloat.Unavailable, errHas: "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fixture.Drain(t, streamOf(tt.body, tt.answerTool))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks\n got %+v\nwant %+v", got, tt.want)
			}
			fixture.CheckEnd(t, err, tt.kind, tt.errHas)
		})
	}
}

// TestStreamCancelMidBody: the cascade cuts a stalled stream by cancelling its context; Recv
// must then return at once, as an unavailable timeout.
func TestStreamCancelMidBody(t *testing.T) {
	srv := fixture.NewServer(t)
	release := make(chan struct{})
	defer close(release)
	srv.HandleFunc(messagesPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	s, err := newClient(t, srv.URL, nil).Stream(ctx, hello)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ch, err := s.Recv(); err != nil || ch.Delta != "a" {
		t.Fatalf("first Recv = %+v, %v", ch, err)
	}
	cancel()
	_, err = s.Recv()
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || !pe.Timeout {
		t.Fatalf("Recv after cancel = %v, want an unavailable timeout", err)
	}
}
