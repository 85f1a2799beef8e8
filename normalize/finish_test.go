package normalize

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

// TestNormalizeAnswerFinish: the provider's finish reason decides what becomes of a JSON that
// never closes. With stop (or tool_calls) the model ended by itself, so an answer that only
// lacks its closers is completed, after a whole number too; with length the provider cut it,
// and it is refused at StageTruncated; unknown keeps the cautious reading, where a number at
// the end may be cut.
func TestNormalizeAnswerFinish(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	const (
		endsOnNumber = `{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3`
		endsOnString = `{"is_urgent": 0.9, "urgency_score": 2, "department": "technical"`
		closedJSON   = "```json\n{\"department\": \"sales\", \"is_urgent\": 0.2, \"urgency_score\": 1}\n```\nThe customer asks for a quote and mentions that"
	)
	tests := []struct {
		name, text, finish string
		want               string // the value, when accepted
		stage, detail      string // the refusal, else
		steps              Steps
	}{
		{"stop: a number at the end is the model's", endsOnNumber, "stop",
			`{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3}`, "", "", StepRepair},
		{"tool_calls: likewise", endsOnNumber, "tool_calls",
			`{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3}`, "", "", StepRepair},
		{"stop: a negative exponent", `{"department": "other", "is_urgent": 0, "urgency_score": 25e-1`, "stop",
			`{"department": "other", "is_urgent": 0, "urgency_score": 2.5}`, "", "", StepRepair},
		{"stop: a number in a fence", "```json\n{\"department\": null, \"is_urgent\": 1, \"urgency_score\": 3\n```", "stop",
			`{"department": null, "is_urgent": 1, "urgency_score": 3}`, "", "", StepLocate | StepRepair},
		{"unknown: a number at the end may be cut", endsOnNumber, "", "", StageRepair, "it stops on a number, which may be cut short", 0},
		{"content_filter: as unknown", endsOnNumber, "content_filter", "", StageRepair, "it stops on a number, which may be cut short", 0},
		{"stop: cut inside a string", `{"is_urgent": 0.9, "urgency_score": 2, "department": "tech`, "stop", "", StageRepair, "inside a string", 0},
		{"stop: cut inside a literal", `{"is_urgent": 0.9, "urgency_score": 2, "department": nu`, "stop", "", StageRepair, "last value", 0},
		{"stop: a key without its value", `{"is_urgent": 0.9, "urgency_score": 2, "department"`, "stop", "", StageRepair, "last value", 0},
		{"stop: a dangling dot", `{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.`, "stop", "", StageRepair, "number that is not complete", 0},
		{"stop: a dangling minus", `{"department": "billing", "is_urgent": 0.1, "urgency_score": -`, "stop", "", StageRepair, "number that is not complete", 0},
		{"stop: a number, then prose", endsOnNumber + "\nThat is all.", "stop", "", StageRepair, "last value", 0},
		{"stop: the closer after a string, as before", endsOnString, "stop",
			`{"is_urgent": 0.9, "urgency_score": 2, "department": "technical"}`, "", "", StepRepair},
		{"length: unclosed after a number", endsOnNumber, "length", "", StageTruncated,
			"the answer was cut by the token limit before the JSON ended (it ends with `….1, \"urgency_score\": 0.3`)", 0},
		{"length: unclosed after a string, which unknown completes", endsOnString, "length", "", StageTruncated, "cut by the token limit", 0},
		{"length: cut inside a string", `{"is_urgent": 0.9, "urgency_score": 2, "department": "tech`, "length", "", StageTruncated, "cut by the token limit", 0},
		{"length: unclosed in a fence", "Вот ответ:\n```json\n{\"department\": \"billing\", \"is_urgent\": 0.1,", "length", "", StageTruncated, "cut by the token limit", StepLocate},
		{"length: closed JSON, the prose after it cut", closedJSON, "length",
			`{"department": "sales", "is_urgent": 0.2, "urgency_score": 1}`, "", "", StepLocate},
		{"length: closed JSON that needs repair", `{'department': 'sales', 'is_urgent': 0.2, 'urgency_score': 1,} and then`, "length",
			`{"department": "sales", "is_urgent": 0.2, "urgency_score": 1}`, "", "", StepLocate | StepRepair},
		{"length: closed JSON short of a field", `{"department": "sales", "is_urgent": 0.2}`, "length", "", StageSchema, "missing property", 0},
		{"length: no JSON yet", "Sure! Here is the classification of the ticket you", "length", "", StageExtract, "no JSON", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := c.NormalizeAnswer(tt.text, tt.finish)
			if out.Steps != tt.steps {
				t.Errorf("steps %s, want %s", out.Steps, tt.steps)
			}
			if tt.stage != "" {
				if out.Err == nil {
					t.Fatalf("accepted as %s, want a refusal at %s", out.Value, tt.stage)
				}
				if out.Err.Stage != tt.stage || len(out.Err.Details) == 0 || !strings.Contains(out.Err.Details[0], tt.detail) || out.Value != nil {
					t.Fatalf("refused at %s: %q, want at %s with %q", out.Err.Stage, out.Err.Details, tt.stage, tt.detail)
				}
				return
			}
			if out.Err != nil {
				t.Fatalf("refused: %v", out.Err)
			}
			same, err := sameJSON(out.Value, []byte(tt.want))
			if err != nil || !same {
				t.Fatalf("value %s, want %s (%v)", out.Value, tt.want, err)
			}
		})
	}
}

// TestNormalizeIsUnknownFinish: Normalize and Check read an answer as NormalizeAnswer does
// with the finish reason unknown.
func TestNormalizeIsUnknownFinish(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		`{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3`,
		`{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3}`,
		`{"is_urgent": 0.9, "urgency_score": 2, "department": "technical"`,
		`{"is_urgent": 0.9, "urgency_score": 2, "department": "tech`,
		"no JSON here",
	} {
		a, b := c.Normalize(text), c.NormalizeAnswer(text, "")
		if string(a.Value) != string(b.Value) || a.Steps != b.Steps || (a.Err == nil) != (b.Err == nil) ||
			a.Err != nil && a.Err.Error() != b.Err.Error() {
			t.Errorf("%q: Normalize %s %s %v, NormalizeAnswer(\"\") %s %s %v", text, a.Value, a.Steps, a.Err, b.Value, b.Steps, b.Err)
		}
	}
}

// TestReaskTruncated: the re-ask of an answer cut by the length limit says so and asks for
// one complete, shorter JSON object; its template data keep the fields ReaskFields lists.
func TestReaskTruncated(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	answer := `{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3`
	out := c.NormalizeAnswer(answer, "length")
	if out.Err == nil || out.Err.Stage != StageTruncated {
		t.Fatalf("outcome %s %v, want a refusal at %s", out.Value, out.Err, StageTruncated)
	}
	text := ReaskText(out.Err, c.Schema())
	for _, want := range []string{"cut off by the length limit", "one complete, shorter JSON object", "no prose", `"urgency_score"`} {
		if !strings.Contains(text, want) {
			t.Errorf("re-ask text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "does not fit the required format") {
		t.Errorf("re-ask text blames the format of a cut answer:\n%s", text)
	}
	data := ReaskData(out.Err, c.Schema(), answer)
	if data["stage"] != StageTruncated || data["answer"] != answer || data["schema"] != string(c.Schema()) {
		t.Fatalf("data %v", data)
	}
	if errs, _ := data["errors"].([]string); len(errs) != 1 || !strings.Contains(errs[0], "cut by the token limit") {
		t.Fatalf("errors %q", data["errors"])
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	if got, want := strings.Join(slices.Sorted(slices.Values(keys)), ","), strings.Join(ReaskFields(), ","); got != want {
		t.Fatalf("data fields %s, ReaskFields %s", got, want)
	}
	// Other stages keep their message.
	other := ReaskText(&afloat.ContractError{Stage: StageRepair, Details: []string{"x"}}, json.RawMessage(`{}`))
	if !strings.Contains(other, "does not fit the required format") || strings.Contains(other, "length limit") {
		t.Errorf("re-ask text of a repair refusal:\n%s", other)
	}
}
