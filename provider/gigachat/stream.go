package gigachat

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// Stream starts a streamed call (SSE). An error before the stream follows Complete's
// contract; a 200 that is not an event stream is Unavailable. Recv then returns the text
// deltas, then one chunk with the finish reason, the function call and the usage, then
// io.EOF after [DONE]. An error inside the stream, or a body that ends before [DONE] and
// before a finish reason, is an Unavailable *afloat.ProviderError; arguments that are not a
// JSON object are Contract.
func (c *Client) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	payload, err := c.encode(req, true)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, payload, true)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		drain(resp)
		return nil, c.bodyError(resp.StatusCode, fmt.Errorf("stream answered with content type %q, not text/event-stream", mt))
	}
	return newStream(c, resp), nil
}

// maxLine bounds one SSE line; a longer one is treated as a broken stream.
const maxLine = 4 << 20

// stream reads one SSE answer. It is not safe for concurrent use, except that Close may be
// called from another goroutine to abort a blocked Recv.
type stream struct {
	c         *Client
	status    int
	body      io.ReadCloser
	events    *httpx.EventReader
	call      *partialCall
	usage     *afloat.Usage
	finished  bool // a finish_reason was seen
	eof       bool
	err       error
	closeOnce sync.Once
}

// partialCall is the function call of the answer, as its fragments arrive.
type partialCall struct {
	name, stateID string
	args          []byte
}

func newStream(c *Client, resp *http.Response) *stream {
	return &stream{c: c, status: resp.StatusCode, body: resp.Body, events: httpx.NewEventReader(resp.Body, maxLine)}
}

func (s *stream) Close() error {
	s.closeOnce.Do(func() { s.body.Close() })
	return nil
}

func (s *stream) Recv() (afloat.Chunk, error) {
	for {
		if s.err != nil {
			return afloat.Chunk{}, s.err
		}
		if s.eof {
			return afloat.Chunk{}, io.EOF
		}
		ev, err := s.events.Next()
		switch {
		case errors.Is(err, io.EOF) && s.finished:
			s.eof = true
			continue
		case errors.Is(err, io.EOF):
			s.err = s.c.bodyError(s.status, fmt.Errorf("stream ended before [DONE]: %w", io.ErrUnexpectedEOF))
			continue
		case errors.Is(err, bufio.ErrTooLong):
			s.err = s.c.bodyError(s.status, fmt.Errorf("stream line exceeds %d bytes: %w", maxLine, err))
			continue
		case err != nil:
			s.err = httpx.TransportError(s.c.name, err)
			continue
		}
		ch, emit, err := s.handle(ev)
		if err != nil {
			s.err = err
			continue
		}
		if emit {
			return ch, nil
		}
	}
}

// streamChunk is one chunk, or an error payload ({"status","message"}).
type streamChunk struct {
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
	Status  int      `json:"status"`
	Message string   `json:"message"`
}

// handle turns one event into a chunk; emit is false when the event carried nothing a
// caller needs.
func (s *stream) handle(ev httpx.Event) (ch afloat.Chunk, emit bool, err error) {
	data := ev.Data
	if string(data) == "[DONE]" {
		s.eof = true
		if s.finished {
			return afloat.Chunk{}, false, nil
		}
		// A server that sent no finish reason: deliver what is pending rather than lose it.
		return s.finish("stop")
	}
	var w streamChunk
	if err := json.Unmarshal(data, &w); err != nil {
		return afloat.Chunk{}, false, s.c.bodyError(s.status, fmt.Errorf("decode stream chunk: %w", err))
	}
	if ev.Type == "error" || (len(w.Choices) == 0 && w.Message != "") {
		msg := w.Message
		if msg == "" {
			msg = string(data)
		}
		return afloat.Chunk{}, false, s.c.bodyError(s.status, errors.New("error event: "+s.c.quote(msg)))
	}
	if w.Usage != nil {
		u := w.Usage.canonical()
		s.usage = &u
	}
	for _, c := range w.Choices {
		if c.Index != 0 || c.Delta == nil && c.FinishReason == "" {
			continue
		}
		if d := c.Delta; d != nil {
			if d.Content != "" {
				ch.Delta += d.Content
				emit = true
			}
			if fc := d.FunctionCall; fc != nil {
				if s.call == nil {
					s.call = &partialCall{}
				}
				if fc.Name != "" {
					s.call.name = fc.Name
				}
				s.call.args = appendArguments(s.call.args, fc.Arguments)
			}
			if d.FunctionsStateID != "" {
				if s.call == nil {
					s.call = &partialCall{}
				}
				s.call.stateID = d.FunctionsStateID
			}
		}
		if c.FinishReason != "" && !s.finished {
			last, _, err := s.finish(c.FinishReason)
			if err != nil {
				return afloat.Chunk{}, false, err
			}
			last.Delta = ch.Delta
			return last, true, nil
		}
	}
	if s.finished && w.Usage != nil {
		// Usage after the finish: a chunk of its own.
		u := *s.usage
		return afloat.Chunk{Usage: &u}, true, nil
	}
	return ch, emit, nil
}

// finish builds the chunk that ends the answer: the finish reason, the call, the usage.
func (s *stream) finish(reason string) (afloat.Chunk, bool, error) {
	s.finished = true
	ch := afloat.Chunk{FinishReason: finishReason(reason), Usage: s.usage}
	if s.call != nil {
		call, err := toolCall(s.call.name, s.call.args, s.call.stateID)
		if err != nil {
			pe := s.c.bodyError(s.status, err)
			pe.Kind = afloat.Contract
			return afloat.Chunk{}, false, pe
		}
		ch.ToolCalls = []afloat.ToolCall{call}
		ch.FinishReason = "tool_calls"
		s.call = nil
	}
	return ch, ch.FinishReason != "" || ch.Usage != nil || len(ch.ToolCalls) > 0, nil
}

// appendArguments adds one fragment: an object sent whole, or a string fragment.
func appendArguments(dst []byte, raw json.RawMessage) []byte {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return append(dst, s...)
		}
	}
	if string(raw) == "null" {
		return dst
	}
	return append(dst, raw...)
}
