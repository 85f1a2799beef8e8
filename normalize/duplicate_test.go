package normalize

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

const moderationSchema = `{
  "type": "object",
  "properties": {
    "decision": {"enum": ["allow", "reject"]},
    "categories": {"type": "array", "items": {"enum": ["spam", "abuse", "other"]}},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1}
  },
  "required": ["decision", "categories", "confidence"],
  "additionalProperties": false
}`

// openTriageSchema admits extra fields and needs no department, so that only the duplicate
// check stands between an answer that gives department twice and its acceptance.
const openTriageSchema = `{
  "type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
  },
  "required": ["is_urgent", "urgency_score"]
}`

// TestDuplicateKeysAreRefused: an object that holds a key twice is refused at schema, never
// settled by keeping one value, however the duplicate comes about.
func TestDuplicateKeysAreRefused(t *testing.T) {
	moderation, err := Compile("moderation", []byte(moderationSchema))
	if err != nil {
		t.Fatal(err)
	}
	lead, err := Compile("lead", []byte(leadSchema))
	if err != nil {
		t.Fatal(err)
	}
	list, err := Compile("list", []byte(`{"type": "array"}`))
	if err != nil {
		t.Fatal(err)
	}
	open, err := Compile("triage", []byte(openTriageSchema), WithSynonyms(map[string][]string{"department": {"категория", "dept"}}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		c      *Contract
		text   string
		detail string // "" means accepted
	}{
		{"valid JSON, clients read the last", moderation, `{"decision":"reject","categories":[],"confidence":0.9,"decision":"allow"}`,
			"at /: duplicate key 'decision'"},
		{"coerce re-encodes from the map", moderation, `{"decision":"reject","categories":[],"confidence":"0.9","decision":"allow"}`,
			"at /: duplicate key 'decision'"},
		{"repair inserts the missing comma", moderation, `{"decision":"reject","categories":[],"confidence":0.9 "decision":"allow"}`,
			"at /: duplicate key 'decision'"},
		{"the same key escaped", moderation, `{"decision":"reject","categories":[],"confidence":0.9,"\u0064ecision":"allow"}`,
			"at /: duplicate key 'decision'"},
		{"in a nested object", lead, `{"name":"A","wants_demo":true,"contact":{"phone_number":"1","phone_number":"2"}}`,
			"at /contact: duplicate key 'phone_number'"},
		{"in an array item", list, `[{"a":1},{"a":1,"b":2,"a":2}]`, "at /1: duplicate key 'a'"},
		{"a synonym beside its property, extras admitted", open, `{"department":"billing","категория":"technical","is_urgent":"1","urgency_score":1}`,
			"at /: duplicate key 'department' (given as 'department' and 'категория')"},
		{"two synonyms of one property, extras admitted", open, `{"dept":"billing","категория":"technical","is_urgent":"1","urgency_score":1}`,
			"at /: duplicate key 'department' (given as 'dept' and 'категория')"},
		{"one key per object is no duplicate", list, `[{"a":1},{"a":{"a":2}}]`, ""},
		{"a synonym alone is renamed", open, `{"категория":"technical","is_urgent":"1","urgency_score":1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.c.Normalize(tt.text)
			if tt.detail == "" {
				if out.Err != nil {
					t.Fatalf("refused: %v", out.Err)
				}
				return
			}
			if out.Err == nil {
				t.Fatalf("accepted as %s", out.Value)
			}
			if out.Err.Stage != StageSchema || !strings.Contains(strings.Join(out.Err.Details, "\n"), tt.detail) {
				t.Fatalf("refused at %s: %q; want at schema with %q", out.Err.Stage, out.Err.Details, tt.detail)
			}
		})
	}
}

// TestValidateRefusesDuplicateKeys: an operator's answer is checked as strictly.
func TestValidateRefusesDuplicateKeys(t *testing.T) {
	c, err := Compile("moderation", []byte(moderationSchema))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate(json.RawMessage(`{"decision":"reject","categories":[],"confidence":1,"decision":"allow"}`))
	if err == nil || !strings.Contains(err.Error(), "duplicate key 'decision'") {
		t.Fatalf("err %v", err)
	}
	if err := c.Validate(json.RawMessage(`{"decision":"allow","categories":[],"confidence":1}`)); err != nil {
		t.Fatal(err)
	}
}

// TestFixturesDoNotCollapseDuplicates: a result or an expectation with a key twice is never
// the same as one with the key once.
func TestFixturesDoNotCollapseDuplicates(t *testing.T) {
	if same, err := sameJSON([]byte(`{"a":1,"a":2}`), []byte(`{"a":2}`)); same || err == nil || !strings.Contains(err.Error(), "duplicate key 'a'") {
		t.Fatalf("result with a duplicate: same %v, err %v", same, err)
	}
	if same, err := sameJSON([]byte(`{"a":2}`), []byte(`{"a":1,"a":2}`)); same || err == nil {
		t.Fatalf("expectation with a duplicate: same %v, err %v", same, err)
	}
	if _, err := ParseFixture("dup", "{}", "{\"a\": 1, \"a\": 2}\n"); err == nil || !strings.Contains(err.Error(), "duplicate key 'a'") {
		t.Fatalf("ParseFixture: %v", err)
	}
}

// TestDuplicateKey: keys are compared as decoded, inside strings nothing is structure, and a
// large object is checked as well as a small one.
func TestDuplicateKey(t *testing.T) {
	var many strings.Builder
	many.WriteString(`{`)
	for i := range 40 {
		many.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
	}
	large := many.String()
	tests := []struct{ text, want string }{
		{`{"a":1,"b":2}`, ""},
		{`{"a":"x\",\"a\":1","b":"{\"a\":2}"}`, ""},
		{`{"a":1,"\u0061":2}`, "at /: duplicate key 'a'"},
		{"{\"\xff\":1,\"\xfe\":2}", "at /: duplicate key '\ufffd'"},
		{`{"a":{"b":1},"c":[{"b":1},{"b":2,"b":3}]}`, "at /c/1: duplicate key 'b'"},
		{`[[1],[2,{"x":{"y":1,"y":1}}]]`, "at /1/1/x: duplicate key 'y'"},
		{`{"a\\":1,"a":2}`, ""},
		{large + `"new":2}`, ""},
		{large + `"k1":2}`, "at /: duplicate key 'k1'"},
		{large + `"k39":2}`, "at /: duplicate key 'k39'"},
		{`{"o":` + large + `"k2":2},"o2":{"k2":1}}`, "at /o: duplicate key 'k2'"},
	}
	for _, tt := range tests {
		if got := duplicateKey(tt.text); got != tt.want {
			t.Errorf("duplicateKey(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// FuzzDuplicateKey checks the byte walk against a json.Decoder token walk on valid JSON.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":"\"a\"","b":[{"a":1},{"a":1}]}`, `{"\u0061":1,"a":2}`, `[{"x":{}},{"x":[]}]`, "{\"\xff\":1,\"\xfe\":2}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		if got, want := duplicateKey(s) != "", hasDuplicate(s); got != want {
			t.Fatalf("duplicateKey(%q) = %q, want a duplicate: %v", s, duplicateKey(s), want)
		}
	})
}

// hasDuplicate is the reference: a json.Decoder token walk.
func hasDuplicate(s string) bool {
	dec := json.NewDecoder(strings.NewReader(s))
	type frame struct {
		keys      map[string]bool
		expectKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch x := tok.(type) {
		case json.Delim:
			switch x {
			case '{', '[':
				if top != nil && top.keys != nil {
					top.expectKey = true
				}
				stack = append(stack, &frame{keys: map[string]bool{}, expectKey: x == '{'})
				if x == '[' {
					stack[len(stack)-1].keys = nil
				}
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.keys != nil && top.expectKey {
				if top.keys[x] {
					return true
				}
				top.keys[x] = true
				top.expectKey = false
				continue
			}
			if top != nil && top.keys != nil {
				top.expectKey = true
			}
		default:
			if top != nil && top.keys != nil {
				top.expectKey = true
			}
		}
	}
}
