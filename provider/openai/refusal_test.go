package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// TestRefusals: a content-policy refusal is Refused, never a breaker's business, and the
// provider's reason reaches the caller through the error's cause.
func TestRefusals(t *testing.T) {
	tests := []struct {
		fixture string
		status  int
		code    string
		reason  string // the cause's text, as the gateway passes it on
	}{
		{"err_400_content_policy.http", 400, "content_policy_violation",
			"Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system."},
		{"err_400_azure_content_filter.http", 400, "content_filter",
			"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry."},
		// The filtered text is not handed out, not even in the error.
		{"chat_content_filter.http", 200, "content_filter", "finish reason content_filter"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			resp, err := newClient(t, srv.URL, nil).Complete(t.Context(), hello)
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != afloat.Refused || pe.Status != tt.status || pe.Code != tt.code || resp != nil {
				t.Fatalf("Complete = %+v, %v; want a refused error of status %d (%s)", resp, err, tt.status, tt.code)
			}
			if pe.Kind.CountsAsFailure() || pe.Transient() || afloat.OutcomeError(err) != afloat.OutcomeRefused {
				t.Errorf("%v counts toward the breaker or may be retried", err)
			}
			if cause := errors.Unwrap(err); cause == nil || cause.Error() != tt.reason {
				t.Errorf("cause = %v, want %q", cause, tt.reason)
			}
			if strings.Contains(err.Error(), "Here is how to") {
				t.Errorf("error %q quotes the filtered text", err)
			}
		})
	}
}
