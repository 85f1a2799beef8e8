package anthropic

import (
	"testing"

	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// The answer tool cut by max_tokens must keep finish_reason "length", not "stop", so that a
// client sees the answer is cut.
func TestAnswerToolCutByMaxTokens(t *testing.T) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"triage\",\"input\":{}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":1}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	chunks, _ := fixture.Drain(t, streamOf(body, "triage"))
	last := chunks[len(chunks)-1]
	if last.FinishReason != "length" {
		t.Errorf("max_tokens on the answer tool: finish %q, want length", last.FinishReason)
	}
}
