package gateway

import (
	"strings"
	"testing"
)

// TestTaskBodyErrorsSayWhatCame: a bad task body is told which field, what was expected and
// what came, never a Go type; fields sent without the "input" wrapper are told where they go.
func TestTaskBodyErrorsSayWhatCame(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"subject": "Сайт", "message": "не работает"}`, `the task's fields go inside "input"`},
		{`{"input": "text"}`, `"input" must be an object, got a string`},
		{`{"input": {}, "budget_ms": "500"}`, `"budget_ms" must be a whole number, got a string`},
		{`{"input": {}, "budget_ms": 100.5}`, `"budget_ms" must be a whole number, got a number 100.5`},
		{`[1, 2]`, `the body must be a JSON object, got an array`},
		{``, `the body is empty`},
		{`{"input": {}`, `invalid JSON`},
	}
	for _, tt := range tests {
		_, err := decodeTaskRequest([]byte(tt.body))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("body %s: %v, want %q", tt.body, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "map[string]")) {
			t.Errorf("body %s: %v names a Go type", tt.body, err)
		}
	}
}
