package httpx

import (
	"errors"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

func TestCheckContinue(t *testing.T) {
	user := afloat.Message{Role: afloat.RoleUser, Content: "x"}
	tests := []struct {
		name   string
		msgs   []afloat.Message
		errHas string // "" means it may be continued
	}{
		{"assistant text last", []afloat.Message{user, {Role: afloat.RoleAssistant, Content: "Отдел: "}}, ""},
		{"empty assistant text last", []afloat.Message{user, {Role: afloat.RoleAssistant}}, ""},
		{"no messages", nil, "no messages"},
		{"user last", []afloat.Message{user}, "not an assistant message"},
		{"tool calls last", []afloat.Message{user, {Role: afloat.RoleAssistant, ToolCalls: []afloat.ToolCall{{Name: "f"}}}}, "holds tool calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckContinue(tt.msgs)
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("CheckContinue = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("CheckContinue = %v, want an error saying %q", err, tt.errHas)
			}
		})
	}
}

func TestNoContinuation(t *testing.T) {
	pe := NoContinuation("gigachat-pro")
	if pe.Kind != afloat.Contract || pe.Status != 0 || pe.Provider != "gigachat-pro" || !strings.Contains(pe.Error(), "cannot continue") {
		t.Errorf("NoContinuation = %v (%s, status %d), want an unsent contract error", pe, pe.Kind, pe.Status)
	}
}

func TestRefusedError(t *testing.T) {
	pe := RefusedError("openai", 400, "content_filter", "filtered by policy")
	if pe.Kind != afloat.Refused || pe.Kind.CountsAsFailure() || pe.Transient() || afloat.OutcomeError(pe) != afloat.OutcomeRefused {
		t.Errorf("%v: kind %s, want a refusal that moves nothing", pe, pe.Kind)
	}
	if got := pe.Error(); got != "openai: refused: status 400 (content_filter): filtered by policy" {
		t.Errorf("Error() = %q", got)
	}
	if cause := errors.Unwrap(pe); cause == nil || cause.Error() != "filtered by policy" {
		t.Errorf("cause = %v, want the provider's reason", cause)
	}
	if pe := RefusedError("p", 200, "refusal", ""); pe.Err != nil || pe.Error() != "p: refused: status 200 (refusal)" {
		t.Errorf("without a reason: %v, cause %v", pe, pe.Err)
	}
}
