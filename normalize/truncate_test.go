package normalize

import (
	"strings"
	"testing"
)

// TestCutShort: a span that never closes is completed only when it stops after a complete
// value; one cut inside a value is not, nor, unless the model ended the answer by itself
// (stop), one that stops after a number that may be cut.
func TestCutShort(t *testing.T) {
	const same = "same"
	tests := []struct {
		span string
		cut  string // with the finish reason unknown; "" means complete enough to close
		stop string // when the model ended by itself; same means as cut
	}{
		{`{"a":1}`, "", same},
		{`{"a":1,"b":"x"`, "", same},
		{`{"a":1,`, "", same},
		{`{"a":["x", "y"`, "", same},
		{`{"a":{"b":1}`, "", same},
		{`{"a":[1, 2]`, "", same},
		{`[1, 2,`, "", same},
		{`{"a":true`, "", same},
		{`{"a": None  ` + "\n", "", same},
		{`{"a":"say \"}\""`, "", same},
		{`{'a': 'it's'`, "", same},
		{`{“a”: “x”`, "", same},
		{`{a: 1, b: "x"`, "", same},
		{`{"department":"technical","urgency_score":2.5,"is_urgent": 0.`, "on a number", "number that is not complete"},
		{`{"a":1`, "on a number", ""},
		{`{"a":1 ` + "\n", "on a number", ""},
		{`{"a":0.3`, "on a number", ""},
		{`{"a":-2.5e-3`, "on a number", ""},
		{`{"a":[1, 2`, "on a number", ""},
		{`[0.25`, "on a number", ""},
		{`{"a":-`, "on a number", "number that is not complete"},
		{`{"a":1e`, "on a number", "number that is not complete"},
		{`{"a":1e+`, "on a number", "number that is not complete"},
		{`{"a":.5`, "on a number", "number that is not complete"},
		{`{"a":01`, "on a number", "number that is not complete"},
		{`{"a":1.5.2`, "on a number", "number that is not complete"},
		{`{"a":12ab`, "on a number", "number that is not complete"},
		{`{"a":1, 2`, "on a number", "number that is not complete"}, // a number where a key goes
		{`{"a":"x`, "inside a string", same},
		{`{"a":"say \"`, "inside a string", same},
		{`{'a': 'it`, "inside a string", same},
		{`{"a":tr`, "last value", same},
		{`{"a":nul`, "last value", same},
		{`{"a":`, "last value", same},
		{`{"a"`, "last value", same},
		{`{"a":1,"b"`, "last value", same},
		{`{"a":1, b`, "last value", same},
		{`{"a":[`, "last value", same},
		{`{`, "last value", same},
		{`{"a":"x"` + "\nHope this helps.", "last value", same},
		{`{"a":"x" // a note`, "last value", same},
		{`{"a":,`, "last value", same},
		{`{"a":1` + "\nHope this helps.", "last value", same},
	}
	for _, tt := range tests {
		if tt.stop == same {
			tt.stop = tt.cut
		}
		for _, c := range []struct {
			ended bool
			want  string
		}{{false, tt.cut}, {true, tt.stop}} {
			got := cutShort(tt.span, c.ended)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("cutShort(%q, ended %v) = %q, want %q", tt.span, c.ended, got, c.want)
			}
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
