package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/afloat-dev/afloat"
)

// defaultModel names the model in answers to a request that names none.
const defaultModel = "sim"

// answer builds the answer to req: a call of the tool req forces, JSON fitting req's schema,
// a JSON object for a bare json_object format, or else a short text about the last user
// message. Its error is the request's fault.
func answer(req *afloat.Request, r *rand.Rand, schemas *schemaCache) (*afloat.Response, error) {
	resp := &afloat.Response{FinishReason: "stop", Model: model(req)}
	rf := req.ResponseFormat
	switch {
	case req.ToolChoice != nil && (req.ToolChoice.Mode == "required" || req.ToolChoice.Mode == "tool"):
		call, err := toolCall(req, r, schemas)
		if err != nil {
			return nil, err
		}
		resp.ToolCalls = []afloat.ToolCall{call}
		resp.FinishReason = "tool_calls"
	case rf != nil && hasSchema(rf.Schema):
		root, err := schemas.get(rf.Schema)
		if err != nil {
			return nil, fmt.Errorf("response format: %w", err)
		}
		b, err := generate(root, r)
		if err != nil {
			return nil, err
		}
		resp.Content = string(b)
	case rf != nil && rf.Type == "json_object":
		b, err := json.Marshal(map[string]string{"answer": text(req, r)})
		if err != nil {
			return nil, err
		}
		resp.Content = string(b)
	default:
		resp.Content = text(req, r)
	}
	resp.Usage = usage(req, resp)
	return resp, nil
}

func hasSchema(s json.RawMessage) bool {
	t := bytes.TrimSpace(s)
	return len(t) > 0 && string(t) != "null"
}

func toolCall(req *afloat.Request, r *rand.Rand, schemas *schemaCache) (afloat.ToolCall, error) {
	var tool *afloat.Tool
	for i := range req.Tools {
		if req.ToolChoice.Mode == "required" || req.Tools[i].Name == req.ToolChoice.Name {
			tool = &req.Tools[i]
			break
		}
	}
	if tool == nil {
		return afloat.ToolCall{}, fmt.Errorf("tool choice %s %q matches no tool of the request", req.ToolChoice.Mode, req.ToolChoice.Name)
	}
	args := json.RawMessage("{}")
	if hasSchema(tool.Parameters) {
		root, err := schemas.get(tool.Parameters)
		if err != nil {
			return afloat.ToolCall{}, fmt.Errorf("tool %s parameters: %w", tool.Name, err)
		}
		b, err := generate(root, r)
		if err != nil {
			return afloat.ToolCall{}, err
		}
		if len(b) > 0 && b[0] == '{' { // arguments are always an object
			args = b
		}
	}
	return afloat.ToolCall{ID: fmt.Sprintf("call_%016x", r.Uint64()), Name: tool.Name, Arguments: args}, nil
}

func model(req *afloat.Request) string {
	if req.Model != "" {
		return req.Model
	}
	return defaultModel
}

var textForms = []string{
	"This is a simulated answer to your message about %s.",
	"Simulated reply: I have read what you wrote (%s) and here is a short answer.",
	"Thanks for your message about %s. This answer comes from a simulated model.",
}

// excerptLen caps how much of the user's message an answer quotes, in code points.
const excerptLen = 60

func text(req *afloat.Request, r *rand.Rand) string {
	about := "your request"
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == afloat.RoleUser && strings.TrimSpace(m.Content) != "" {
			about = excerpt(m.Content)
			break
		}
	}
	return fmt.Sprintf(textForms[r.IntN(len(textForms))], about)
}

func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if rs := []rune(s); len(rs) > excerptLen {
		return string(rs[:excerptLen]) + "…"
	}
	return s
}

// malformedForms are answers no normalizer can turn into JSON: no braces, no brackets, no
// quotes, no "key: value" lines.
var malformedForms = []string{
	"К сожалению, я не могу помочь с этим запросом. Пожалуйста, уточните, что именно вы хотите узнать.",
	"Sure! Based on the message this looks like a fairly urgent technical issue, and someone from the support team should take a look soon.",
	"I'm sorry, but I can't provide a structured answer to that request.",
	"Похоже, обращение касается оплаты, и ответить на него стоит в течение дня.",
}

func malformed(req *afloat.Request, r *rand.Rand) *afloat.Response {
	resp := &afloat.Response{Content: malformedForms[r.IntN(len(malformedForms))], FinishReason: "stop", Model: model(req)}
	resp.Usage = usage(req, resp)
	return resp
}

// usage estimates tokens as a quarter of the bytes of the text.
func usage(req *afloat.Request, resp *afloat.Response) afloat.Usage {
	in := 0
	for _, m := range req.Messages {
		in += len(m.Content)
	}
	out := len(resp.Content)
	for _, c := range resp.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	return afloat.Usage{InputTokens: in / 4, OutputTokens: out / 4}
}
