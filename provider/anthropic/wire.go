package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// The wire types of POST /v1/messages (shared/reference/providers.md §4).

type messagesRequest struct {
	Model       string      `json:"model"`
	MaxTokens   int         `json:"max_tokens"`
	System      string      `json:"system,omitempty"`
	Messages    []message   `json:"messages"`
	Tools       []tool      `json:"tools,omitempty"`
	ToolChoice  *toolChoice `json:"tool_choice,omitempty"`
	Temperature *float64    `json:"temperature,omitempty"`
	Stream      bool        `json:"stream,omitempty"`
}

// message is one turn; Content is a string for plain text, or a []block.
type message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// block is a content block: text, tool_use or tool_result.
type block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type toolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

type messagesResponse struct {
	Type       string         `json:"type"`
	Model      string         `json:"model"`
	Content    []responseItem `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      *usage         `json:"usage"`
}

type responseItem struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// inputTokens counts every input token, cached ones included: each is paid for.
func (u *usage) inputTokens() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// encoded is a rendered request and, when a json_schema response format was rendered as a
// forced tool, that tool's name: its input is the answer. trimmed is set when white space
// was cut from the end of the final assistant message (a prefill): the white space that
// opens the continuation is then cut too, since the caller's text still ends with it.
type encoded struct {
	body       []byte
	answerTool string
	trimmed    bool
}

// defaultAnswerTool names the forced tool of a json_schema response format that names none.
const defaultAnswerTool = "result"

// toolName is what the API accepts as a tool name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// emptySchema is the input schema of a tool whose canonical form has no parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// encodeRequest renders req in the wire format. model is used when req names none,
// maxTokens when req sets no cap. Its errors are our request's faults (Contract).
func encodeRequest(req *afloat.Request, model string, maxTokens int, stream bool) (encoded, error) {
	w := messagesRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stream: stream}
	if w.Model == "" {
		w.Model = model
	}
	if w.Model == "" {
		return encoded{}, errors.New("no model: set Config.Model or Request.Model")
	}
	if req.MaxTokens < 0 {
		return encoded{}, fmt.Errorf("max tokens %d is negative", req.MaxTokens)
	}
	if w.MaxTokens == 0 {
		w.MaxTokens = maxTokens
	}
	if req.Continue {
		if err := httpx.CheckContinue(req.Messages); err != nil {
			return encoded{}, err
		}
	}
	msgs, system, err := encodeMessages(req.Messages)
	if err != nil {
		return encoded{}, err
	}
	trimmed := trimPrefill(msgs)
	w.Messages, w.System = msgs, system
	for _, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = emptySchema
		}
		w.Tools = append(w.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: params})
	}
	if tc := req.ToolChoice; tc != nil && len(req.Tools) > 0 {
		switch tc.Mode {
		case "":
		case "auto", "none":
			w.ToolChoice = &toolChoice{Type: tc.Mode}
		case "required":
			w.ToolChoice = &toolChoice{Type: "any"}
		case "tool":
			if tc.Name == "" {
				return encoded{}, errors.New(`tool choice "tool" names no tool`)
			}
			w.ToolChoice = &toolChoice{Type: "tool", Name: tc.Name}
		default:
			return encoded{}, fmt.Errorf("unknown tool choice mode %q", tc.Mode)
		}
	}
	var answerTool string
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text", "json_object":
			// No such field: the prompt asks for JSON, the task's contract checks it.
		case "json_schema":
			if len(bytes.TrimSpace(rf.Schema)) == 0 {
				return encoded{}, errors.New("json_schema response format has no schema")
			}
			// The Messages API has no response format. Without tools of the caller's, one
			// forced tool whose input schema is the answer's constrains the answer the same
			// way; with tools, the prompt and the contract check do.
			// A continuation is the rest of a text already started: a forced tool would
			// answer anew.
			if len(req.Tools) == 0 && objectSchema(rf.Schema) && !req.Continue {
				answerTool = rf.Name
				if !toolName.MatchString(answerTool) {
					answerTool = defaultAnswerTool
				}
				w.Tools = []tool{{Name: answerTool, Description: "Give the answer.", InputSchema: rf.Schema}}
				w.ToolChoice = &toolChoice{Type: "tool", Name: answerTool}
			}
		default:
			return encoded{}, fmt.Errorf("unknown response format %q", rf.Type)
		}
	}
	body, err := httpx.EncodeBody(w)
	if err != nil {
		return encoded{}, err
	}
	return encoded{body: body, answerTool: answerTool, trimmed: trimmed}, nil
}

// trimPrefill cuts the white space off the end of a final assistant message of text: the
// API takes such a message as the start of the answer (a prefill) and refuses one that ends
// in white space. It reports whether it cut any.
func trimPrefill(msgs []message) bool {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" {
		return false
	}
	last := &msgs[len(msgs)-1]
	text, ok := last.Content.(string)
	if !ok {
		return false // tool_use blocks: no prefill
	}
	trimmed := strings.TrimRightFunc(text, unicode.IsSpace)
	last.Content = trimmed
	return len(trimmed) < len(text)
}

// objectSchema reports whether a JSON Schema describes an object, as a tool's input must.
func objectSchema(schema json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(schema, &s) == nil && s.Type == "object"
}

// encodeMessages lifts the system messages into one system text and renders the rest:
// tool calls as tool_use blocks, tool results as tool_result blocks of one user turn.
func encodeMessages(in []afloat.Message) ([]message, string, error) {
	var system []string
	out := make([]message, 0, len(in))
	// pending are the calls of the last assistant turn not yet answered, for tool turns
	// that carry no call id.
	var pending []block
	for i, m := range in {
		switch m.Role {
		case afloat.RoleSystem:
			system = append(system, m.Content)
		case afloat.RoleUser:
			out = append(out, message{Role: "user", Content: m.Content})
		case afloat.RoleAssistant:
			if len(m.ToolCalls) == 0 {
				out = append(out, message{Role: "assistant", Content: m.Content})
				continue
			}
			var blocks []block
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, block{Type: "text", Text: m.Content})
			}
			pending = pending[:0]
			for j, tc := range m.ToolCalls {
				id := tc.ID
				if id == "" {
					// A call from a provider without ids: tool_use needs one to be answered.
					id = fmt.Sprintf("toolu_afloat_%d_%d", i, j)
				}
				args := tc.Arguments
				if len(bytes.TrimSpace(args)) == 0 {
					args = json.RawMessage("{}")
				}
				b := block{Type: "tool_use", ID: id, Name: tc.Name, Input: args}
				blocks = append(blocks, b)
				pending = append(pending, b)
			}
			out = append(out, message{Role: "assistant", Content: blocks})
		case afloat.RoleTool:
			id := m.ToolCallID
			for k, p := range pending {
				if (id != "" && p.ID == id) || (id == "" && (m.Name == "" || p.Name == m.Name)) {
					id = p.ID
					pending = append(pending[:k], pending[k+1:]...)
					break
				}
			}
			if id == "" {
				return nil, "", fmt.Errorf("message %d: tool result %q answers no call", i, m.Name)
			}
			res := block{Type: "tool_result", ToolUseID: id, Content: m.Content}
			// Every result of one assistant turn goes back in one user turn.
			if n := len(out); n > 0 && out[n-1].Role == "user" {
				if blocks, ok := out[n-1].Content.([]block); ok && blocks[0].Type == "tool_result" {
					out[n-1].Content = append(blocks, res)
					continue
				}
			}
			out = append(out, message{Role: "user", Content: []block{res}})
		default:
			return nil, "", fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, strings.Join(system, "\n\n"), nil
}

// finishReason maps a stop_reason to OpenAI's vocabulary where one exists.
func finishReason(s string) string {
	switch s {
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case stopRefusal:
		return "content_filter"
	}
	return s
}

// stopRefusal is the stop reason of an answer the model declined under its usage policy
// (shared/reference/providers.md §4): Complete and Stream return it as a Refused error.
const stopRefusal = "refusal"

// refusal is the Refused error of a 2xx answer that stopped for stopRefusal. Its cause
// names the stop reason only: whatever text came before the refusal is not quoted.
func refusal(provider string, status int) *afloat.ProviderError {
	return httpx.RefusedError(provider, status, stopRefusal, "stop reason "+stopRefusal)
}

// errNotMessage: a 200 whose body parsed but is not a message.
var errNotMessage = errors.New("response is not a message")

// decodeResponse reads the body of a 200. answerTool names the forced tool whose input is
// the answer's text ("" for none). It returns errNotMessage, an *httpx.ArgumentsError, or a
// JSON error.
func decodeResponse(body []byte, answerTool string) (*afloat.Response, error) {
	var w messagesResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	if w.Type != "message" {
		return nil, errNotMessage
	}
	out := &afloat.Response{Model: w.Model, FinishReason: finishReason(w.StopReason)}
	var text strings.Builder
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args, err := objectArguments(b.Input)
			if err != nil {
				return nil, &httpx.ArgumentsError{Tool: b.Name, Err: err}
			}
			if answerTool != "" && b.Name == answerTool {
				text.Reset()
				text.Write(args)
				if w.StopReason == "tool_use" {
					out.FinishReason = "stop" // the answer tool is the answer; max_tokens stays length
				}
				continue
			}
			out.ToolCalls = append(out.ToolCalls, afloat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Content = text.String()
	if w.Usage != nil {
		out.Usage = afloat.Usage{InputTokens: w.Usage.inputTokens(), OutputTokens: w.Usage.OutputTokens}
	}
	return out, nil
}

// objectArguments checks that a tool input is a JSON object; absent or null reads as {}.
// Anthropic sends an object, never a string holding one as the chat APIs do: a string is
// refused.
func objectArguments(raw json.RawMessage) (json.RawMessage, error) {
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '"' {
		return nil, errors.New("not an object")
	}
	return httpx.ObjectArguments(raw)
}
