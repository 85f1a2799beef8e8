package httpx

import (
	"bufio"
	"bytes"
	"io"
)

// Event is one server-sent event, or one line of a JSON-lines body.
type Event struct {
	// Type is the event's "event:" field; "" for an unnamed event and for a JSON line.
	Type string
	// Data is the event's data lines joined by "\n", or the JSON line itself.
	Data []byte
}

// EventReader reads server-sent events (SSE) from a response body. A line starting with
// "{" is returned as an event of its own, so that a JSON-lines body (Yandex, Ollama) and a
// bare error object inside an SSE stream read the same way. It is not safe for concurrent
// use.
type EventReader struct {
	lines *bufio.Scanner
	// next is a JSON line that ended a pending event without its blank line.
	next *Event
}

// InitialLine is the starting buffer of a stream's line scanner. Most events are a few
// hundred bytes, and the scanner doubles its buffer for a longer line (up to the stream's
// maximum); the buffer lives as long as the stream, so 2,000 streams open hold 2,000 of
// them (16 KiB each were a third of a gateway's live heap).
const InitialLine = 1 << 10

// NewEventReader reads r; a line longer than maxLine bytes fails Next with bufio.ErrTooLong.
func NewEventReader(r io.Reader, maxLine int) *EventReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(InitialLine, maxLine)), maxLine)
	return &EventReader{lines: sc}
}

// Next returns the next event. It returns io.EOF when the body ends with no event pending,
// and the reader's error (bufio.ErrTooLong, a transport error) otherwise. Comments, ids and
// retry hints are skipped; a last event without its blank line is still returned.
func (r *EventReader) Next() (Event, error) {
	if r.next != nil {
		ev := *r.next
		r.next = nil
		return ev, nil
	}
	var ev Event
	var have bool
	for r.lines.Scan() {
		line := r.lines.Bytes()
		if len(line) == 0 {
			if have {
				return ev, nil
			}
			ev.Type = ""
			continue
		}
		if line[0] == '{' {
			raw := Event{Data: append([]byte(nil), line...)}
			if have {
				r.next = &raw
				return ev, nil
			}
			raw.Type = ev.Type
			return raw, nil
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if have {
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data = append(ev.Data, value...)
			have = true
		case "event":
			ev.Type = string(value)
		}
	}
	if err := r.lines.Err(); err != nil {
		return Event{}, err
	}
	if have {
		return ev, nil
	}
	return Event{}, io.EOF
}
