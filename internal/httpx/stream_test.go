package httpx

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/afloat-dev/afloat"
)

// script is a Decoder of events whose data is a command: "text" emits a delta, "finish"
// sets Finished and emits a finish reason, "end" is the end marker, "end+text" emits a last
// delta with the end, "bad" fails, "garbled" is malformed, "nothing" emits nothing.
type script struct{ finished bool }

func (d *script) Finished() bool { return d.finished }

func (d *script) Decode(ev Event) (afloat.Chunk, bool, error) {
	switch cmd := string(ev.Data); cmd {
	case "finish":
		d.finished = true
		return afloat.Chunk{FinishReason: "stop"}, true, nil
	case "end":
		return afloat.Chunk{}, false, io.EOF
	case "end+text":
		return afloat.Chunk{Delta: "last"}, true, io.EOF
	case "bad":
		return afloat.Chunk{}, false, errors.New("bad event")
	case "garbled":
		return afloat.Chunk{}, false, Malformed(errors.New("unexpected end of JSON input"))
	case "nothing":
		return afloat.Chunk{}, false, nil
	default:
		return afloat.Chunk{Delta: cmd}, true, nil
	}
}

// events returns a Next that yields one event per command, then end.
func events(end error, cmds ...string) func() (Event, error) {
	return func() (Event, error) {
		if len(cmds) == 0 {
			return Event{}, end
		}
		ev := Event{Data: []byte(cmds[0])}
		cmds = cmds[1:]
		return ev, nil
	}
}

func TestStream(t *testing.T) {
	reset := syscall.ECONNRESET
	tests := []struct {
		name    string
		next    func() (Event, error)
		want    []string // deltas and finish reasons, in order
		errHas  string   // "" means io.EOF
		kind    afloat.Kind
		cause   error
		plain   bool // the Decoder's own error, returned as it is
		skipped int
	}{
		{name: "end marker", next: events(io.EOF, "a", "nothing", "b", "end", "never read"), want: []string{"a", "b"}},
		{name: "chunk with the end marker", next: events(io.EOF, "a", "end+text", "never read"), want: []string{"a", "last"}},
		{name: "finished body without marker", next: events(io.EOF, "a", "finish"), want: []string{"a", "stop"}},
		{name: "cut short", next: events(io.EOF, "a"), want: []string{"a"},
			errHas: "status 200: stream ended before [DONE]: unexpected EOF", kind: afloat.Unavailable, cause: io.ErrUnexpectedEOF},
		{name: "line too long", next: events(bufio.ErrTooLong, "a"), want: []string{"a"},
			errHas: "stream line exceeds 64 bytes", kind: afloat.Unavailable, cause: bufio.ErrTooLong},
		{name: "read fails", next: events(reset, "a", "finish"), want: []string{"a", "stop"},
			errHas: "connection reset", kind: afloat.Unavailable, cause: reset},
		{name: "decoder fails", next: events(io.EOF, "a", "bad", "b"), want: []string{"a"}, errHas: "bad event", plain: true},
		{name: "malformed events skipped, the end marker decides", next: events(io.EOF, "a", "garbled", "b", "garbled", "end"),
			want: []string{"a", "b"}, skipped: 2},
		{name: "malformed event skipped, the finish decides", next: events(io.EOF, "a", "garbled", "finish"),
			want: []string{"a", "stop"}, skipped: 1},
		{name: "malformed events do not make a cut body whole", next: events(io.EOF, "a", "garbled"), want: []string{"a"},
			errHas: "stream ended before [DONE], 1 malformed events skipped (last: malformed stream event: unexpected end of JSON input): unexpected EOF",
			kind:   afloat.Unavailable, cause: io.ErrUnexpectedEOF, skipped: 1},
		{name: "an error after a skip still ends the stream", next: events(io.EOF, "garbled", "bad", "b"), errHas: "bad event", plain: true, skipped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Stream{Provider: "p", Response: &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(""))},
				Next: tt.next, MaxLine: 64, End: "[DONE]", Decoder: &script{}}
			var got []string
			var err error
			for range 100 {
				var ch afloat.Chunk
				if ch, err = s.Recv(); err != nil {
					break
				}
				got = append(got, ch.Delta+ch.FinishReason)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks %q, want %q", got, tt.want)
			}
			if _, again := s.Recv(); again != err {
				t.Errorf("Recv after the end = %v, want %v again", again, err)
			}
			if s.Skipped() != tt.skipped {
				t.Errorf("Skipped() = %d, want %d", s.Skipped(), tt.skipped)
			}
			if tt.errHas == "" {
				if err != io.EOF {
					t.Fatalf("end = %v, want io.EOF", err)
				}
				return
			}
			if !strings.Contains(err.Error(), tt.errHas) || (tt.cause != nil && !errors.Is(err, tt.cause)) {
				t.Fatalf("end = %v, want it to say %q", err, tt.errHas)
			}
			var pe *afloat.ProviderError
			if !tt.plain && (!errors.As(err, &pe) || pe.Kind != tt.kind || pe.Provider != "p") {
				t.Errorf("end = %v, want a %s error of p", err, tt.kind)
			}
			if tt.plain && err.Error() != tt.errHas {
				t.Errorf("end = %v, want the decoder's error as it is", err)
			}
		})
	}
}

func TestStreamCloseOnce(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader("")}
	s := &Stream{Response: &http.Response{Body: body}}
	if s.Close() != nil || s.Close() != nil || body.closed != 1 {
		t.Errorf("body closed %d times by two Close calls, want 1", body.closed)
	}
}
