package httpx

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestEventReader(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []Event
		err  error // the error after the events
	}{
		{name: "empty", body: "", err: io.EOF},
		{name: "two events", body: "data: a\n\ndata: b\n\n",
			want: []Event{{Data: []byte("a")}, {Data: []byte("b")}}, err: io.EOF},
		{name: "named events and comments", body: ": ping\n\nevent: message_start\ndata: {\"x\":1}\n\nevent: ping\ndata: {}\n\n",
			want: []Event{{Type: "message_start", Data: []byte(`{"x":1}`)}, {Type: "ping", Data: []byte("{}")}}, err: io.EOF},
		{name: "crlf", body: "event: e\r\ndata: x\r\n\r\n", want: []Event{{Type: "e", Data: []byte("x")}}, err: io.EOF},
		{name: "multi-line data", body: "data: a\ndata: b\n\n", want: []Event{{Data: []byte("a\nb")}}, err: io.EOF},
		{name: "last event without blank line", body: "data: [DONE]", want: []Event{{Data: []byte("[DONE]")}}, err: io.EOF},
		{name: "json lines", body: "{\"a\":1}\n{\"a\":2}\n",
			want: []Event{{Data: []byte(`{"a":1}`)}, {Data: []byte(`{"a":2}`)}}, err: io.EOF},
		{name: "json line after pending data", body: "data: a\n{\"error\":\"x\"}\n",
			want: []Event{{Data: []byte("a")}, {Data: []byte(`{"error":"x"}`)}}, err: io.EOF},
		{name: "id and retry skipped", body: "id: 7\nretry: 10\ndata: a\n\n", want: []Event{{Data: []byte("a")}}, err: io.EOF},
		{name: "line too long", body: "data: " + strings.Repeat("x", 100) + "\n\n", err: bufio.ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewEventReader(strings.NewReader(tt.body), 64)
			var got []Event
			var err error
			for range 100 {
				var ev Event
				if ev, err = r.Next(); err != nil {
					break
				}
				got = append(got, ev)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events\n got %q\nwant %q", got, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("end = %v, want %v", err, tt.err)
			}
		})
	}
}
