package normalize

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

func TestLocate(t *testing.T) {
	tests := []struct {
		name, text, want string
		ok               bool
	}{
		{"bare object", `{"a":1}`, `{"a":1}`, true},
		{"byte-order mark", "\ufeff{\"a\":1}", `{"a":1}`, true},
		{"fence with tag", "```json\n{\"a\":1}\n```", `{"a":1}`, true},
		{"fence without tag", "Ответ:\n```\n{\"a\":1}\n```\nВсё.", `{"a":1}`, true},
		{"fence with upper-case tag", "```JSON\n{\"a\":1}\n```", `{"a":1}`, true},
		{"unclosed fence", "```json\n{\"a\":1}\n", `{"a":1}`, true},
		{"second fence holds the JSON", "```python\nprint({'x': 1})\n```\nand\n```json\n{\"a\":1}\n```", `{"a":1}`, true},
		{"fence on one line", "```json {\"a\":1} ```", `{"a":1}`, true},
		{"preamble and trailing prose", "Claro! Aqui está: {\"a\": \"b\"} Espero ter ajudado.", `{"a": "b"}`, true},
		{"brace in a string", `{"a":"}"} {"b":2}`, `{"a":"}"}`, true},
		{"escaped quote in a string", `{"a":"say \"}\""} x`, `{"a":"say \"}\""}`, true},
		{"prose in square brackets first", `[Ответ] {"a":1}`, `{"a":1}`, true},
		{"placeholder in braces first", `Fill {name}: {"a":1}`, `{"a":1}`, true},
		{"footnote that is JSON", `see [1] {"a":1}`, `[1]`, true},
		{"array", `Here: [{"a":1},{"a":2}] done`, `[{"a":1},{"a":2}]`, true},
		{"truncated", `Вот: {"a": [1, 2`, `{"a": [1, 2`, true},
		{"single quotes with a brace inside", `{'a': 'x}y', 'b': 1} trailing`, `{'a': 'x}y', 'b': 1}`, true},
		{"apostrophe inside single quotes", `{'a': 'it's', 'b': '}'} end`, `{'a': 'it's', 'b': '}'}`, true},
		{"typographic quotes", `Итог: {“a”: “}”} конец`, `{“a”: “}”}`, true},
		{"unquoted key", `ok {a: 1} ok`, `{a: 1}`, true},
		{"comment first", "{// the answer\n\"a\": 1}", "{// the answer\n\"a\": 1}", true},
		{"python literal in array", `[True, None]`, `[True, None]`, true},
		{"no JSON", `Извините, я не могу помочь с этим.`, ``, false},
		{"only prose brackets", `[citation needed] {see below}`, ``, false},
		{"empty", ``, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Locate(tt.text)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("Locate = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

const leadSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": ["string", "null"]},
    "email": {"type": ["string", "null"]},
    "budget": {"type": ["number", "null"], "minimum": 0},
    "seats": {"type": "integer", "minimum": 1},
    "wants_demo": {"type": "boolean"},
    "products": {"type": "array", "items": {"enum": ["crm", "helpdesk", "analytics"]}},
    "contact": {"$ref": "#/$defs/contact"}
  },
  "required": ["name", "wants_demo"],
  "additionalProperties": false,
  "$defs": {"contact": {"type": "object", "properties": {"phone_number": {"type": "string"}}, "additionalProperties": false}}
}`

func TestRenameAndCoerce(t *testing.T) {
	triage, err := Compile("triage", []byte(triageSchema), WithSynonyms(map[string][]string{"department": {"категория", "Categoria", "dept"}}))
	if err != nil {
		t.Fatal(err)
	}
	lead, err := Compile("lead", []byte(leadSchema), WithSynonyms(map[string][]string{"wants_demo": {"демо"}}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		c     *Contract
		text  string
		want  string
		steps Steps
		stage string
	}{
		{"synonym in Cyrillic, other case", triage, `{"Категория":"billing","is_urgent":0.1,"urgency_score":1}`,
			`{"department":"billing","is_urgent":0.1,"urgency_score":1}`, StepRename, ""},
		{"synonym with an accent the config lacks", triage, `{"categoría":"sales","is_urgent":0.1,"urgency_score":1}`,
			`{"department":"sales","is_urgent":0.1,"urgency_score":1}`, StepRename, ""},
		{"camelCase, hyphen and upper case", triage, `{"department":"other","isUrgent":0.1,"URGENCY-SCORE":1}`,
			`{"department":"other","is_urgent":0.1,"urgency_score":1}`, StepRename, ""},
		{"number in a string, decimal comma", triage, `{"department":"other","is_urgent":"0,8","urgency_score":" 2 "}`,
			`{"department":"other","is_urgent":0.8,"urgency_score":2}`, StepCoerce, ""},
		{"enum in another case", triage, `{"department":"Technical","is_urgent":1,"urgency_score":3}`,
			`{"department":"technical","is_urgent":1,"urgency_score":3}`, StepCoerce, ""},
		{"null word where the enum admits null", triage, `{"department":"None","is_urgent":0,"urgency_score":0}`,
			`{"department":null,"is_urgent":0,"urgency_score":0}`, StepCoerce, ""},
		{"a yes word is no number", triage, `{"department":"other","is_urgent":"yes","urgency_score":1}`, "", 0, "schema"},
		{"thousands separator is not a decimal comma", lead, `{"name":"A","wants_demo":true,"budget":"1,000"}`, "", 0, "schema"},
		{"Russian yes for a boolean, nested rename through $ref", lead, `{"name":"Иван","Демо":"да","contact":{"phoneNumber":"+7 900"}}`,
			`{"contact":{"phone_number":"+7 900"},"name":"Иван","wants_demo":true}`, StepRename | StepCoerce, ""},
		{"Portuguese no, integer in a string, number to string", lead, `{"name":"Ana","wants_demo":"não","seats":"12","email":42}`,
			`{"email":"42","name":"Ana","seats":12,"wants_demo":false}`, StepCoerce, ""},
		{"enum items in an array", lead, `{"name":null,"wants_demo":true,"products":["CRM","Helpdesk"]}`,
			`{"name":null,"products":["crm","helpdesk"],"wants_demo":true}`, StepCoerce, ""},
		{"target present: no rename, extra refused", triage, `{"department":"billing","категория":"sales","is_urgent":1,"urgency_score":1}`, "", 0, "schema"},
		{"two keys for one property: neither renamed", triage, `{"dept":"billing","категория":"sales","is_urgent":1,"urgency_score":1}`, "", 0, "schema"},
		{"extra field never dropped", triage, `{"department":"billing","is_urgent":"1","urgency_score":1,"reason":"x"}`, "", StepCoerce, "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.c.Normalize(tt.text)
			if out.Steps != tt.steps {
				t.Errorf("steps %s, want %s", out.Steps, tt.steps)
			}
			if tt.stage != "" {
				if out.Err == nil || out.Err.Stage != tt.stage {
					t.Fatalf("outcome %s %v, want a rejection at %s", out.Value, out.Err, tt.stage)
				}
				return
			}
			if out.Err != nil {
				t.Fatal(out.Err)
			}
			if string(out.Value) != tt.want {
				t.Fatalf("value %s, want %s", out.Value, tt.want)
			}
		})
	}
}

func TestValidAnswerComesOutUnchanged(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	// Spacing and key order of a valid answer are kept: its bytes are the value.
	text := "{\n  \"urgency_score\" : 2.50,\n  \"department\": \"sales\",\n  \"is_urgent\": 1e-1\n}"
	out := c.Normalize("  " + text + "\n")
	if out.Err != nil || string(out.Value) != text || out.Steps != 0 {
		t.Fatalf("outcome %q %s %v", out.Value, out.Steps, out.Err)
	}
}

func TestJSONInsideAJSONString(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	out := c.Normalize(`"{\"department\":\"sales\",\"is_urgent\":0,\"urgency_score\":0}"`)
	if out.Err != nil || string(out.Value) != `{"department":"sales","is_urgent":0,"urgency_score":0}` || out.Steps != StepLocate {
		t.Fatalf("outcome %s %s %v", out.Value, out.Steps, out.Err)
	}
}

func TestCompileRefusesSynonymsOfUnknownProperties(t *testing.T) {
	_, err := Compile("triage", []byte(triageSchema), WithSynonyms(map[string][]string{"departament": {"категория"}}))
	if err == nil || !strings.Contains(err.Error(), `"departament"`) {
		t.Fatalf("err %v", err)
	}
}

func TestAmbiguousFoldsAreNotRenamed(t *testing.T) {
	// Two properties fold alike: a variant of either is left for the validator.
	c, err := Compile("x", []byte(`{"type":"object","properties":{"is_urgent":{"type":"number"},"isUrgent":{"type":"number"}},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	out := c.Normalize(`{"IS-URGENT": 1}`)
	if out.Err == nil || out.Steps&StepRename != 0 {
		t.Fatalf("outcome %s %s %v", out.Value, out.Steps, out.Err)
	}
}

func TestStepsNames(t *testing.T) {
	tests := []struct {
		s    Steps
		want string
	}{
		{0, "none"},
		{StepLocate, "locate"},
		{StepLocate | StepRepair | StepRename | StepCoerce, "locate+repair+rename+coerce"},
		{StepRename | StepCoerce, "rename+coerce"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", tt.s, got, tt.want)
		}
		back, err := ParseSteps(strings.ReplaceAll(tt.want, "+", " "))
		if err != nil || back != tt.s {
			t.Errorf("ParseSteps(%q) = %v, %v", tt.want, back, err)
		}
	}
	if _, err := ParseSteps("locate fix"); err == nil {
		t.Error("an unknown step parsed")
	}
}

func TestReaskText(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	_, verr := c.Check(`{"department":"technical","is_urgent":3,"urgency_score":1,"note":"x"}`)
	text := ReaskText(verr, c.Schema())
	for _, want := range []string{"/is_urgent", "maximum", "'note' not allowed", `"urgency_score"`, "exactly one JSON object"} {
		if !strings.Contains(text, want) {
			t.Errorf("re-ask text lacks %q:\n%s", want, text)
		}
	}
	data := ReaskData(verr, c.Schema(), "prev")
	if data["stage"] != "schema" || data["answer"] != "prev" || len(data["errors"].([]string)) != 2 || data["schema"] != string(c.Schema()) {
		t.Fatalf("data %v", data)
	}
	if len(data) != len(ReaskFields()) {
		t.Fatalf("data has %d fields, ReaskFields %d", len(data), len(ReaskFields()))
	}
}

func TestCheckToolCalls(t *testing.T) {
	order, err := CompileTool(afloat.Tool{Name: "get_order", Parameters: json.RawMessage(
		`{"type":"object","properties":{"order_id":{"type":"string"},"include_items":{"type":"boolean"}},"required":["order_id"],"additionalProperties":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	free, err := CompileTool(afloat.Tool{Name: "now"})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*Contract{"get_order": order, "now": free}
	tests := []struct {
		name    string
		calls   []afloat.ToolCall
		want    []string // arguments after normalization
		steps   Steps
		stage   string
		details []string
	}{
		{"valid", []afloat.ToolCall{{ID: "c1", Name: "get_order", Arguments: json.RawMessage(`{"order_id":"A-1"}`)}, {ID: "c2", Name: "now", Arguments: json.RawMessage(`{}`)}},
			[]string{`{"order_id":"A-1"}`, `{}`}, 0, "", nil},
		{"repaired, renamed and coerced", []afloat.ToolCall{{ID: "c1", Name: "get_order", Arguments: json.RawMessage(`{orderId: 'A-1', "include_items": "sim",}`)}},
			[]string{`{"include_items":true,"order_id":"A-1"}`}, StepRepair | StepRename | StepCoerce, "", nil},
		{"missing argument", []afloat.ToolCall{{ID: "c1", Name: "get_order", Arguments: json.RawMessage(`{"id":"A-1"}`)}},
			nil, 0, "schema", []string{`tool call "get_order" (c1): at /: missing property 'order_id'`, `tool call "get_order" (c1): at /: additional properties 'id' not allowed`}},
		{"unknown tool", []afloat.ToolCall{{ID: "c9", Name: "delete_all", Arguments: json.RawMessage(`{}`)}},
			nil, 0, "schema", []string{`tool call "delete_all" (c9): there is no tool "delete_all"`}},
		{"second call broken", []afloat.ToolCall{{ID: "c1", Name: "now", Arguments: json.RawMessage(`{}`)}, {ID: "c2", Name: "get_order", Arguments: json.RawMessage(`not json`)}},
			nil, 0, "extract", []string{`tool call "get_order" (c2): the answer holds no JSON object or array`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chk := CheckToolCalls(tt.calls, tools)
			if chk.Steps != tt.steps {
				t.Errorf("steps %s, want %s", chk.Steps, tt.steps)
			}
			if tt.stage != "" {
				if chk.Err == nil || chk.Err.Stage != tt.stage || chk.Calls != nil {
					t.Fatalf("check %+v, want a rejection at %s", chk, tt.stage)
				}
				if strings.Join(chk.Err.Details, "\n") != strings.Join(tt.details, "\n") {
					t.Fatalf("details %q, want %q", chk.Err.Details, tt.details)
				}
				n := 0
				for _, e := range chk.Errs {
					if e != nil {
						n++
					}
				}
				if len(chk.Errs) != len(tt.calls) || n != 1 {
					t.Fatalf("per-call errors %v", chk.Errs)
				}
				return
			}
			if chk.Err != nil {
				t.Fatal(chk.Err)
			}
			for i, c := range chk.Calls {
				if string(c.Arguments) != tt.want[i] || c.ID != tt.calls[i].ID {
					t.Fatalf("call %d: %s %s, want %s", i, c.ID, c.Arguments, tt.want[i])
				}
			}
		})
	}
	if _, err := CompileTool(afloat.Tool{Name: "bad", Parameters: json.RawMessage(`{"type": 1}`)}); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("a bad parameter schema compiled: %v", err)
	}
}

func TestRepairIsBounded(t *testing.T) {
	c, err := Compile("lead", []byte(leadSchema))
	if err != nil {
		t.Fatal(err)
	}
	long := "{'name': '" + strings.Repeat("a", maxRepair) + "', 'wants_demo': True}"
	out := c.Normalize(long)
	if out.Err == nil || out.Err.Stage != StageRepair || !strings.Contains(out.Err.Details[0], "too long to repair") {
		t.Fatalf("outcome %v", out.Err)
	}
	short := "{'name': '" + strings.Repeat("a", maxRepair/2) + "', 'wants_demo': True}"
	if out := c.Normalize(short); out.Err != nil || out.Steps != StepRepair {
		t.Fatalf("outcome %s %v", out.Steps, out.Err)
	}
}

func TestValidateReturnsANilError(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(json.RawMessage(`{"department":null,"is_urgent":0,"urgency_score":0}`)); err != nil {
		t.Fatalf("a valid document: %#v", err)
	}
	if err := c.Validate(json.RawMessage(`{"department":null}`)); err == nil {
		t.Fatal("an invalid document passed")
	}
}

func TestDetailsSayNullAsJSON(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Check(`{"department":"it","is_urgent":0,"urgency_score":0}`)
	if err == nil || !strings.Contains(err.Error(), "'other', null") || strings.Contains(err.Error(), "<nil>") {
		t.Fatalf("err %v", err)
	}
}
