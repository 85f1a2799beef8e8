package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestStreamFixtures(t *testing.T) {
	tests := []struct {
		fixture   string
		text      string
		finish    string
		calls     []afloat.ToolCall
		usage     *afloat.Usage
		kind      afloat.Kind // of the final error, when it is not io.EOF
		errHas    string
		wantCause error
		model     string // on every chunk
		skipped   int
	}{
		{fixture: "stream_ok.http", text: "Здравствуйте! Чем помочь?", finish: "stop",
			usage: &afloat.Usage{InputTokens: 19, OutputTokens: 6}, model: "gpt-4o-2024-08-06"},
		{fixture: "stream_tool_call.http", finish: "tool_calls", model: "gpt-4o-2024-08-06",
			calls: []afloat.ToolCall{
				{ID: "call_abc", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Moscow"}`)},
				{ID: "call_def", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Kazan"}`)},
			},
			usage: &afloat.Usage{InputTokens: 50, OutputTokens: 34}},
		{fixture: "stream_error_event.http", text: "Пере", kind: afloat.Unavailable, errHas: "Sorry about that", model: "gpt-4o-2024-08-06"},
		{fixture: "stream_llamacpp_error.http", text: "Привет", kind: afloat.Unavailable, errHas: "KV cache is full", model: "t-tech/T-lite-it-1.0"},
		{fixture: "stream_truncated.http", text: "Отдел: биллинг", kind: afloat.Unavailable,
			errHas: "before [DONE]", wantCause: io.ErrUnexpectedEOF, model: "t-tech/T-lite-it-1.0"},
		// A chunk cut mid-line is skipped; [DONE] says the answer is whole.
		{fixture: "stream_malformed_chunk.http", text: "Отдел: биллинг", finish: "stop",
			usage: &afloat.Usage{InputTokens: 19, OutputTokens: 6}, model: "openai/gpt-4o-mini", skipped: 1},
		// Without [DONE] or a finish reason, a skip does not make the answer whole.
		{fixture: "stream_malformed_truncated.http", text: "Отдел", kind: afloat.Unavailable,
			errHas: "before [DONE], 1 malformed events skipped", wantCause: io.ErrUnexpectedEOF, model: "openai/gpt-4o-mini", skipped: 1},
		{fixture: "stream_content_filter.http", text: "Here is", kind: afloat.Refused,
			errHas: "refused: status 200 (content_filter): finish reason content_filter", model: "gpt-4o-2024-08-06"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			s, err := newClient(t, srv.URL, nil).Stream(t.Context(), &afloat.Request{
				Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "x"}}, MaxTokens: 50})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			chunks, err := fixture.Drain(t, s)

			got := fixture.Assemble(chunks)
			if text := strings.Join(got.Deltas, ""); text != tt.text || got.Finish != tt.finish {
				t.Errorf("text, finish = %q, %q; want %q, %q", text, got.Finish, tt.text, tt.finish)
			}
			if !reflect.DeepEqual(got.Calls, tt.calls) {
				t.Errorf("tool calls\n got %+v\nwant %+v", got.Calls, tt.calls)
			}
			if !reflect.DeepEqual(got.Usage, tt.usage) {
				t.Errorf("usage = %+v, want %+v", got.Usage, tt.usage)
			}
			if got.Empty > 0 {
				t.Error("an empty chunk was returned")
			}
			for _, ch := range chunks {
				if ch.Model != tt.model {
					t.Errorf("chunk %+v names model %q, want %q", ch, ch.Model, tt.model)
				}
			}
			if n := s.(afloat.SkipCounter).Skipped(); n != tt.skipped {
				t.Errorf("skipped %d events, want %d", n, tt.skipped)
			}
			fixture.CheckEnd(t, err, tt.kind, tt.errHas)
			if pe, ok := err.(*afloat.ProviderError); ok && pe.Provider != "t-lite" {
				t.Errorf("end = %v, want an error of t-lite", err)
			}
			if tt.wantCause != nil && !errors.Is(err, tt.wantCause) {
				t.Errorf("end = %v, want %v in its chain", err, tt.wantCause)
			}
			// The end repeats, and Close may be called twice.
			if _, again := s.Recv(); again != err {
				t.Errorf("second end = %v, want %v", again, err)
			}
			if s.Close() != nil || s.Close() != nil {
				t.Error("Close failed")
			}

			req := srv.Last(t, chatPath)
			if req.Header.Get("Accept") != "text/event-stream" {
				t.Errorf("Accept = %q", req.Header.Get("Accept"))
			}
			want := `{"model":"t-tech/T-lite-it-1.0","messages":[{"role":"user","content":"x"}],"max_tokens":50,
				"stream":true,"stream_options":{"include_usage":true}}`
			if g, w := fixture.CanonJSON(t, req.Body), fixture.CanonJSON(t, []byte(want)); g != w {
				t.Errorf("body\n got %s\nwant %s", g, w)
			}
		})
	}
}

// streamOf reads an SSE body as the stream of a 200.
func streamOf(body string) *stream {
	c := bareClient()
	return newStream(c, &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))})
}

func TestStreamEdges(t *testing.T) {
	const (
		delta = `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n"
		stop  = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
		done  = "data: [DONE]\n\n"
	)
	tests := []struct {
		name   string
		body   string
		want   []afloat.Chunk
		kind   afloat.Kind
		errHas string // "" means the stream ends with io.EOF
	}{
		{name: "finish without [DONE] ends cleanly", body: delta + stop,
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}}},
		{name: "[DONE] without its blank line", body: delta + stop + "data: [DONE]",
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}}},
		{name: "crlf lines and comments", body: ": ping\r\n\r\n" + strings.ReplaceAll(delta+stop+done, "\n", "\r\n"),
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}}},
		{name: "empty body", body: "", errHas: "before [DONE]", kind: afloat.Unavailable},
		{name: "[DONE] alone", body: done},
		{name: "multi-line data", body: "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"b\"}}]}\n\n" + stop,
			want: []afloat.Chunk{{Delta: "b"}, {FinishReason: "stop"}}},
		{name: "other choices ignored", body: `data: {"choices":[{"index":1,"delta":{"content":"z"}},{"index":0,"delta":{"content":"a"}}]}` + "\n\n" + stop,
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}}},
		{name: "tool calls flushed at [DONE] without a finish reason",
			body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"x\":"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}` + "\n\n" + done,
			want: []afloat.Chunk{{ToolCalls: []afloat.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}}}},
		{name: "whole tool call as an object with the finish",
			body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":{"x":1}}}]},"finish_reason":"tool_calls"}]}` + "\n\n" + done,
			want: []afloat.Chunk{{FinishReason: "tool_calls", ToolCalls: []afloat.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}}}},
		{name: "bad tool arguments",
			body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"x\""}}]}}]}` + "\n\n" + `data: {"choices":[{"index":0,"finish_reason":"tool_calls"}]}` + "\n\n",
			kind: afloat.Contract, errHas: `tool "f": arguments are not a json object`},
		{name: "event: error", body: delta + "event: error\ndata: {\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}\n\n",
			want: []afloat.Chunk{{Delta: "a"}}, kind: afloat.Unavailable, errHas: "error event: Overloaded"},
		{name: "ollama ndjson error line", body: delta + `{"error":"model runner crashed"}` + "\n",
			want: []afloat.Chunk{{Delta: "a"}}, kind: afloat.Unavailable, errHas: "model runner crashed"},
		{name: "error echoing the key", body: `data: {"error":{"message":"bad key ` + testKey + `"}}` + "\n\n",
			kind: afloat.Unavailable, errHas: "bad key [redacted]"},
		{name: "garbage data", body: "data: {not json\n\n", kind: afloat.Unavailable, errHas: "before [DONE], 1 malformed events skipped (last: malformed stream event: decode stream chunk"},
		{name: "garbage skipped before the finish", body: delta + "data: {not json\n\n" + "data: [1,2]\n\n" + stop,
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}}},
		{name: "event: error that is not json is still an error", body: delta + "event: error\ndata: upstream died\n\n" + done,
			want: []afloat.Chunk{{Delta: "a"}}, kind: afloat.Unavailable, errHas: "error event: upstream died"},
		{name: "error object after garbage is still an error", body: "data: {not json\n\n" + `data: {"error":{"message":"boom","code":"server_error"}}` + "\n\n" + done,
			kind: afloat.Unavailable, errHas: "error event: boom"},
		{name: "model on every chunk, from the last chunk naming it", body: `data: {"model":"m1","choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"content":"b"}}]}` + "\n\n" + `data: {"model":"m2","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + done,
			want: []afloat.Chunk{{Delta: "a", Model: "m1"}, {Delta: "b", Model: "m1"}, {FinishReason: "stop", Model: "m2"}}},
		{name: "line too long", body: "data: \"" + strings.Repeat("x", maxLine) + "\"\n\n", kind: afloat.Unavailable, errHas: "exceeds"},
		{name: "usage after the finish ends the stream", body: delta + stop + `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"content":"never read"}}]}` + "\n\n",
			want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}, {Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 4}}}},
		{name: "usage before the finish does not", body: `data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}` + "\n\n" + stop + done,
			want: []afloat.Chunk{{Delta: "a", Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 1}}, {FinishReason: "stop"}}},
		{name: "usage on its own", body: stop + `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}` + "\n\n" + done,
			want: []afloat.Chunk{{FinishReason: "stop"}, {Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := streamOf(tt.body)
			got, err := fixture.Drain(t, s)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks\n got %+v\nwant %+v", got, tt.want)
			}
			fixture.CheckEnd(t, err, tt.kind, tt.errHas)
			if err != io.EOF && strings.Contains(err.Error(), testKey) {
				t.Errorf("end = %v holds the key", err)
			}
		})
	}
}

func TestStreamDeadlineMidBody(t *testing.T) {
	srv := hangingServer(t, `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	s, err := newClient(t, srv.URL, nil).Stream(ctx, hello)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	chunks, err := fixture.Drain(t, s)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v to honour a 200ms deadline", el)
	}
	if len(chunks) != 1 || chunks[0].Delta != "a" {
		t.Errorf("chunks = %+v, want the one sent before the hang", chunks)
	}
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || !pe.Timeout {
		t.Fatalf("end = %v, want an unavailable timeout", err)
	}
}

func TestStreamCloseAbortsRecv(t *testing.T) {
	srv := hangingServer(t, `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n")
	s, err := newClient(t, srv.URL, nil).Stream(t.Context(), hello)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := s.Recv(); err != nil || ch.Delta != "a" {
		t.Fatalf("first Recv = %+v, %v", ch, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		done <- err
	}()
	s.Close()
	select {
	case err := <-done:
		if afloat.KindOf(err) != afloat.Unavailable || err == io.EOF {
			t.Errorf("Recv after Close = %v, want an unavailable error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not abort a blocked Recv")
	}
}

// TestStreamEndsAtUsageWhenHeldOpen: a server that sends the finish and the usage, then
// holds the body open without [DONE], does not hold the answer: it ends at the usage.
func TestStreamEndsAtUsageWhenHeldOpen(t *testing.T) {
	srv := hangingServer(t, `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n"+
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
		`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`+"\n\n")
	s, err := newClient(t, srv.URL, nil).Stream(t.Context(), hello)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chunks, err := fixture.Drain(t, s) // a wait for [DONE] would hang until the test's end
	if err != io.EOF || len(chunks) != 3 || chunks[2].Usage == nil {
		t.Fatalf("chunks %+v, end %v; want the text, the finish and the usage, then io.EOF", chunks, err)
	}
}

// TestUnmarshalAsJSONUnmarshal: the decoder a stream keeps for its events accepts and
// refuses what json.Unmarshal does, event after event, whatever came before.
func TestUnmarshalAsJSONUnmarshal(t *testing.T) {
	events := []string{
		`{"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"b"}}]} x`,
		`{"choices":[{"index":0,"delta":{"content":"c"}}]}}`,
		`{"choices":[{"index":0,"delta":{"content":"d"}}]}` + "  \n",
		``,
		`   `,
		`{"choices":[{"index":0,"delta":{"content":"e"}}],"usage":{"prompt_tokens":3}}`,
		`{"choices":[{"index":0,"delta":{"content":`,
		`"f"}}]}`,
		`[1,2]`,
		`{"choices":[{"index":0,"delta":{"content":"g"},"finish_reason":"stop"}]}{"model":"n"}`,
		`{"model":"o","choices":[{"index":0,"delta":{"content":"h"}}]}`,
	}
	s := streamOf("")
	for _, ev := range events {
		var got, want streamChunk
		gotErr, wantErr := s.unmarshal([]byte(ev), &got), json.Unmarshal([]byte(ev), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: error %v; json.Unmarshal's %v", ev, gotErr, wantErr)
		}
		if gotErr == io.EOF {
			t.Fatalf("%q: io.EOF would end the stream", ev)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %+v; json.Unmarshal %+v", ev, got, want)
		}
	}
}
