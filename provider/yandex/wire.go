package yandex

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// The wire types of POST /foundationModels/v1/completion (shared/reference/providers.md §2).

type completionRequest struct {
	ModelURI          string            `json:"modelUri"`
	CompletionOptions completionOptions `json:"completionOptions"`
	Messages          []message         `json:"messages"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolChoice        *toolChoice       `json:"toolChoice,omitempty"`
	JSONObject        bool              `json:"jsonObject,omitempty"`
	JSONSchema        *jsonSchema       `json:"jsonSchema,omitempty"`
}

type completionOptions struct {
	Stream      bool     `json:"stream"`
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxTokens is an int64, which proto3 JSON writes as a string.
	MaxTokens string `json:"maxTokens,omitempty"`
}

// message holds exactly one of Text, ToolCallList and ToolResultList.
type message struct {
	Role           string          `json:"role"`
	Text           *string         `json:"text,omitempty"`
	ToolCallList   *toolCallList   `json:"toolCallList,omitempty"`
	ToolResultList *toolResultList `json:"toolResultList,omitempty"`
}

type toolCallList struct {
	ToolCalls []toolCall `json:"toolCalls"`
}

type toolCall struct {
	FunctionCall functionCall `json:"functionCall"`
}

type functionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type toolResultList struct {
	ToolResults []toolResult `json:"toolResults"`
}

type toolResult struct {
	FunctionResult functionResult `json:"functionResult"`
}

type functionResult struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

type tool struct {
	Function function `json:"function"`
}

type function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type toolChoice struct {
	Mode         string `json:"mode,omitempty"`
	FunctionName string `json:"functionName,omitempty"`
}

type jsonSchema struct {
	Schema json.RawMessage `json:"schema"`
}

// completionResponse is the HTTP answer: the reference's CompletionResponse wrapped in
// "result". A body without the wrapper is read too.
type completionResponse struct {
	Result *result `json:"result"`
	result
}

type result struct {
	Alternatives []alternative `json:"alternatives"`
	Usage        *usage        `json:"usage"`
}

type alternative struct {
	Message struct {
		Role         string        `json:"role"`
		Text         string        `json:"text"`
		ToolCallList *toolCallList `json:"toolCallList"`
	} `json:"message"`
	Status string `json:"status"`
}

type usage struct {
	InputTextTokens  count `json:"inputTextTokens"`
	CompletionTokens count `json:"completionTokens"`
}

func (u *usage) canonical() afloat.Usage {
	return afloat.Usage{InputTokens: int(u.InputTextTokens), OutputTokens: int(u.CompletionTokens)}
}

// count is a token count: an int64 that proto3 JSON writes as a string ("19"), accepted as
// a number too.
type count int64

func (n *count) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	if string(b) == "null" || len(b) == 0 {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("token count %q is not a count", b)
	}
	*n = count(v)
	return nil
}

// emptyParams are the parameters of a tool whose canonical form has none.
var emptyParams = json.RawMessage(`{"type":"object","properties":{}}`)

// encodeRequest renders req in the wire format for the model URI. Its errors are our
// request's faults (Contract).
func encodeRequest(req *afloat.Request, modelURI string, stream bool) ([]byte, error) {
	if modelURI == "" {
		return nil, errors.New("no model uri: set Config.ModelURI or Request.Model")
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("max tokens %d is negative", req.MaxTokens)
	}
	w := completionRequest{ModelURI: modelURI,
		CompletionOptions: completionOptions{Stream: stream, Temperature: req.Temperature}}
	if req.MaxTokens > 0 {
		w.CompletionOptions.MaxTokens = strconv.Itoa(req.MaxTokens)
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
		w.Tools = append(w.Tools, tool{Function: function{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if tc := req.ToolChoice; tc != nil && len(w.Tools) > 0 {
		switch tc.Mode {
		case "":
		case "auto", "none", "required":
			w.ToolChoice = &toolChoice{Mode: map[string]string{"auto": "AUTO", "none": "NONE", "required": "REQUIRED"}[tc.Mode]}
		case "tool":
			if tc.Name == "" {
				return nil, errors.New(`tool choice "tool" names no tool`)
			}
			w.ToolChoice = &toolChoice{FunctionName: tc.Name}
		default:
			return nil, fmt.Errorf("unknown tool choice mode %q", tc.Mode)
		}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			w.JSONObject = true
		case "json_schema":
			if len(bytes.TrimSpace(rf.Schema)) == 0 {
				return nil, errors.New("json_schema response format has no schema")
			}
			w.JSONSchema = &jsonSchema{Schema: rf.Schema}
		default:
			return nil, fmt.Errorf("unknown response format %q", rf.Type)
		}
	}
	return httpx.EncodeBody(w)
}

// encodeMessages renders the conversation: an assistant turn with calls as a toolCallList
// (its text, if any, is dropped: a message holds one of the two), and the tool turns after
// it as one user turn with a toolResultList, matched by function name.
func encodeMessages(in []afloat.Message) ([]message, error) {
	out := make([]message, 0, len(in))
	names := map[string]string{} // call id → function name, for results that name none
	for i, m := range in {
		switch m.Role {
		case afloat.RoleSystem, afloat.RoleUser:
			text := m.Content
			out = append(out, message{Role: m.Role, Text: &text})
		case afloat.RoleAssistant:
			if len(m.ToolCalls) == 0 {
				text := m.Content
				out = append(out, message{Role: "assistant", Text: &text})
				continue
			}
			list := &toolCallList{}
			for _, tc := range m.ToolCalls {
				args := tc.Arguments
				if len(bytes.TrimSpace(args)) == 0 {
					args = json.RawMessage("{}")
				}
				list.ToolCalls = append(list.ToolCalls, toolCall{FunctionCall: functionCall{Name: tc.Name, Arguments: args}})
				if tc.ID != "" {
					names[tc.ID] = tc.Name
				}
			}
			out = append(out, message{Role: "assistant", ToolCallList: list})
		case afloat.RoleTool:
			name := m.Name
			if name == "" {
				name = names[m.ToolCallID]
			}
			if name == "" {
				return nil, fmt.Errorf("message %d: tool result names no function and answers no known call", i)
			}
			res := toolResult{FunctionResult: functionResult{Name: name, Content: m.Content}}
			if n := len(out); n > 0 && out[n-1].ToolResultList != nil {
				out[n-1].ToolResultList.ToolResults = append(out[n-1].ToolResultList.ToolResults, res)
				continue
			}
			out = append(out, message{Role: "user", ToolResultList: &toolResultList{ToolResults: []toolResult{res}}})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// Alternative statuses (ALTERNATIVE_STATUS_*).
const (
	statusPartial = "ALTERNATIVE_STATUS_PARTIAL"
	statusNone    = "ALTERNATIVE_STATUS_UNSPECIFIED"
	// statusContentFilter: the content filter stopped the answer
	// (shared/reference/providers.md §2); Complete and Stream return it as Refused.
	statusContentFilter = "ALTERNATIVE_STATUS_CONTENT_FILTER"
)

// finishReason maps an alternative's status to OpenAI's vocabulary; "" for a partial one.
func finishReason(status string) string {
	switch status {
	case "", statusPartial, statusNone:
		return ""
	case "ALTERNATIVE_STATUS_FINAL":
		return "stop"
	case "ALTERNATIVE_STATUS_TRUNCATED_FINAL":
		return "length"
	case statusContentFilter:
		return "content_filter"
	case "ALTERNATIVE_STATUS_TOOL_CALLS":
		return "tool_calls"
	}
	return status
}

// errNoAlternatives: a 200 whose body parsed but held no answer.
var errNoAlternatives = errors.New("response has no alternatives")

// decodeResult unwraps a body or a stream line into its result.
func decodeResult(body []byte) (*result, error) {
	var w completionResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	r := w.Result
	if r == nil {
		r = &w.result
	}
	if len(r.Alternatives) == 0 {
		return nil, errNoAlternatives
	}
	return r, nil
}

// decodeResponse reads the body of a 200. It returns errNoAlternatives, an
// *httpx.ArgumentsError, or a JSON error.
func decodeResponse(body []byte, model string) (*afloat.Response, error) {
	r, err := decodeResult(body)
	if err != nil {
		return nil, err
	}
	alt := r.Alternatives[0]
	out := &afloat.Response{Model: model, Content: alt.Message.Text, FinishReason: finishReason(alt.Status)}
	if out.ToolCalls, err = toolCalls(alt.Message.ToolCallList); err != nil {
		return nil, err
	}
	if len(out.ToolCalls) > 0 {
		out.FinishReason = "tool_calls"
	}
	if r.Usage != nil {
		out.Usage = r.Usage.canonical()
	}
	return out, nil
}

// toolCalls turns a toolCallList into canonical calls, each with a synthetic id.
func toolCalls(list *toolCallList) ([]afloat.ToolCall, error) {
	if list == nil {
		return nil, nil
	}
	var out []afloat.ToolCall
	for _, tc := range list.ToolCalls {
		args, err := httpx.ObjectArguments(tc.FunctionCall.Arguments)
		if err != nil {
			return nil, &httpx.ArgumentsError{Tool: tc.FunctionCall.Name, Err: err}
		}
		var b [8]byte
		rand.Read(b[:])
		out = append(out, afloat.ToolCall{ID: "call_" + hex.EncodeToString(b[:]), Name: tc.FunctionCall.Name, Arguments: args})
	}
	return out, nil
}
