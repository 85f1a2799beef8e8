package yandex

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// Stream starts a streamed call (completionOptions.stream). An error before the stream
// follows Complete's contract. Yandex answers with JSON lines, each holding the whole text
// so far; Recv returns what each line adds, then one chunk with the finish reason, the tool
// calls and the usage, then io.EOF; each chunk names the model URI asked for (the lines
// carry only a modelVersion date). A line that cannot be parsed is skipped and counted (the
// stream is an afloat.SkipCounter): the next line holds the whole text again. An error line,
// a line whose text does not continue the text before it, or a body that ends before a final
// status is an Unavailable *afloat.ProviderError; a status of content filter is Refused;
// tool arguments that are not a JSON object are Contract.
func (c *Client) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	payload, model, err := c.encode(req, true)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, payload)
	if err != nil {
		return nil, err
	}
	s := newStream(c, resp)
	s.model = model
	return s, nil
}

// maxLine bounds one line; a longer one is treated as a broken stream. A line holds the
// whole answer so far, so the bound is an answer's.
const maxLine = 16 << 20

// stream reads one answer: httpx.Stream runs the loop, the methods below decode the lines.
// It is not safe for concurrent use, except that Close may be called from another goroutine
// to abort a blocked Recv.
type stream struct {
	*httpx.Stream
	c        *Client
	status   int
	text     string // the text so far
	finished bool
	model    string // the model URI, as Complete's Response.Model
}

var _ afloat.SkipCounter = (*stream)(nil)

func newStream(c *Client, resp *http.Response) *stream {
	s := &stream{c: c, status: resp.StatusCode, model: c.modelURI}
	s.Stream = &httpx.Stream{Provider: c.name, Response: resp, Next: httpx.NewEventReader(resp.Body, maxLine).Next,
		MaxLine: maxLine, End: "a final status", Decoder: s}
	return s
}

// Finished reports whether a line with a final status was seen.
func (s *stream) Finished() bool { return s.finished }

// Decode turns one line into a chunk, naming the model; emit is false when the line added
// nothing.
func (s *stream) Decode(ev httpx.Event) (afloat.Chunk, bool, error) {
	ch, emit, err := s.decode(ev)
	ch.Model = s.model
	return ch, emit, err
}

func (s *stream) decode(ev httpx.Event) (afloat.Chunk, bool, error) {
	line := ev.Data
	if e, ok := parseErrorBody(line); ok {
		pe := httpx.BodyError(s.c.name, s.status, errors.New("error line: "+s.c.quote(e.message)))
		pe.Code = e.label()
		return afloat.Chunk{}, false, pe
	}
	r, err := decodeResult(line)
	if err != nil {
		// Not JSON, or JSON without an alternative: no result to read.
		return afloat.Chunk{}, false, httpx.Malformed(fmt.Errorf("decode stream line: %w", err))
	}
	if s.finished {
		return afloat.Chunk{}, false, nil // a line after the final one adds nothing
	}
	alt := r.Alternatives[0]
	if alt.Status == statusContentFilter {
		// Checked first: Yandex's account of the refusal replaces the text so far.
		return afloat.Chunk{}, false, s.c.refusal(s.status, alt.Message.Text)
	}
	var ch afloat.Chunk
	text := alt.Message.Text
	switch {
	case strings.HasPrefix(text, s.text):
		ch.Delta = text[len(s.text):]
		s.text = text
	case alt.Message.ToolCallList != nil && text == "":
		// A tool call line carries no text.
	default:
		return afloat.Chunk{}, false, httpx.BodyError(s.c.name, s.status, errors.New("stream line rewrote the text before it"))
	}
	if fin := finishReason(alt.Status); fin != "" {
		s.finished = true
		ch.FinishReason = fin
		calls, err := toolCalls(alt.Message.ToolCallList)
		if err != nil {
			return afloat.Chunk{}, false, httpx.DecodeError(s.c.name, s.status, err)
		}
		if len(calls) > 0 {
			ch.ToolCalls, ch.FinishReason = calls, "tool_calls"
		}
		if r.Usage != nil {
			u := r.Usage.canonical()
			ch.Usage = &u
		}
		return ch, true, nil
	}
	return ch, ch.Delta != "", nil
}
