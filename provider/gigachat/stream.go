package gigachat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// Stream starts a streamed call (SSE). An error before the stream follows Complete's
// contract; a 200 that is not an event stream is Unavailable. Recv then returns the text
// deltas, then one chunk with the finish reason, the function call and the usage, then
// io.EOF after [DONE]; each chunk names the model the chunks name. A chunk that cannot be
// parsed is skipped and counted (the stream is an afloat.SkipCounter). An error inside the
// stream, or a body that ends before [DONE] and before a finish reason, is an Unavailable
// *afloat.ProviderError; arguments that are not a JSON object are Contract.
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
		return nil, httpx.BodyError(c.name, resp.StatusCode,
			fmt.Errorf("stream answered with content type %q, not text/event-stream", mt))
	}
	return newStream(c, resp), nil
}

// maxLine bounds one SSE line; a longer one is treated as a broken stream.
const maxLine = 4 << 20

// stream reads one SSE answer: httpx.Stream runs the loop, the methods below decode the
// events. It is not safe for concurrent use, except that Close may be called from another
// goroutine to abort a blocked Recv.
type stream struct {
	*httpx.Stream
	c        *Client
	status   int
	call     *partialCall
	usage    *afloat.Usage
	finished bool   // a finish_reason was seen
	model    string // the model the chunks name
}

var _ afloat.SkipCounter = (*stream)(nil)

// partialCall is the function call of the answer, as its fragments arrive.
type partialCall struct {
	name, stateID string
	args          []byte
}

func newStream(c *Client, resp *http.Response) *stream {
	s := &stream{c: c, status: resp.StatusCode}
	s.Stream = &httpx.Stream{Provider: c.name, Response: resp, Next: httpx.NewEventReader(resp.Body, maxLine).Next,
		MaxLine: maxLine, End: "[DONE]", Decoder: s}
	return s
}

// Finished reports whether a finish_reason was seen.
func (s *stream) Finished() bool { return s.finished }

// streamChunk is one chunk, or an error payload ({"status","message"}).
type streamChunk struct {
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
	Status  int      `json:"status"`
	Message string   `json:"message"`
}

// Decode turns one event into a chunk, naming the model; emit is false when the event
// carried nothing a caller needs. [DONE] ends the stream.
func (s *stream) Decode(ev httpx.Event) (afloat.Chunk, bool, error) {
	ch, emit, err := s.decode(ev)
	ch.Model = s.model
	return ch, emit, err
}

func (s *stream) decode(ev httpx.Event) (ch afloat.Chunk, emit bool, err error) {
	data := ev.Data
	if string(data) == "[DONE]" {
		if s.finished {
			return afloat.Chunk{}, false, io.EOF
		}
		// A server that sent no finish reason: deliver what is pending rather than lose it.
		if ch, emit, err = s.finish("stop"); err != nil {
			return afloat.Chunk{}, false, err
		}
		return ch, emit, io.EOF
	}
	var w streamChunk
	if err := json.Unmarshal(data, &w); err != nil && ev.Type != "error" {
		return afloat.Chunk{}, false, httpx.Malformed(fmt.Errorf("decode stream chunk: %w", err))
	}
	if w.Model != "" {
		s.model = w.Model
	}
	if ev.Type == "error" || (len(w.Choices) == 0 && w.Message != "") {
		msg := w.Message
		if msg == "" {
			msg = string(data)
		}
		return afloat.Chunk{}, false, httpx.BodyError(s.c.name, s.status, errors.New("error event: "+s.c.quote(msg)))
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
				s.call.args = httpx.AppendArguments(s.call.args, fc.Arguments)
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
			return afloat.Chunk{}, false, httpx.DecodeError(s.c.name, s.status, err)
		}
		ch.ToolCalls = []afloat.ToolCall{call}
		ch.FinishReason = "tool_calls"
		s.call = nil
	}
	return ch, ch.FinishReason != "" || ch.Usage != nil || len(ch.ToolCalls) > 0, nil
}
