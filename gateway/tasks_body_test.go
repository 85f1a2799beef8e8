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

// TestDeepBodyGoesToEncodingJSON: a body nested past fastMaxDepth is not given to the fast
// parser (its time grows with the square of the depth, and it has no bound), and one past
// encoding/json's 10,000 levels is refused as encoding/json refuses it.
func TestDeepBodyGoesToEncodingJSON(t *testing.T) {
	if !nestsWithin([]byte(nested(fastMaxDepth-2)), fastMaxDepth) || nestsWithin([]byte(nested(fastMaxDepth-1)), fastMaxDepth) {
		t.Fatal("nestsWithin does not count the body's, the input's and a's levels")
	}
	var req taskRequest
	if fastDecode([]byte(nested(fastMaxDepth)), &req) {
		t.Error("the fast parser was given a body nested past its bound")
	}
	long := strings.Repeat(" ", fastMin) // past fastMin, so that only the depth keeps it from the fast parser
	if _, err := decodeTaskRequest([]byte(nested(200) + long)); err != nil {
		t.Errorf("a body 200 levels deep: %v, want it decoded (by encoding/json)", err)
	}
	_, err := decodeTaskRequest([]byte(nested(10_001) + long))
	if err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
		t.Errorf("a body 10,001 levels deep: %v, want encoding/json's refusal", err)
	}
}

// TestNestsWithinSkipsStrings counts brackets outside strings only, a string's end being a
// quote behind an even number of backslashes.
func TestNestsWithinSkipsStrings(t *testing.T) {
	for _, c := range []struct {
		body string
		max  int
		want bool
	}{
		{`{"a":[1]}`, 2, true},
		{`{"a":[[1]]}`, 2, false},
		{`{"a":"[[[[{{{{"}`, 1, true},
		{`{"a":"x\"[[[["}`, 1, true},
		{`{"a":"x\\","b":[[1]]}`, 2, false}, // the string ends after \\: the brackets count
		{`{"a":"x\\\"[[","b":1}`, 1, true},
		{`{"a":"unterminated [[[[`, 1, true},
		{`]]]]{`, 1, true},
	} {
		if got := nestsWithin([]byte(c.body), c.max); got != c.want {
			t.Errorf("nestsWithin(%s, %d) = %v, want %v", c.body, c.max, got, c.want)
		}
	}
}
