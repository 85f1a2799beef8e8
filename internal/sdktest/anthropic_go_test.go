package sdktest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicGo is the official Go SDK pointed at the front's gateway, as an app would point
// it: a base URL and its key, sent as x-api-key. Its retries are the SDK's defaults.
func anthropicGo(f *front) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(f.base+"/"), option.WithAPIKey(tenantKey),
		option.WithRequestTimeout(20*time.Second))
}

// weatherTool is get_weather in the SDK's types.
var weatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name: "get_weather", Description: anthropic.String("Weather by city"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
}}

// TestAnthropicGo: anthropic-sdk-go against /v1/messages: a plain message, a stream read
// event by event into the SDK's accumulator, a tool round trip, and the error of an exhausted
// route, which the SDK raises as its *anthropic.Error with status 529 and type
// overloaded_error, without retrying.
func TestAnthropicGo(t *testing.T) {
	f := newFront(t)
	client := anthropicGo(f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	question := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Where is my order?"))}

	t.Run("plain", func(t *testing.T) {
		msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: sonnet, MaxTokens: 256,
			System: []anthropic.TextBlockParam{{Text: "Be brief."}}, Messages: question})
		if err != nil {
			t.Fatalf("Messages.New: %v", err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != orderText || msg.Model != weatherModel ||
			msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.InputTokens != 21 || msg.Usage.OutputTokens != 13 {
			t.Fatalf("message %s", msg.RawJSON())
		}
		reqs := f.weather.requests()
		if last := reqs[len(reqs)-1]; len(last.Messages) != 2 || last.Messages[0].Role != "system" || last.Messages[0].Content != "Be brief." {
			t.Errorf("the upstream got %+v", last.Messages)
		}
	})

	t.Run("stream", func(t *testing.T) {
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: sonnet, MaxTokens: 256, Messages: question})
		defer stream.Close()
		var acc anthropic.Message
		var types []string
		text := ""
		for stream.Next() {
			ev := stream.Current()
			if err := acc.Accumulate(ev); err != nil {
				t.Fatalf("the SDK's accumulator refused event %s: %v", ev.Type, err)
			}
			if len(types) == 0 || types[len(types)-1] != ev.Type {
				types = append(types, ev.Type)
			}
			if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
				text += ev.Delta.Text
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("the stream failed after %v: %v", types, err)
		}
		want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
		if !slices.Equal(types, want) {
			t.Errorf("events %v, want %v", types, want)
		}
		if text != orderText || len(acc.Content) != 1 || acc.Content[0].Text != orderText || acc.StopReason != anthropic.StopReasonEndTurn ||
			acc.Model != weatherModel || acc.Usage.OutputTokens != 13 || acc.Usage.InputTokens != 21 {
			t.Errorf("streamed %q; accumulated %s", text, acc.RawJSON())
		}
	})

	t.Run("tool round trip", func(t *testing.T) {
		params := anthropic.MessageNewParams{Model: sonnet, MaxTokens: 256, Tools: []anthropic.ToolUnionParam{weatherTool},
			ToolChoice: anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}},
			Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Moscow?"))}}
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("Messages.New: %v", err)
		}
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" ||
			msg.Content[0].Name != "get_weather" || string(msg.Content[0].Input) != `{"city":"Moscow"}` {
			t.Fatalf("message %s", msg.RawJSON())
		}
		params.ToolChoice = anthropic.ToolChoiceUnionParam{}
		params.Messages = append(params.Messages, msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, "8°C", false)))
		answer, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("Messages.New with the tool result: %v", err)
		}
		if answer.StopReason != anthropic.StopReasonEndTurn || len(answer.Content) != 1 || answer.Content[0].Text != "It is 8°C in Moscow." {
			t.Fatalf("answer %s", answer.RawJSON())
		}
		wantToolRoundTrip(t, f.weather.requests(), "8°C")
	})

	t.Run("exhausted route", func(t *testing.T) {
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: haiku, MaxTokens: 64, Messages: question})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err %v (%T), want *anthropic.Error", err, err)
		}
		if apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" || apiErr.Message == "" ||
			apiErr.Response.Header.Get("Retry-After") == "" || apiErr.RequestID == "" {
			t.Errorf("status %d, type %q, message %q, Retry-After %q, request id %q", apiErr.StatusCode, apiErr.Type(), apiErr.Message,
				apiErr.Response.Header.Get("Retry-After"), apiErr.RequestID)
		}
		f.wantNoStorm(t, 1)
	})
}
