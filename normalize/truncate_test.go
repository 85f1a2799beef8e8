package normalize

import (
	"strings"
	"testing"
)

// TestCutShort: a span that never closes is completed only when it stops after a complete
// value; one cut inside a value, or after a number that may be cut, is not.
func TestCutShort(t *testing.T) {
	tests := []struct {
		span string
		cut  string // "" means complete enough to close
	}{
		{`{"a":1}`, ""},
		{`{"a":1,"b":"x"`, ""},
		{`{"a":1,`, ""},
		{`{"a":["x", "y"`, ""},
		{`{"a":{"b":1}`, ""},
		{`{"a":[1, 2]`, ""},
		{`[1, 2,`, ""},
		{`{"a":true`, ""},
		{`{"a": None  ` + "\n", ""},
		{`{"a":"say \"}\""`, ""},
		{`{'a': 'it's'`, ""},
		{`{“a”: “x”`, ""},
		{`{a: 1, b: "x"`, ""},
		{`{"department":"technical","urgency_score":2.5,"is_urgent": 0.`, "on a number"},
		{`{"a":1`, "on a number"},
		{`{"a":1 ` + "\n", "on a number"},
		{`{"a":-`, "on a number"},
		{`{"a":"x`, "inside a string"},
		{`{"a":"say \"`, "inside a string"},
		{`{'a': 'it`, "inside a string"},
		{`{"a":tr`, "last value"},
		{`{"a":nul`, "last value"},
		{`{"a":`, "last value"},
		{`{"a"`, "last value"},
		{`{"a":1,"b"`, "last value"},
		{`{"a":1, b`, "last value"},
		{`{"a":[`, "last value"},
		{`{`, "last value"},
		{`{"a":"x"` + "\nHope this helps.", "last value"},
		{`{"a":"x" // a note`, "last value"},
		{`{"a":,`, "last value"},
	}
	for _, tt := range tests {
		got := cutShort(tt.span)
		if tt.cut == "" && got != "" || tt.cut != "" && !strings.Contains(got, tt.cut) {
			t.Errorf("cutShort(%q) = %q, want %q", tt.span, got, tt.cut)
		}
	}
}

// TestTruncatedAnswers: the last value of a cut answer is never made up; an answer that only
// lacks its closers is still completed.
func TestTruncatedAnswers(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text, want string
		stage            string
	}{
		{"cut inside a number", `{"department":"technical","urgency_score":2.5,"is_urgent": 0.`, "", StageRepair},
		{"cut after a number", `{"department":"technical","is_urgent":0.9,"urgency_score":2`, "", StageRepair},
		{"cut inside a literal", `{"is_urgent":0.9,"urgency_score":2,"department":nu`, "", StageRepair},
		{"cut inside a string", `{"is_urgent":0.9,"urgency_score":2,"department":"tech`, "", StageRepair},
		{"cut after a key", `{"is_urgent":0.9,"urgency_score":2,"department"`, "", StageRepair},
		{"cut in a fence", "```json\n{\"department\":\"technical\",\"is_urgent\":0.9,\"urgency_score\":2.\n```", "", StageRepair},
		{"only the closer is missing", `{"is_urgent":0.9,"urgency_score":2,"department":"technical"`,
			`{"is_urgent":0.9,"urgency_score":2,"department":"technical"}`, ""},
		{"cut after a literal", `{"is_urgent":0.9,"urgency_score":2,"department":null`,
			`{"is_urgent":0.9,"urgency_score":2,"department":null}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := c.Normalize(tt.text)
			if tt.stage != "" {
				if out.Err == nil || out.Err.Stage != tt.stage || !strings.Contains(out.Err.Details[0], "cut off") {
					t.Fatalf("outcome %s %v, want a refusal at %s", out.Value, out.Err, tt.stage)
				}
				return
			}
			if out.Err != nil || string(out.Value) != tt.want || out.Steps != StepRepair {
				t.Fatalf("outcome %s %s %v, want %s", out.Value, out.Steps, out.Err, tt.want)
			}
		})
	}
}
