package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// Stream starts a streamed call. An error before the stream follows Complete's contract (a
// prefill included). Recv then returns the text deltas (the forced answer tool's input too,
// as text), then one chunk with the finish reason, the whole tool calls and the usage, then
// io.EOF after message_stop; each chunk names the model of message_start. An event that
// cannot be parsed is skipped and counted (the stream is an afloat.SkipCounter). An error
// event inside the stream, or a body that ends before the message finished, is an
// Unavailable *afloat.ProviderError; a stop reason of refusal is Refused; a tool input that
// is not a JSON object is Contract.
func (c *Client) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	enc, err := c.encode(req, true)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, enc.body, true)
	if err != nil {
		return nil, err
	}
	s := newStream(c, resp, enc.answerTool)
	s.trimLead = enc.trimmed
	return s, nil
}

// maxLine bounds one SSE line; a longer one is treated as a broken stream.
const maxLine = 4 << 20

// stream reads one answer from Anthropic's events: httpx.Stream runs the loop, the methods
// below decode the events. It is not safe for concurrent use, except that Close may be
// called from another goroutine to abort a blocked Recv.
type stream struct {
	*httpx.Stream
	c          *Client
	status     int
	answerTool string
	// blocks are the content blocks by index, in the order they started.
	blocks       map[int]*partialBlock
	order        []int
	inputTokens  int
	outputTokens int
	answered     bool   // the answer tool's input was emitted, at least in part
	finished     bool   // message_delta carried a stop reason
	model        string // of message_start
	// trimLead cuts the white space that opens the text, until some other text came: the
	// prefill was sent without its trailing white space (see Client.Complete).
	trimLead bool
}

var _ afloat.SkipCounter = (*stream)(nil)

type partialBlock struct {
	typ, id, name string
	args          []byte
}

func newStream(c *Client, resp *http.Response, answerTool string) *stream {
	s := &stream{c: c, status: resp.StatusCode, answerTool: answerTool, blocks: map[int]*partialBlock{}}
	s.Stream = &httpx.Stream{Provider: c.name, Response: resp, Next: httpx.NewEventReader(resp.Body, maxLine).Next,
		MaxLine: maxLine, End: "message_stop", Decoder: s}
	return s
}

// Finished reports whether message_delta carried a stop reason.
func (s *stream) Finished() bool { return s.finished }

// event is the data of any stream event; each type fills its own fields.
type event struct {
	Type    string `json:"type"`
	Message *struct {
		Model string `json:"model"`
		Usage *usage `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
		Text string `json:"text"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
}

// Decode turns one event into a chunk, naming the model; emit is false when the event
// carried nothing a caller needs (a ping, a block start, a tool input fragment).
// message_stop ends the stream.
func (s *stream) Decode(ev httpx.Event) (afloat.Chunk, bool, error) {
	ch, emit, err := s.decode(ev)
	if s.trimLead && ch.Delta != "" && err == nil {
		ch.Delta = strings.TrimLeftFunc(ch.Delta, unicode.IsSpace)
		s.trimLead = ch.Delta == ""
		emit = emit && (ch.Delta != "" || ch.FinishReason != "" || ch.Usage != nil || len(ch.ToolCalls) > 0)
	}
	ch.Model = s.model
	return ch, emit, err
}

func (s *stream) decode(ev httpx.Event) (ch afloat.Chunk, emit bool, err error) {
	var w event
	if err := json.Unmarshal(ev.Data, &w); err != nil {
		if ev.Type == "error" {
			return afloat.Chunk{}, false, s.eventError(ev.Data) // the provider's own error, whatever its shape
		}
		return afloat.Chunk{}, false, httpx.Malformed(fmt.Errorf("decode stream event: %w", err))
	}
	typ := w.Type
	if typ == "" {
		typ = ev.Type
	}
	switch typ {
	case "error":
		return afloat.Chunk{}, false, s.eventError(ev.Data)
	case "message_start":
		if w.Message != nil && w.Message.Model != "" {
			s.model = w.Message.Model
		}
		if w.Message != nil && w.Message.Usage != nil {
			s.inputTokens = w.Message.Usage.inputTokens()
			s.outputTokens = w.Message.Usage.OutputTokens
		}
	case "content_block_start":
		if w.ContentBlock == nil {
			break
		}
		if _, seen := s.blocks[w.Index]; !seen {
			s.order = append(s.order, w.Index)
		}
		s.blocks[w.Index] = &partialBlock{typ: w.ContentBlock.Type, id: w.ContentBlock.ID, name: w.ContentBlock.Name}
		if w.ContentBlock.Type == "text" && w.ContentBlock.Text != "" {
			return afloat.Chunk{Delta: w.ContentBlock.Text}, true, nil
		}
	case "content_block_delta":
		if w.Delta == nil {
			break
		}
		switch w.Delta.Type {
		case "text_delta":
			if w.Delta.Text != "" {
				return afloat.Chunk{Delta: w.Delta.Text}, true, nil
			}
		case "input_json_delta":
			b := s.blocks[w.Index]
			if b == nil {
				break
			}
			if s.answer(b) {
				if w.Delta.PartialJSON != "" {
					s.answered = true
					return afloat.Chunk{Delta: w.Delta.PartialJSON}, true, nil
				}
				break
			}
			b.args = append(b.args, w.Delta.PartialJSON...)
		}
	case "message_delta":
		if w.Usage != nil {
			s.outputTokens = w.Usage.OutputTokens
		}
		if w.Delta == nil || w.Delta.StopReason == "" || s.finished {
			break
		}
		if w.Delta.StopReason == stopRefusal {
			return afloat.Chunk{}, false, refusal(s.c.name, s.status)
		}
		return s.finish(w.Delta.StopReason)
	case "message_stop":
		if !s.finished {
			// A stop without a stop reason: end as a plain stop rather than lose the calls.
			if ch, emit, err = s.finish("end_turn"); err != nil {
				return afloat.Chunk{}, false, err
			}
		}
		return ch, emit, io.EOF
	}
	// ping, content_block_stop and types added later carry nothing for us.
	return afloat.Chunk{}, false, nil
}

// answer reports whether b is the forced tool whose input is the answer's text.
func (s *stream) answer(b *partialBlock) bool {
	return s.answerTool != "" && b.typ == "tool_use" && b.name == s.answerTool
}

// finish builds the last chunk: the finish reason, the tool calls and the usage.
func (s *stream) finish(stopReason string) (afloat.Chunk, bool, error) {
	s.finished = true
	ch := afloat.Chunk{FinishReason: finishReason(stopReason),
		Usage: &afloat.Usage{InputTokens: s.inputTokens, OutputTokens: s.outputTokens}}
	for _, idx := range s.order {
		b := s.blocks[idx]
		if b.typ != "tool_use" {
			continue
		}
		if s.answer(b) {
			// The forced answer tool is the answer, not a call: "tool_use" reads as a
			// finished answer, but "max_tokens" stays "length" (a cut answer). A tool_use
			// block with no input deltas had the input {}: that is the answer given.
			if stopReason == "tool_use" {
				ch.FinishReason = "stop"
			}
			if !s.answered {
				ch.Delta = "{}"
			}
			continue
		}
		args, err := objectArguments(b.args)
		if err != nil {
			return afloat.Chunk{}, false, httpx.DecodeError(s.c.name, s.status, &httpx.ArgumentsError{Tool: b.name, Err: err})
		}
		ch.ToolCalls = append(ch.ToolCalls, afloat.ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	return ch, true, nil
}

// eventError reads an error event. Whatever type it names (overloaded_error, api_error), an
// error inside a 200 stream says the provider failed mid-answer: Unavailable.
func (s *stream) eventError(data []byte) error {
	pe := httpx.BodyError(s.c.name, s.status, nil)
	e, ok := parseErrorBody(data)
	pe.Code = e.label()
	if ok && e.message != "" {
		pe.Err = errors.New("error event: " + s.c.quote(e.message))
	} else {
		pe.Err = errors.New("error event: " + s.c.quote(string(data)))
	}
	return pe
}
