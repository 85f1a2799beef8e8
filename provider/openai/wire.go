package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// The wire types of POST /chat/completions (shared/reference/providers.md §3).

type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []message       `json:"messages"`
	Tools          []tool          `json:"tools,omitempty"`
	ToolChoice     any             `json:"tool_choice,omitempty"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	// MaxCompletionTokens is OpenAI's newer name of the cap, the only one its reasoning
	// models take; sent instead of MaxTokens when the client used it.
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	// ContinueFinalMessage and AddGenerationPrompt are vLLM's assistant prefill: the final
	// assistant message is continued rather than followed by a new turn.
	ContinueFinalMessage bool  `json:"continue_final_message,omitempty"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type message struct {
	Role string `json:"role"`
	// Content is a pointer so that an assistant turn made only of tool calls sends null,
	// as the API documents, rather than "".
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	// Index is set in stream deltas only.
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name string `json:"name,omitempty"`
	// Arguments is a JSON string on the wire. It is kept raw when decoding because some
	// compatible servers send an object instead.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type tool struct {
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema,omitempty"`
	// Schema is llama.cpp's json_object schema, beside the type.
	Schema json.RawMessage `json:"schema,omitempty"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
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

// defaultSchemaName is sent when a json_schema response format names none: the API
// requires a name.
const defaultSchemaName = "result"

// encodeRequest renders req in the wire format as OpenAI documents it. model is used when
// req names none. Its errors are our request's faults, so the caller reports them as
// Contract.
func encodeRequest(req *afloat.Request, model string, stream bool) ([]byte, error) {
	return encodeFor(req, model, stream, DialectOpenAI)
}

// encodeFor renders req for a server of the dialect (see Config.Dialect).
func encodeFor(req *afloat.Request, model string, stream bool, dialect string) ([]byte, error) {
	w := chatRequest{
		Model:       req.Model,
		Messages:    make([]message, 0, len(req.Messages)),
		MaxTokens:   req.MaxTokens,
		Temperature: req.Temperature,
	}
	if w.Model == "" {
		w.Model = model
	}
	if w.Model == "" {
		return nil, errors.New("no model: set Config.Model or Request.Model")
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("max tokens %d is negative", req.MaxTokens)
	}
	// OpenAI's reasoning models refuse max_tokens, so the cap goes by the client's name;
	// the other servers may know only max_tokens (vLLM, llama.cpp and Ollama follow the
	// older API, Yandex documents max_tokens alone).
	if req.MaxTokensParam == "max_completion_tokens" && (dialect == "" || dialect == DialectOpenAI) {
		w.MaxTokens, w.MaxCompletionTokens = 0, req.MaxTokens
	}
	if stream {
		w.Stream = true
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.Continue {
		if err := httpx.CheckContinue(req.Messages); err != nil {
			return nil, err
		}
		switch dialect {
		case DialectVLLM:
			w.ContinueFinalMessage, w.AddGenerationPrompt = true, new(bool)
		case DialectLlamaCpp:
			// llama-server continues a final assistant message as it is.
		default:
			return nil, fmt.Errorf("continue: dialect %q cannot continue an answer", dialect)
		}
	}
	for _, m := range req.Messages {
		wm := message{Role: m.Role, ToolCallID: m.ToolCallID}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			wm.Content = &m.Content
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage("{}")
			}
			// The API takes the arguments as a string holding JSON.
			s, err := json.Marshal(string(args))
			if err != nil {
				return nil, err
			}
			wm.ToolCalls = append(wm.ToolCalls, toolCall{ID: tc.ID, Type: "function",
				Function: functionCall{Name: tc.Name, Arguments: s}})
		}
		w.Messages = append(w.Messages, wm)
	}
	tools := req.Tools
	choice := req.ToolChoice
	if choice != nil && len(tools) > 0 {
		tools, choice = adaptToolChoice(tools, choice, dialect)
	}
	for _, t := range tools {
		w.Tools = append(w.Tools, tool{Type: "function",
			Function: function{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	if tc := choice; tc != nil {
		switch tc.Mode {
		case "":
		case "auto", "none", "required":
			w.ToolChoice = tc.Mode
		case "tool":
			if tc.Name == "" {
				return nil, errors.New("tool choice \"tool\" names no tool")
			}
			var named namedToolChoice
			named.Type = "function"
			named.Function.Name = tc.Name
			w.ToolChoice = named
		default:
			return nil, fmt.Errorf("unknown tool choice mode %q", tc.Mode)
		}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "":
		case "text", "json_object":
			w.ResponseFormat = &responseFormat{Type: rf.Type}
			if req.Continue {
				// A grammar constrains what is generated as a whole document: the rest of a
				// started one would not fit it. The contract check reads the joined answer.
				w.ResponseFormat = nil
			}
		case "json_schema":
			if len(bytes.TrimSpace(rf.Schema)) == 0 {
				return nil, errors.New("json_schema response format has no schema")
			}
			if req.Continue {
				break // as for json_object above
			}
			if dialect == DialectLlamaCpp {
				// Every llama-server reads a json_object's schema; older builds and forks
				// refuse the json_schema type, and the flat json_schema form of its README
				// is silently unconstrained.
				w.ResponseFormat = &responseFormat{Type: "json_object", Schema: rf.Schema}
				break
			}
			name := rf.Name
			if name == "" {
				name = defaultSchemaName
			}
			w.ResponseFormat = &responseFormat{Type: rf.Type,
				JSONSchema: &jsonSchema{Name: name, Schema: rf.Schema, Strict: rf.Strict}}
		default:
			return nil, fmt.Errorf("unknown response format %q", rf.Type)
		}
	}
	return httpx.EncodeBody(w)
}

// errNoChoices: a 200 whose body parsed but held no answer.
var errNoChoices = errors.New("response has no choices")

// decodeResponse reads the body of a 200. It returns errNoChoices, an *httpx.ArgumentsError,
// or a JSON error for a body that is not a completion.
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
	out := &afloat.Response{Model: w.Model, FinishReason: ch.FinishReason}
	if ch.Message.Content != nil {
		out.Content = *ch.Message.Content
	}
	for _, tc := range ch.Message.ToolCalls {
		args, err := parseArguments(tc.Function.Arguments)
		if err != nil {
			return nil, &httpx.ArgumentsError{Tool: tc.Function.Name, Err: err}
		}
		out.ToolCalls = append(out.ToolCalls, afloat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	if w.Usage != nil {
		out.Usage = w.Usage.canonical()
	}
	return out, nil
}

// parseArguments turns the wire arguments into a JSON object. OpenAI sends a string holding
// JSON; an object is accepted too, and an empty string or null reads as {} (a call without
// arguments). It is httpx.ObjectArguments but for its errors, which keep json's own account
// of invalid JSON, and for returning a copy.
func parseArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			return json.RawMessage("{}"), nil
		}
	}
	if raw[0] != '{' {
		return nil, errors.New("not an object")
	}
	var obj json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}
