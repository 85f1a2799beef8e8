package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTaskBodyErrorsSayWhatCame: a bad task body is told which field, what was expected and
// what came, never a Go type; fields sent without the "input" wrapper are told where they go.
func TestTaskBodyErrorsSayWhatCame(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"subject": "Сайт", "message": "не работает"}`, `the task's fields go inside "input"`},
		{`{"input": "text"}`, `"input" must be an object, got a string`},
		{`{"input": {}, "budget_ms": "500"}`, `"budget_ms" must be a number, got a string`},
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

// TestReadBody: a body is read whole whether its length is declared or not, and one whose
// length is declared is read into a single buffer.
func TestReadBody(t *testing.T) {
	small := bytes.Repeat([]byte("x"), 8<<10)
	large := bytes.Repeat([]byte("y"), maxPresize+4096)
	for _, c := range []struct {
		name     string
		body     []byte
		declared bool
	}{{"declared", small, true}, {"undeclared", small, false}, {"declared past the presize", large, true}, {"empty", nil, true}} {
		req := httptest.NewRequest("POST", "/v1/tasks/triage", bytes.NewReader(c.body))
		if !c.declared {
			req.ContentLength = -1
		}
		got, err := readBody(req)
		if err != nil || !bytes.Equal(got, c.body) {
			t.Errorf("%s: read %d bytes, %v; want the %d sent", c.name, len(got), err, len(c.body))
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		req := &http.Request{Body: io.NopCloser(bytes.NewReader(small)), ContentLength: int64(len(small))}
		if _, err := readBody(req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 { // the request, its body's reader and closer, the buffer
		t.Errorf("%v allocations to read a declared 8 KiB body; want the buffer alone beside the request's", allocs)
	}
}
