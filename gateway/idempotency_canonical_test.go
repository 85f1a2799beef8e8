package gateway

import (
	"bytes"
	"net/http"
	"testing"
)

// TestIdempotencyKeyComparesCanonicalJSON: a retry that sends the same JSON with other
// spacing or key order gets the first answer (the upstream is called once); another body
// with the same key is still 422.
func TestIdempotencyKeyComparesCanonicalJSON(t *testing.T) {
	e := newEnv(t)
	const first = `{"input": {"message": "printer on fire"}, "budget_ms": 1500}`
	const same = "{\n  \"budget_ms\":1500,\n\t\"input\":{ \"message\" : \"printer on fire\" }\n}"
	code, _, a := e.do("POST", "/v1/tasks/triage", clientKey, first, "Idempotency-Key", "t-1")
	if code != http.StatusOK {
		t.Fatalf("first call: %d %s", code, a)
	}
	code, _, b := e.do("POST", "/v1/tasks/triage", clientKey, same, "Idempotency-Key", "t-1")
	if code != http.StatusOK || !bytes.Equal(a, b) {
		t.Fatalf("same JSON written otherwise: %d %s, want the first answer %s", code, b, a)
	}
	if n := e.primary.calls.Load(); n != 1 {
		t.Fatalf("upstream called %d times, want 1", n)
	}
	const other = `{"input": {"message": "printer on fire"}, "budget_ms": 1501}`
	if code, _, b := e.do("POST", "/v1/tasks/triage", clientKey, other, "Idempotency-Key", "t-1"); code != http.StatusUnprocessableEntity {
		t.Fatalf("another body: %d %s, want 422", code, b)
	}
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b": 1, "a": [1.50, {"d": null, "c": "x"}]}`, `{"a":[1.50,{"c":"x","d":null}],"b":1}`},
		{` "s" `, `"s"`},
		{`{"a": 1`, `{"a": 1`},         // bad JSON: the bytes
		{`{"a": 1} {}`, `{"a": 1} {}`}, // two values: the bytes
		{``, ``},
	}
	for _, tt := range tests {
		if got := string(canonicalJSON([]byte(tt.in))); got != tt.want {
			t.Errorf("canonicalJSON(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
