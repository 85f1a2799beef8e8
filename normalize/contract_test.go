package normalize

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

const triageSchema = `{
  "type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
  },
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false
}`

func TestCheck(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		text  string
		want  string
		stage string
	}{
		{"clean", `{"department":"technical","is_urgent":0.8,"urgency_score":2}`, `{"department":"technical","is_urgent":0.8,"urgency_score":2}`, ""},
		{"fenced with tag", "Вот ваш ответ:\n```json\n{\"department\": \"billing\", \"is_urgent\": 0.1, \"urgency_score\": 0.5}\n```\nУдачи!", `{"department":"billing","is_urgent":0.1,"urgency_score":0.5}`, ""},
		{"prose around", `Here it is: {"department": null, "is_urgent": 0, "urgency_score": 0} hope it helps`, `{"department":null,"is_urgent":0,"urgency_score":0}`, ""},
		{"braces in strings", `{"department":"other","is_urgent":0.5,"urgency_score":1} and {"x":"}"}`, `{"department":"other","is_urgent":0.5,"urgency_score":1}`, ""},
		{"refusal in prose", `Извините, я не могу помочь с этим запросом.`, "", "extract"},
		{"empty", ``, "", "extract"},
		{"truncated, repaired, then short of a field", `{"department":"technical","is_urgent":0.8,`, "", "schema"},
		{"truncated after a string, repaired", `{"is_urgent":0.8,"urgency_score":2,"department":"technical"`, `{"is_urgent":0.8,"urgency_score":2,"department":"technical"}`, ""},
		{"truncated after a comma, repaired", `{"department":"technical","is_urgent":0.8,"urgency_score":2,`, `{"department":"technical","is_urgent":0.8,"urgency_score":2}`, ""},
		{"truncated on a number: it may be cut", `{"department":"technical","is_urgent":0.8,"urgency_score":2`, "", "repair"},
		{"beyond repair", `{"department": "technical", "is_urgent": 0.8,, "urgency_score": 2}`, "", "repair"},
		{"missing field", `{"department":"technical","is_urgent":0.8}`, "", "schema"},
		{"extra field forbidden", `{"department":"technical","is_urgent":0.8,"urgency_score":2,"note":"x"}`, "", "schema"},
		{"array for object", `[{"department":"technical","is_urgent":0.8,"urgency_score":2}]`, "", "schema"},
		{"out of range", `{"department":"technical","is_urgent":3,"urgency_score":2}`, "", "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Check(tt.text)
			if tt.stage == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				var compact bytes.Buffer
				if err := json.Compact(&compact, got); err != nil {
					t.Fatalf("not JSON: %s", got)
				}
				if compact.String() != tt.want {
					t.Fatalf("got %s, want %s", got, tt.want)
				}
				return
			}
			var ce *afloat.ContractError
			if !errors.As(err, &ce) {
				t.Fatalf("got %s, %v; want a contract error at %s", got, err, tt.stage)
			}
			if ce.Stage != tt.stage {
				t.Fatalf("stage %q, want %q (%v)", ce.Stage, tt.stage, err)
			}
			if afloat.KindOf(err) != afloat.Contract {
				t.Fatalf("kind %v", afloat.KindOf(err))
			}
		})
	}
}

func TestDetailsNameTheField(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Check(`{"department":"technical","is_urgent":3}`)
	var ce *afloat.ContractError
	if !errors.As(err, &ce) {
		t.Fatal(err)
	}
	joined := strings.Join(ce.Details, "\n")
	if !strings.Contains(joined, "urgency_score") || !strings.Contains(joined, "/is_urgent") {
		t.Fatalf("details do not name the fields: %q", joined)
	}
}

func TestCompileRejectsBadSchema(t *testing.T) {
	if _, err := Compile("bad", []byte(`{"type": 12}`)); err == nil {
		t.Fatal("invalid schema compiled")
	}
	if _, err := Compile("bad", []byte(`{`)); err == nil {
		t.Fatal("unparsable schema compiled")
	}
}
