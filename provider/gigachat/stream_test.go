package gigachat

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestStreamFixtures(t *testing.T) {
	tests := []struct {
		fixture string
		deltas  []string
		finish  string
		calls   []afloat.ToolCall
		usage   *afloat.Usage
		errHas  string // "" means io.EOF
		model   string // on every chunk
		skipped int
	}{
		{fixture: "stream_ok.http", deltas: []string{"Здравствуйте", "! Чем помочь?"}, finish: "stop",
			usage: &afloat.Usage{InputTokens: 19, OutputTokens: 6}, model: "GigaChat-Pro:2.0.28.2"},
		// A chunk cut mid-line is skipped; [DONE] says the answer is whole.
		{fixture: "stream_malformed.http", deltas: []string{"Здравствуйте", "! Чем помочь?"}, finish: "stop",
			usage: &afloat.Usage{InputTokens: 19, OutputTokens: 6}, model: "GigaChat-2-Max:2.0.28.2", skipped: 1},
		{fixture: "stream_function_call.http", finish: "tool_calls",
			calls: []afloat.ToolCall{{ID: "gcfs_0b5c7ad6-e1d2-4c5e-9a3f-58d1f2e7c6b4", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Москва"}`)}},
			usage: &afloat.Usage{InputTokens: 138, OutputTokens: 21}},
		{fixture: "stream_error.http", deltas: []string{"Пере"}, errHas: "error event: Internal Server Error"},
		{fixture: "stream_truncated.http", deltas: []string{"Отдел: биллинг"}, errHas: "before [DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := server(t, tt.fixture)
			s, err := newClient(t, srv, nil).Stream(t.Context(), hello)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sent := srv.Last(t, chatPath)
			if sent.Header.Get("Accept") != "text/event-stream" || !strings.Contains(string(sent.Body), `"stream":true`) ||
				sent.Header.Get("Authorization") != "Bearer "+tokenOne {
				t.Errorf("stream request: headers %v, body %s", sent.Header, sent.Body)
			}
			chunks, err := fixture.Drain(t, s)
			got := fixture.Assemble(chunks)
			want := fixture.Answer{Deltas: tt.deltas, Finish: tt.finish, Calls: tt.calls, Usage: tt.usage}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("answer\n got %+v\nwant %+v", got, want)
			}
			fixture.CheckEnd(t, err, afloat.Unavailable, tt.errHas)
			if tt.model != "" {
				for _, ch := range chunks {
					if ch.Model != tt.model {
						t.Errorf("chunk %+v names model %q, want %q", ch, ch.Model, tt.model)
					}
				}
			}
			if n := s.(afloat.SkipCounter).Skipped(); n != tt.skipped {
				t.Errorf("skipped %d events, want %d", n, tt.skipped)
			}
		})
	}
}

func TestStreamRejectsAnotherContentType(t *testing.T) {
	srv := server(t, "stream_wrong_type.http")
	_, err := newClient(t, srv, nil).Stream(t.Context(), hello)
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || !strings.Contains(err.Error(), `"application/json"`) {
		t.Fatalf("err = %v, want an unavailable error naming the content type", err)
	}
}

func TestStreamEdges(t *testing.T) {
	const (
		text = `data: {"choices":[{"delta":{"content":"a"},"index":0}]}` + "\n\n"
		done = "data: [DONE]\n\n"
	)
	tests := []struct {
		name   string
		body   string
		want   []afloat.Chunk
		kind   afloat.Kind
		errHas string
	}{
		{name: "[DONE] without a finish", body: text + done, want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}}},
		{name: "text and finish in one chunk", body: `data: {"choices":[{"delta":{"content":"a"},"index":0,"finish_reason":"length"}]}` + "\n\n" + done,
			want: []afloat.Chunk{{Delta: "a", FinishReason: "length"}}},
		{name: "usage after the finish", body: `data: {"choices":[{"delta":{},"index":0,"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}` + "\n\n" + done,
			want: []afloat.Chunk{{FinishReason: "stop"}, {Usage: &afloat.Usage{InputTokens: 3, OutputTokens: 4}}}},
		{name: "arguments in string fragments", body: `data: {"choices":[{"delta":{"function_call":{"name":"f","arguments":"{\"x\":"}},"index":0}]}` + "\n\n" +
			`data: {"choices":[{"delta":{"function_call":{"arguments":"1}"}},"index":0,"finish_reason":"function_call"}]}` + "\n\n",
			want: []afloat.Chunk{{FinishReason: "tool_calls", ToolCalls: []afloat.ToolCall{{ID: "", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}}}},
		{name: "bad arguments", body: `data: {"choices":[{"delta":{"function_call":{"name":"f","arguments":[1]}},"index":0,"finish_reason":"function_call"}]}` + "\n\n",
			kind: afloat.Contract, errHas: "arguments are not a json object"},
		{name: "error event", body: text + "event: error\ndata: {\"status\":503,\"message\":\"overloaded " + testKey + "\"}\n\n",
			want: []afloat.Chunk{{Delta: "a"}}, kind: afloat.Unavailable, errHas: "error event: overloaded [redacted]"},
		{name: "garbage", body: "data: {x\n\n", kind: afloat.Unavailable, errHas: "before [DONE], 1 malformed events skipped (last: malformed stream event: decode stream chunk"},
		{name: "garbage skipped before [DONE]", body: text + "data: {x\n\n" + done, want: []afloat.Chunk{{Delta: "a"}, {FinishReason: "stop"}}},
		{name: "error event that is not json is still an error", body: text + "event: error\ndata: upstream died\n\n" + done,
			want: []afloat.Chunk{{Delta: "a"}}, kind: afloat.Unavailable, errHas: "error event: upstream died"},
		{name: "empty body", body: "", kind: afloat.Unavailable, errHas: "before [DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fixture.Drain(t, streamOf(tt.body))
			for i := range got {
				for j := range got[i].ToolCalls {
					if !callID.MatchString(got[i].ToolCalls[j].ID) {
						t.Errorf("call id %q is not synthetic", got[i].ToolCalls[j].ID)
					}
					got[i].ToolCalls[j].ID = ""
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks\n got %+v\nwant %+v", got, tt.want)
			}
			fixture.CheckEnd(t, err, tt.kind, tt.errHas)
		})
	}
}
