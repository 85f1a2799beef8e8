package yandex

import (
	"encoding/json"
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
		kind    afloat.Kind // of the final error, when it is not io.EOF
		errHas  string
		skipped int
	}{
		{fixture: "stream_ok.http", deltas: []string{"Привет", "! Чем", " могу помочь?"}, finish: "stop",
			usage: &afloat.Usage{InputTokens: 19, OutputTokens: 6}},
		{fixture: "stream_tool_calls.http", finish: "tool_calls",
			calls: []afloat.ToolCall{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Saint Petersburg"}`)}},
			usage: &afloat.Usage{InputTokens: 115, OutputTokens: 13}},
		{fixture: "stream_error.http", deltas: []string{"Пере"}, kind: afloat.Unavailable, errHas: "error line: Fatal internal error"},
		{fixture: "stream_truncated.http", deltas: []string{"Отдел: биллинг"}, kind: afloat.Unavailable, errHas: "before a final status"},
		// A line cut short is skipped: the next one holds the whole text again.
		{fixture: "stream_malformed.http", deltas: []string{"Привет", "! Чем могу помочь?"}, finish: "stop",
			usage: &afloat.Usage{InputTokens: 19, OutputTokens: 6}, skipped: 1},
		{fixture: "stream_content_filter.http", deltas: []string{"Вот как"}, kind: afloat.Refused,
			errHas: "refused: status 200 (ALTERNATIVE_STATUS_CONTENT_FILTER): В интернете есть много сайтов"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			s, err := newClient(t, srv.URL, nil).Stream(t.Context(), hello)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if body := string(srv.Last(t, completionPath).Body); !strings.Contains(body, `"stream":true`) {
				t.Errorf("request body %s does not ask for a stream", body)
			}
			chunks, err := fixture.Drain(t, s)
			got := fixture.Assemble(chunks)
			clearIDs(t, got.Calls)
			want := fixture.Answer{Deltas: tt.deltas, Finish: tt.finish, Calls: tt.calls, Usage: tt.usage}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("answer\n got %+v\nwant %+v", got, want)
			}
			fixture.CheckEnd(t, err, tt.kind, tt.errHas)
			for _, ch := range chunks {
				if ch.Model != modelURI {
					t.Errorf("chunk %+v names model %q, want %q", ch, ch.Model, modelURI)
				}
			}
			if n := s.(afloat.SkipCounter).Skipped(); n != tt.skipped {
				t.Errorf("skipped %d events, want %d", n, tt.skipped)
			}
		})
	}
}

func TestStreamEdges(t *testing.T) {
	line := func(text, status string) string {
		return `{"result":{"alternatives":[{"message":{"role":"assistant","text":"` + text + `"},"status":"` + status + `"}]}}` + "\n"
	}
	tests := []struct {
		name   string
		body   string
		want   []afloat.Chunk
		kind   afloat.Kind
		errHas string
	}{
		{name: "text rewritten", body: line("abc", "ALTERNATIVE_STATUS_PARTIAL") + line("abd", "ALTERNATIVE_STATUS_FINAL"),
			want: []afloat.Chunk{{Delta: "abc", Model: modelURI}}, kind: afloat.Unavailable, errHas: "rewrote"},
		{name: "final line without usage", body: line("a", "ALTERNATIVE_STATUS_TRUNCATED_FINAL"),
			want: []afloat.Chunk{{Delta: "a", FinishReason: "length", Model: modelURI}}},
		{name: "lines after the final add nothing", body: line("a", "ALTERNATIVE_STATUS_FINAL") + line("ab", "ALTERNATIVE_STATUS_FINAL"),
			want: []afloat.Chunk{{Delta: "a", FinishReason: "stop", Model: modelURI}}},
		{name: "no wrapper", body: `{"alternatives":[{"message":{"text":"a"},"status":"ALTERNATIVE_STATUS_FINAL"}]}` + "\n",
			want: []afloat.Chunk{{Delta: "a", FinishReason: "stop", Model: modelURI}}},
		{name: "a line without alternatives is skipped", body: line("a", "ALTERNATIVE_STATUS_PARTIAL") + `{"result":{}}` + "\n" + line("ab", "ALTERNATIVE_STATUS_FINAL"),
			want: []afloat.Chunk{{Delta: "a", Model: modelURI}, {Delta: "b", FinishReason: "stop", Model: modelURI}}},
		{name: "gateway error line", body: `{"code":14,"message":"unavailable ` + testKey + `"}` + "\n", kind: afloat.Unavailable, errHas: "error line: unavailable [redacted]"},
		{name: "garbage", body: "{x\n", kind: afloat.Unavailable, errHas: "before a final status, 1 malformed events skipped (last: malformed stream event: decode stream line"},
		{name: "empty", body: "", kind: afloat.Unavailable, errHas: "before a final status"},
		{name: "bad tool arguments", body: `{"result":{"alternatives":[{"message":{"toolCallList":{"toolCalls":[{"functionCall":{"name":"f","arguments":[1]}}]}},"status":"ALTERNATIVE_STATUS_TOOL_CALLS"}]}}` + "\n",
			kind: afloat.Contract, errHas: "arguments are not a json object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fixture.Drain(t, streamOf(tt.body))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks\n got %+v\nwant %+v", got, tt.want)
			}
			fixture.CheckEnd(t, err, tt.kind, tt.errHas)
		})
	}
}
