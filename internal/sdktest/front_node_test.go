package sdktest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// anthropicScript is what testdata/anthropic/messages.mjs prints.
type anthropicScript struct {
	Plain *struct {
		ID, Type, Role, Model string
		Content               []struct{ Type, Text string }
		StopReason            string `json:"stop_reason"`
		Usage                 struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
		RequestID string `json:"request_id"`
		Route     string
	} `json:"plain"`
	Helper *struct {
		Streamed, Text, Model string
		Blocks                int
		StopReason            string `json:"stop_reason"`
		Usage                 struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	} `json:"helper"`
	Raw *struct {
		Types []string
		Text  string
	} `json:"raw"`
	Tools *struct {
		StopReason string `json:"stop_reason"`
		Use        struct {
			Type, ID, Name string
			Input          json.RawMessage
		}
		Answer     string
		AnswerStop string `json:"answer_stop"`
	} `json:"tools"`
	Exhausted *struct {
		Class, Type, Message string
		Status               int
		Overloaded           bool
		RequestID            string `json:"request_id"`
		RetryAfter           string `json:"retry_after"`
		Error                string
	} `json:"exhausted"`
	Error string `json:"error"`
}

// TestNodeAnthropicSDK: the official `@anthropic-ai/sdk` package, given the gateway's URL as
// its base URL and the tenant's key as its API key, reads /v1/messages as Anthropic's API: a
// plain message (by an alias, with afloat's route header and Anthropic's request id), a stream
// through its MessageStream helper and one as raw events (create({stream: true})), a tool
// round trip, and an exhausted route as its OverloadedError (an APIError of status 529, type
// overloaded_error) after one request: its default retries do not storm the gateway.
func TestNodeAnthropicSDK(t *testing.T) {
	node := needTool(t, "node")
	npm := needTool(t, "npm")
	dir := installPackage(t, npm, "@anthropic-ai/sdk", "testdata/anthropic", "package.json", "package-lock.json", "messages.mjs")
	f := newFront(t)

	var res anthropicScript
	err := runNode(t, node, dir, "messages.mjs", &res, "AFLOAT_BASE_URL="+f.base, "AFLOAT_KEY="+tenantKey,
		"AFLOAT_MODEL="+sonnet, "AFLOAT_DOWN_MODEL="+haiku)
	if res.Error != "" || err != nil {
		t.Fatalf("the SDK threw: %s (%v)", res.Error, err)
	}
	if p := res.Plain; p == nil || !strings.HasPrefix(p.ID, "msg_") || p.Type != "message" || p.Role != "assistant" || p.Model != weatherModel ||
		len(p.Content) != 1 || p.Content[0].Type != "text" || p.Content[0].Text != orderText || p.StopReason != "end_turn" ||
		p.Usage.InputTokens != 21 || p.Usage.OutputTokens != 13 || p.RequestID == "" || p.Route != "support-agent" {
		t.Errorf("messages.create gave %+v", p)
	}
	if h := res.Helper; h == nil || h.Streamed != orderText || h.Text != orderText || h.Blocks != 1 || h.StopReason != "end_turn" ||
		h.Model != weatherModel || h.Usage.OutputTokens != 13 || h.Usage.InputTokens != 21 {
		t.Errorf("messages.stream().finalMessage() gave %+v; want the text %q", h, orderText)
	}
	wantTypes := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if r := res.Raw; r == nil || r.Text != orderText || !slices.Equal(r.Types, wantTypes) {
		t.Errorf("create({stream: true}) gave %+v; want the events %v", r, wantTypes)
	}
	if tl := res.Tools; tl == nil || tl.StopReason != "tool_use" || tl.Use.Type != "tool_use" || tl.Use.Name != "get_weather" ||
		string(tl.Use.Input) != `{"city":"Moscow"}` || tl.Answer != "It is 8°C in Moscow." || tl.AnswerStop != "end_turn" {
		t.Errorf("the tool round trip gave %+v", tl)
	}
	wantToolRoundTrip(t, f.weather.requests(), "8°C")
	if e := res.Exhausted; e == nil || e.Error != "" || e.Class != "OverloadedError" || !e.Overloaded || e.Status != 529 ||
		e.Type != "overloaded_error" || e.Message == "" || e.RequestID == "" || e.RetryAfter == "" {
		t.Errorf("the exhausted route gave %+v; want OverloadedError, 529, overloaded_error, with Retry-After and a request id", e)
	}
	f.wantNoStorm(t, 1)
}

// aliasScript is what testdata/aliases.mjs prints.
type aliasScript struct {
	Completion *struct {
		Model, Text, Route string
		FinishReason       string `json:"finish_reason"`
	} `json:"completion"`
	Stream *struct {
		Model, Text  string
		FinishReason string `json:"finish_reason"`
	} `json:"stream"`
	Models    []string `json:"models"`
	Retrieved string   `json:"retrieved"`
	Error     string   `json:"error"`
}

// TestNodeOpenAIAlias: an app built on the official `openai` package that sends
// model: "gpt-4o-mini" works unchanged against afloat: the alias leads to its route (named in
// X-Afloat-Route), the completion's model is the upstream's that answered, streamed or not,
// and models.list() shows the aliases beside the routes.
func TestNodeOpenAIAlias(t *testing.T) {
	node := needTool(t, "node")
	npm := needTool(t, "npm")
	dir := installOpenAI(t, npm)
	f := newFront(t)

	var res aliasScript
	err := runNode(t, node, dir, "aliases.mjs", &res, "AFLOAT_BASE_URL="+f.base+"/v1", "AFLOAT_KEY="+tenantKey, "AFLOAT_MODEL=gpt-4o-mini")
	if res.Error != "" || err != nil {
		t.Fatalf("the SDK threw: %s (%v)", res.Error, err)
	}
	if c := res.Completion; c == nil || c.Model != weatherModel || c.Text != orderText || c.FinishReason != "stop" || c.Route != "support-agent" {
		t.Errorf("chat.completions.create gave %+v", c)
	}
	if s := res.Stream; s == nil || s.Model != weatherModel || s.Text != orderText || s.FinishReason != "stop" {
		t.Errorf("chat.completions.stream gave %+v", s)
	}
	if !slices.Equal(res.Models, frontModels) {
		t.Errorf("models.list() gave %v, want %v", res.Models, frontModels)
	}
	if res.Retrieved != "gpt-4o-mini" {
		t.Errorf("models.retrieve gave %q", res.Retrieved)
	}
}
