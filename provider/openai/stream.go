package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// Stream starts a streamed call (SSE, with stream_options.include_usage). An error before the
// stream follows Complete's contract. Recv then returns the text deltas, then one chunk with
// the finish reason and the whole tool calls, then the usage, then io.EOF after [DONE] (or
// after the usage, which include_usage sends last, when it follows the finish); each
// chunk names the model the chunks name. A chunk that cannot be parsed is skipped and
// counted (the stream is an afloat.SkipCounter). An error event inside the stream, or a body
// that ends before [DONE] and before a finish reason, is an Unavailable
// *afloat.ProviderError; a finish reason of content_filter is Refused; tool arguments that
// are not a JSON object are Contract.
func (c *Client) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	resp, err := c.send(ctx, req, true)
	if err != nil {
		return nil, err
	}
	return newStream(c, resp), nil
}

const (
	// maxLine bounds one SSE line; a longer one is treated as a broken stream.
	maxLine = 4 << 20
)

// stream reads one SSE answer: httpx.Stream runs the loop, the methods below read and decode
// the events. It is not safe for concurrent use, except that Close may be called from another
// goroutine to abort a blocked Recv.
type stream struct {
	*httpx.Stream
	c      *Client
	status int
	lines  *bufio.Scanner
	// calls accumulates tool call fragments in the order their indexes first appeared.
	calls    []partialCall
	byIndex  map[int]int
	finished bool   // a finish_reason was seen
	model    string // the model the chunks name
	// data is the array the events' data is read into: an event is decoded before the
	// next is read.
	data []byte
	// dec decodes the events' JSON from rd, fed bytes so far (see unmarshal).
	rd  bytes.Reader
	dec *json.Decoder
	fed int64
}

// unmarshal is json.Unmarshal of one event's data into v, by a decoder the stream keeps:
// Unmarshal builds its decoder's state anew for every call, five allocations a chunk of the
// thousands a stream relays. As Unmarshal, it refuses anything but space after the value;
// after an error the next event gets a new decoder.
func (s *stream) unmarshal(data []byte, v any) error {
	if s.dec == nil {
		s.dec, s.fed = json.NewDecoder(&s.rd), 0
	}
	s.rd.Reset(data)
	s.fed += int64(len(data))
	err := s.dec.Decode(v)
	if err == nil {
		// What the decoder has not consumed of all it was given is the end of this event.
		if left := s.fed - s.dec.InputOffset(); left > 0 && len(bytes.TrimSpace(data[len(data)-int(min(left, int64(len(data)))):])) > 0 {
			err = errors.New("invalid character after the JSON value")
		}
	}
	if err != nil {
		s.dec = nil
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // no value at all: not the end of the stream
		}
	}
	return err
}

var _ afloat.SkipCounter = (*stream)(nil)

type partialCall struct {
	id, name string
	args     []byte
}

func newStream(c *Client, resp *http.Response) *stream {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, httpx.InitialLine), maxLine)
	s := &stream{c: c, status: resp.StatusCode, lines: sc, byIndex: map[int]int{}}
	s.Stream = &httpx.Stream{Provider: c.name, Response: resp, Next: s.nextEvent,
		MaxLine: maxLine, End: "[DONE]", Decoder: s}
	return s
}

// Finished reports whether a finish_reason was seen.
func (s *stream) Finished() bool { return s.finished }

// nextEvent returns the next event: its type and data (data lines joined by "\n"). It
// returns io.EOF when the body ends with no event pending. llama.cpp's "error: {…}" lines and
// bare JSON lines (NDJSON) are read as events too. It is not httpx.EventReader, which reads
// no "error:" line and returns pending data before a JSON line rather than dropping it.
func (s *stream) nextEvent() (httpx.Event, error) {
	ev, err := s.readEvent(s.data[:0])
	if cap(ev.Data) > cap(s.data) {
		s.data = ev.Data[:0]
	}
	return ev, err
}

// readEvent is nextEvent, its data read into buf's array.
func (s *stream) readEvent(buf []byte) (httpx.Event, error) {
	ev := httpx.Event{Data: buf}
	var have bool
	for s.lines.Scan() {
		line := s.lines.Bytes()
		if len(line) == 0 {
			if have {
				return ev, nil
			}
			ev.Type = ""
			continue
		}
		if line[0] == '{' {
			return httpx.Event{Type: ev.Type, Data: append(buf[:0], line...)}, nil
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
		case "error":
			return httpx.Event{Type: "error", Data: append(buf[:0], value...)}, nil
		}
		// Comments (": keep-alive"), ids and retry hints carry nothing for us.
	}
	if err := s.lines.Err(); err != nil {
		return httpx.Event{}, err
	}
	if have {
		// A last event without its blank line: take it rather than lose a [DONE].
		return ev, nil
	}
	return httpx.Event{}, io.EOF
}

// streamChunk is one chat.completion.chunk, or an error payload.
type streamChunk struct {
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// Decode turns one event into a chunk, naming the model; emit is false when the event
// carried nothing a caller needs (a role-only delta, a tool call fragment). [DONE] ends the
// stream.
func (s *stream) Decode(ev httpx.Event) (afloat.Chunk, bool, error) {
	ch, emit, err := s.decode(ev)
	ch.Model = s.model
	return ch, emit, err
}

func (s *stream) decode(ev httpx.Event) (ch afloat.Chunk, emit bool, err error) {
	data := bytes.TrimSpace(ev.Data)
	if string(data) == "[DONE]" {
		// Calls still pending here come from a server that sent no finish reason: deliver
		// them rather than lose them.
		calls, err := s.toolCalls()
		if err != nil {
			return afloat.Chunk{}, false, err
		}
		return afloat.Chunk{ToolCalls: calls}, len(calls) > 0, io.EOF
	}
	if ev.Type == "error" {
		return afloat.Chunk{}, false, s.eventError(data)
	}
	var w streamChunk
	if err := s.unmarshal(data, &w); err != nil {
		return afloat.Chunk{}, false, httpx.Malformed(fmt.Errorf("decode stream chunk: %w", err))
	}
	if len(bytes.TrimSpace(w.Error)) > 0 && string(bytes.TrimSpace(w.Error)) != "null" {
		return afloat.Chunk{}, false, s.eventError(data)
	}
	if w.Model != "" {
		s.model = w.Model
	}
	for _, c := range w.Choices {
		if c.Index != 0 {
			continue
		}
		delta := c.Delta
		if delta == nil {
			delta = c.Message // a server that answered one whole message as a chunk
		}
		if delta != nil {
			if delta.Content != nil && *delta.Content != "" {
				ch.Delta += *delta.Content
				emit = true
			}
			s.accumulate(delta.ToolCalls)
		}
		if c.FinishReason == finishContentFilter {
			return afloat.Chunk{}, false, contentFiltered(s.c.name, s.status)
		}
		if c.FinishReason != "" && !s.finished {
			s.finished = true
			ch.FinishReason = c.FinishReason
			calls, err := s.toolCalls()
			if err != nil {
				return afloat.Chunk{}, false, err
			}
			ch.ToolCalls = calls
			emit = true
		}
	}
	if w.Usage != nil {
		u := w.Usage.canonical()
		ch.Usage = &u
		emit = true
		if s.finished {
			// The usage of include_usage comes last, after the finish: the answer is whole,
			// whether or not [DONE] follows (a server may hold the body open without it).
			return ch, emit, io.EOF
		}
	}
	return ch, emit, nil
}

// eventError reads an error event. Whatever status the payload names, an error inside a 200
// stream says the provider failed mid-answer: Unavailable.
func (s *stream) eventError(data []byte) error {
	pe := httpx.BodyError(s.c.name, s.status, nil)
	e, ok := parseErrorBody(data)
	if !ok {
		// A bare object such as llama.cpp's {"code":500,"message":…} lacks the wrapper.
		e, ok = parseErrorBody(append(append([]byte(`{"error":`), data...), '}'))
	}
	pe.Code = e.label()
	switch {
	case ok && e.message != "":
		pe.Err = errors.New("error event: " + s.c.quote(e.message))
	default:
		pe.Err = errors.New("error event: " + s.c.quote(string(data)))
	}
	return pe
}

// accumulate adds tool call fragments. A fragment without an index is taken as the one at
// its position in the delta.
func (s *stream) accumulate(frags []toolCall) {
	for i, f := range frags {
		idx := i
		if f.Index != nil {
			idx = *f.Index
		}
		pos, ok := s.byIndex[idx]
		if !ok {
			pos = len(s.calls)
			s.byIndex[idx] = pos
			s.calls = append(s.calls, partialCall{})
		}
		p := &s.calls[pos]
		if p.id == "" {
			p.id = f.ID
		}
		if p.name == "" {
			p.name = f.Function.Name
		}
		p.args = httpx.AppendArguments(p.args, f.Function.Arguments)
	}
}

// toolCalls returns the accumulated calls, with arguments parsed to objects, and forgets them.
func (s *stream) toolCalls() ([]afloat.ToolCall, error) {
	if len(s.calls) == 0 {
		return nil, nil
	}
	out := make([]afloat.ToolCall, 0, len(s.calls))
	for _, p := range s.calls {
		args, err := parseArguments(p.args)
		if err != nil {
			return nil, httpx.DecodeError(s.c.name, s.status, &httpx.ArgumentsError{Tool: p.name, Err: err})
		}
		out = append(out, afloat.ToolCall{ID: p.id, Name: p.name, Arguments: args})
	}
	s.calls, s.byIndex = nil, map[int]int{}
	return out, nil
}
