package sdktest

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAIGoReadsContinuedStream: openai-go reads a stream afloat continued on the backup
// as one completion: every chunk taken by the SDK's accumulator (one id, one choice), the
// text the primary's 40 tokens then the backup's continuation, finish reason stop, and no
// error from the stream.
func TestOpenAIGoReadsContinuedStream(t *testing.T) {
	base, backup := rescued(t)
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sdk-test-key"),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         route,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me the story of the sixty tokens.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var text string
	chunks := 0
	for stream.Next() {
		c := stream.Current()
		chunks++
		if !acc.AddChunk(c) {
			t.Errorf("chunk %d (id %q, %d choices) was rejected by openai-go's accumulator: the stream is not one completion (its id so far %q)",
				chunks, c.ID, len(c.Choices), acc.ID)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go's stream failed after %d chunks and the text %q: %v", chunks, text, err)
	}
	if text != want {
		t.Errorf("the chunks' text is %q, want %q (the primary's 40 tokens, then the backup's continuation)", text, want)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("the accumulated completion has %d choices, want 1", len(acc.Choices))
	}
	got := acc.Choices[0]
	if got.Message.Content != want || got.FinishReason != "stop" {
		t.Errorf("the accumulated completion: finish reason %q, text %q; want stop and %q", got.FinishReason, got.Message.Content, want)
	}
	t.Logf("%d chunks, id %s, model %s, usage %d+%d tokens", chunks, acc.ID, acc.Model, acc.Usage.PromptTokens, acc.Usage.CompletionTokens)
	wantContinuation(t, backup, 1)
}
