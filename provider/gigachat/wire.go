package gigachat

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// The wire types of POST /api/v1/chat/completions (shared/reference/providers.md §1).

type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []message       `json:"messages"`
	Temperature    *float64        `json:"temperature,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	Stream         bool            `json:"stream,omitempty"`
	Functions      []function      `json:"functions,omitempty"`
	FunctionCall   any             `json:"function_call,omitempty"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

type message struct {
	Role             string        `json:"role"`
	Content          string        `json:"content"`
	FunctionCall     *functionCall `json:"function_call,omitempty"`
	Name             string        `json:"name,omitempty"`
	FunctionsStateID string        `json:"functions_state_id,omitempty"`
}

type functionCall struct {
	Name string `json:"name,omitempty"`
	// Arguments is a JSON object on the wire; kept raw because a string holding one is
	// accepted too.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type namedCall struct {
	Name string `json:"name"`
}

// responseFormat is GigaChat's flat form: the schema beside the type, not inside a
// json_schema object.
type responseFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

type chatResponse struct {
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
}

type choice struct {
	Index        int      `json:"index"`
	Message      *message `json:"message"`
	Delta        *message `json:"delta"`
	FinishReason string   `json:"finish_reason"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

func (u *usage) canonical() afloat.Usage {
	return afloat.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
}

// stateIDPrefix marks a synthetic call id that carries GigaChat's functions_state_id, so
// that the call goes back to GigaChat with it, as the API asks.
const stateIDPrefix = "gcfs_"

// emptyParams are the parameters of a function whose canonical form has none.
var emptyParams = json.RawMessage(`{"type":"object","properties":{}}`)

// encodeRequest renders req in the wire format. model is used when req names none; schemas
// sends a json_schema response format. Its errors are our request's faults (Contract).
func encodeRequest(req *afloat.Request, model string, stream, schemas bool) ([]byte, error) {
	w := chatRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stream: stream}
	if w.Model == "" {
		w.Model = model
	}
	if w.Model == "" {
		return nil, errors.New("no model: set Config.Model or Request.Model")
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("max tokens %d is negative", req.MaxTokens)
	}
	msgs, err := encodeMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	w.Messages = msgs
	for _, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = emptyParams
		}
		w.Functions = append(w.Functions, function{Name: t.Name, Description: t.Description, Parameters: params})
	}
	if len(w.Functions) > 0 {
		// GigaChat wants the mode said explicitly.
		w.FunctionCall = "auto"
		if tc := req.ToolChoice; tc != nil {
			switch tc.Mode {
			case "", "auto":
			case "none":
				w.FunctionCall = "none"
			case "tool":
				if tc.Name == "" {
					return nil, errors.New(`tool choice "tool" names no tool`)
				}
				w.FunctionCall = namedCall{Name: tc.Name}
			case "required":
				// No such mode: with one function, forcing it is the same; with more the
				// model chooses.
				if len(w.Functions) == 1 {
					w.FunctionCall = namedCall{Name: w.Functions[0].Name}
				}
			default:
				return nil, fmt.Errorf("unknown tool choice mode %q", tc.Mode)
			}
		}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text", "json_object":
			// No json_object mode: the prompt asks for JSON, the task's contract checks it.
		case "json_schema":
			if len(bytes.TrimSpace(rf.Schema)) == 0 {
				return nil, errors.New("json_schema response format has no schema")
			}
			if schemas {
				w.ResponseFormat = &responseFormat{Type: rf.Type, Schema: rf.Schema, Strict: rf.Strict}
			}
		default:
			return nil, fmt.Errorf("unknown response format %q", rf.Type)
		}
	}
	return httpx.EncodeBody(w)
}

// encodeMessages renders the conversation. GigaChat takes one function call per assistant
// turn: an assistant turn with several calls (from another provider) becomes one turn per
// call, each followed by its result.
func encodeMessages(in []afloat.Message) ([]message, error) {
	out := make([]message, 0, len(in))
	for i := 0; i < len(in); i++ {
		m := in[i]
		switch m.Role {
		case afloat.RoleSystem, afloat.RoleUser:
			out = append(out, message{Role: m.Role, Content: m.Content})
		case afloat.RoleAssistant:
			if len(m.ToolCalls) == 0 {
				out = append(out, message{Role: "assistant", Content: m.Content})
				continue
			}
			end := i + 1
			for end < len(in) && in[end].Role == afloat.RoleTool {
				end++
			}
			results := in[i+1 : end]
			used := make([]bool, len(results))
			for k, tc := range m.ToolCalls {
				content := ""
				if k == 0 {
					content = m.Content
				}
				out = append(out, assistantCall(tc, content))
				if r := matchResult(results, used, tc, k); r >= 0 {
					used[r] = true
					out = append(out, functionResult(results[r].Content, tc.Name))
				}
			}
			for r, res := range results {
				if !used[r] {
					if res.Name == "" {
						return nil, fmt.Errorf("message %d: tool result answers no call and names no function", i+1+r)
					}
					out = append(out, functionResult(res.Content, res.Name))
				}
			}
			i = end - 1
		case afloat.RoleTool:
			if m.Name == "" {
				return nil, fmt.Errorf("message %d: tool result names no function", i)
			}
			out = append(out, functionResult(m.Content, m.Name))
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// assistantCall renders one function call as an assistant turn of its own.
func assistantCall(tc afloat.ToolCall, content string) message {
	args := tc.Arguments
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	m := message{Role: "assistant", Content: content, FunctionCall: &functionCall{Name: tc.Name, Arguments: args}}
	if id, ok := strings.CutPrefix(tc.ID, stateIDPrefix); ok {
		m.FunctionsStateID = id
	}
	return m
}

// matchResult finds the result of call k: by call id, else by function name, else the k-th
// result; -1 when none is left.
func matchResult(results []afloat.Message, used []bool, tc afloat.ToolCall, k int) int {
	for r, res := range results {
		if !used[r] && tc.ID != "" && res.ToolCallID == tc.ID {
			return r
		}
	}
	for r, res := range results {
		if !used[r] && res.ToolCallID == "" && res.Name == tc.Name {
			return r
		}
	}
	if k < len(results) && !used[k] && results[k].ToolCallID == "" {
		return k
	}
	return -1
}

// functionResult renders a tool result: its content must be JSON, so plain text goes as
// a JSON string.
func functionResult(content, name string) message {
	if !json.Valid([]byte(content)) {
		b, _ := json.Marshal(content)
		content = string(b)
	}
	return message{Role: "function", Name: name, Content: content}
}

// finishReason maps GigaChat's finish reason to OpenAI's vocabulary.
func finishReason(s string) string {
	switch s {
	case "function_call":
		return "tool_calls"
	case "blacklist":
		return "content_filter"
	}
	return s
}

// errNoChoices: a 200 whose body parsed but held no answer.
var errNoChoices = errors.New("response has no choices")

// decodeResponse reads the body of a 200. It returns errNoChoices, an
// *httpx.ArgumentsError, or a JSON error.
func decodeResponse(body []byte) (*afloat.Response, error) {
	var w chatResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	var ch *choice
	for i := range w.Choices {
		if w.Choices[i].Index == 0 && w.Choices[i].Message != nil {
			ch = &w.Choices[i]
			break
		}
	}
	if ch == nil {
		return nil, errNoChoices
	}
	out := &afloat.Response{Model: w.Model, Content: ch.Message.Content, FinishReason: finishReason(ch.FinishReason)}
	if fc := ch.Message.FunctionCall; fc != nil {
		call, err := toolCall(fc.Name, fc.Arguments, ch.Message.FunctionsStateID)
		if err != nil {
			return nil, err
		}
		out.ToolCalls = []afloat.ToolCall{call}
		out.FinishReason = "tool_calls"
	}
	if w.Usage != nil {
		out.Usage = w.Usage.canonical()
	}
	return out, nil
}

// toolCall builds a canonical call: arguments as an object, and a synthetic id, carrying
// the functions_state_id when GigaChat sent one.
func toolCall(name string, raw json.RawMessage, stateID string) (afloat.ToolCall, error) {
	args, err := httpx.ObjectArguments(raw)
	if err != nil {
		return afloat.ToolCall{}, &httpx.ArgumentsError{Tool: name, Err: err}
	}
	id := stateIDPrefix + stateID
	if stateID == "" {
		var b [8]byte
		rand.Read(b[:])
		id = "call_" + hex.EncodeToString(b[:])
	}
	return afloat.ToolCall{ID: id, Name: name, Arguments: args}, nil
}
