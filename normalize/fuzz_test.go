package normalize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzLocate(f *testing.F) {
	for _, s := range []string{"```json\n{\"a\":1}\n```", `x {"a":"}"} y`, "[", "```\n", "\ufeff{}", `{'a': 'it's'}`, "{“a”: 1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		span, ok := Locate(s)
		if ok && (len(span) == 0 || (span[0] != '{' && span[0] != '[')) {
			t.Fatalf("span %q does not start a JSON value", span)
		}
		if ok && !strings.Contains(s, span) {
			t.Fatalf("span %q is not part of the text", span)
		}
	})
}

// FuzzNormalize runs the whole pipeline on arbitrary text, against a schema of enums and
// numbers (triage) and one of free strings (lead). It must never panic; an accepted value is
// JSON that fits the schema; a refusal names its stage and has no value; and a text that is
// already valid JSON fitting the schema comes out unchanged, with no step counted.
func FuzzNormalize(f *testing.F) {
	triage := corpusContract(f, filepath.Join("testdata", "corpus", "triage"))
	lead := corpusContract(f, filepath.Join("testdata", "corpus", "lead"))
	outs, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*", "*.out"))
	for _, p := range outs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(`{"company": "x", "contact_name": "` + "```json\\n{}\\n```" + `", "email": null, "wants_demo": true, "products": []}`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []*Contract{triage, lead} {
			out := c.Normalize(s)
			if out.Err == nil {
				if err := c.Validate(out.Value); err != nil {
					t.Fatalf("%s: accepted %q, which does not fit: %v", c.Name(), out.Value, err)
				}
			} else {
				switch {
				case out.Value != nil:
					t.Fatalf("%s: a refusal with a value %q", c.Name(), out.Value)
				case out.Err.Stage != StageExtract && out.Err.Stage != StageRepair && out.Err.Stage != StageSchema:
					t.Fatalf("%s: stage %q", c.Name(), out.Err.Stage)
				case len(out.Err.Details) == 0:
					t.Fatalf("%s: a refusal without details", c.Name())
				}
			}
			trimmed := strings.TrimSpace(s)
			if json.Valid([]byte(trimmed)) && c.Validate(json.RawMessage(trimmed)) == nil {
				if out.Err != nil || string(out.Value) != trimmed || out.Steps != 0 {
					t.Fatalf("%s: valid %q came out as %q, steps %s, err %v", c.Name(), trimmed, out.Value, out.Steps, out.Err)
				}
			}
		}
	})
}
