package normalize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
// numbers (triage) and one of free strings (lead), with every finish reason. It must never
// panic; an accepted value is JSON that fits the schema; a refusal names its stage and has no
// value; and a text that is already valid JSON fitting the schema comes out unchanged, with no
// step counted, whatever the finish reason. The finish reason only decides about a JSON that
// never closes: with length the outcome is the unknown one or a refusal at StageTruncated
// (the only way to get there); with stop it is the unknown one unless that was a refusal at
// StageRepair (a number at the end), and tool_calls reads as stop, content_filter as unknown.
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
	f.Add(`{"department": "billing", "is_urgent": 0.1, "urgency_score": 0.3`)
	f.Add(`{"company": null, "contact_name": null, "email": null, "wants_demo": false, "products": [], "seats": 1e`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []*Contract{triage, lead} {
			outs := map[string]Outcome{}
			for _, finish := range []string{"", "stop", "length", "tool_calls", "content_filter"} {
				out := c.NormalizeAnswer(s, finish)
				outs[finish] = out
				if out.Err == nil {
					if err := c.Validate(out.Value); err != nil {
						t.Fatalf("%s, finish %q: accepted %q, which does not fit: %v", c.Name(), finish, out.Value, err)
					}
				} else {
					switch {
					case out.Value != nil:
						t.Fatalf("%s, finish %q: a refusal with a value %q", c.Name(), finish, out.Value)
					case out.Err.Stage == StageTruncated && finish != "length":
						t.Fatalf("%s, finish %q: truncated", c.Name(), finish)
					case out.Err.Stage != StageExtract && out.Err.Stage != StageRepair && out.Err.Stage != StageSchema && out.Err.Stage != StageTruncated:
						t.Fatalf("%s, finish %q: stage %q", c.Name(), finish, out.Err.Stage)
					case len(out.Err.Details) == 0:
						t.Fatalf("%s, finish %q: a refusal without details", c.Name(), finish)
					}
				}
				trimmed := strings.TrimSpace(s)
				if json.Valid([]byte(trimmed)) && c.Validate(json.RawMessage(trimmed)) == nil {
					if out.Err != nil || string(out.Value) != trimmed || out.Steps != 0 {
						t.Fatalf("%s, finish %q: valid %q came out as %q, steps %s, err %v", c.Name(), finish, trimmed, out.Value, out.Steps, out.Err)
					}
				}
			}
			unknown := outs[""]
			if l := outs["length"]; !(l.Err != nil && l.Err.Stage == StageTruncated) && !sameOutcome(l, unknown) {
				t.Fatalf("%s: finish length %s %v, unknown %s %v", c.Name(), l.Value, l.Err, unknown.Value, unknown.Err)
			}
			if st := outs["stop"]; !(unknown.Err != nil && unknown.Err.Stage == StageRepair) && !sameOutcome(st, unknown) {
				t.Fatalf("%s: finish stop %s %v, unknown %s %v", c.Name(), st.Value, st.Err, unknown.Value, unknown.Err)
			}
			if !sameOutcome(outs["tool_calls"], outs["stop"]) || !sameOutcome(outs["content_filter"], unknown) {
				t.Fatalf("%s: tool_calls does not read as stop, or content_filter as unknown", c.Name())
			}
		}
	})
}

// sameOutcome reports whether two outcomes are one: the same value, steps, and refusal stage
// and number of details (the schema library lists the names of a detail in no fixed order).
func sameOutcome(a, b Outcome) bool {
	if string(a.Value) != string(b.Value) || a.Steps != b.Steps || (a.Err == nil) != (b.Err == nil) {
		return false
	}
	return a.Err == nil || a.Err.Stage == b.Err.Stage && len(a.Err.Details) == len(b.Err.Details)
}

// FuzzClientSchema compiles arbitrary bytes as a client's schema (FromClient) and validates an
// answer against what compiles, through Validate and the pipeline. Neither may panic, and
// neither may take long: the limits bound the work of any schema they let through.
func FuzzClientSchema(f *testing.F) {
	f.Add([]byte(triageSchema), `{"department":"technical","is_urgent":0.8,"urgency_score":2}`)
	f.Add(refLadder(7), `{"x": 1}`)
	f.Add(refLadder(16), `"s"`)
	f.Add(nestedItems(40), `[[[["a"]]]]`)
	f.Add([]byte(`{"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}`), `{"children": [{"children": [{"children": 1}]}]}`)
	f.Add([]byte(`{"$ref": "#/$defs/n", "$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}}}`), `null`)
	f.Add([]byte(`{"anyOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}]}`), `[[[[[[[[1]]]]]]]]`)
	f.Add([]byte(`{"x": {"anyOf": [{"type": "string"}, {"$ref": "#/x"}]}, "$ref": "#/x", "unevaluatedProperties": false}`), `{"a": 1}`)
	f.Fuzz(func(t *testing.T, schema []byte, answer string) {
		start := time.Now()
		c, err := Compile("client", schema, FromClient())
		if err == nil {
			_ = c.Validate(json.RawMessage(answer))
			_ = c.Normalize(answer)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("took %v on schema %q, answer %q", took, schema, answer)
		}
	})
}
