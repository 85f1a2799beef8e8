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

// TestTaskRequestSum: the hash of a task call is that of its canonical JSON: the same for
// other spacing, key order, string escapes and an explicit "budget_ms": null; another for
// any other value, a number written otherwise included.
func TestTaskRequestSum(t *testing.T) {
	sum := func(body string) [32]byte {
		t.Helper()
		req, err := decodeTaskRequest([]byte(body))
		if err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		return req.sum()
	}
	base := sum(`{"input": {"b": [1.50, {"d": null, "c": "x"}], "a": 1}, "budget_ms": 900}`)
	for _, same := range []string{
		`{"budget_ms":900,"input":{"a":1,"b":[1.50,{"c":"x","d":null}]}}`,
		"{\n\t\"input\" : {\"a\": 1, \"b\": [1.50, {\"c\": \"\\u0078\", \"d\": null}]},\n \"budget_ms\": 900}",
	} {
		if sum(same) != base {
			t.Errorf("%s: another sum, want the same", same)
		}
	}
	for _, other := range []string{
		`{"input": {"b": [1.5, {"d": null, "c": "x"}], "a": 1}, "budget_ms": 900}`,
		`{"input": {"b": [1.50, {"d": null, "c": "y"}], "a": 1}, "budget_ms": 900}`,
		`{"input": {"b": [1.50, {"d": null, "c": "x"}], "a": 1}, "budget_ms": 901}`,
		`{"input": {"b": [1.50, {"d": null, "c": "x"}], "a": 1}}`,
	} {
		if sum(other) == base {
			t.Errorf("%s: the same sum, want another", other)
		}
	}
	if sum(`{"input": {}, "budget_ms": null}`) != sum(`{"input": {}}`) {
		t.Error(`"budget_ms": null and no budget_ms: other sums, want the same`)
	}
}
