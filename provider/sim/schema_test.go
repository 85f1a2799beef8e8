package sim_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/provider/sim"
)

const triageSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "department": {"type": ["string", "null"], "enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
  },
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false
}`

var schemas = []struct {
	name   string
	schema string
	// keys, when set, are the top-level keys every answer must have.
	keys []string
}{
	{"triage", triageSchema, []string{"department", "is_urgent", "urgency_score"}},
	{"triage with anyOf", `{
	  "type": "object",
	  "properties": {
	    "department": {"anyOf": [{"enum": ["technical", "billing", "sales", "other"]}, {"type": "null"}]},
	    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
	    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
	  },
	  "required": ["department", "is_urgent", "urgency_score"],
	  "additionalProperties": false
	}`, []string{"department", "is_urgent", "urgency_score"}},
	{"moderation", `{
	  "type": "object",
	  "properties": {
	    "decision": {"enum": ["allow", "review", "block"]},
	    "categories": {"type": "array", "items": {"enum": ["spam", "abuse", "fraud", "adult", "other"]},
	                   "uniqueItems": true, "minItems": 2, "maxItems": 3},
	    "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
	    "reason": {"type": "string", "minLength": 40, "maxLength": 50},
	    "version": {"const": 2}
	  },
	  "required": ["decision", "categories", "confidence", "reason", "version"],
	  "additionalProperties": false
	}`, []string{"decision", "categories", "confidence", "reason", "version"}},
	{"nested arrays and objects", `{
	  "type": "object",
	  "properties": {
	    "customer": {
	      "type": "object",
	      "properties": {"email": {"type": "string", "format": "email"}, "id": {"type": "string", "format": "uuid"},
	                     "since": {"type": "string", "format": "date-time"}, "vip": {"type": "boolean"}},
	      "required": ["email", "id"],
	      "additionalProperties": false
	    },
	    "orders": {
	      "type": "array", "minItems": 3,
	      "items": {
	        "type": "object",
	        "properties": {
	          "quantity": {"type": "integer", "minimum": 10, "maximum": 100, "multipleOf": 5},
	          "price": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 0.6},
	          "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 2},
	          "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": -1}}}
	        },
	        "required": ["quantity", "price", "tags", "matrix"],
	        "additionalProperties": false
	      }
	    },
	    "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "string"}], "items": false, "minItems": 2},
	    "meta": {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2}
	  },
	  "required": ["customer", "orders", "point", "meta"],
	  "additionalProperties": false
	}`, []string{"customer", "orders", "point", "meta"}},
	{"$ref to $defs, recursive", `{
	  "$defs": {
	    "node": {
	      "type": "object",
	      "properties": {"name": {"$ref": "#/$defs/name"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
	      "required": ["name", "children"],
	      "additionalProperties": false
	    },
	    "name": {"type": "string", "minLength": 1, "maxLength": 8}
	  },
	  "$ref": "#/$defs/node"
	}`, []string{"name", "children"}},
	{"$ref to definitions, draft-07", `{
	  "$schema": "http://json-schema.org/draft-07/schema#",
	  "definitions": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "a~b/c": {"type": "boolean"}},
	  "type": "object",
	  "properties": {"score": {"$ref": "#/definitions/score"}, "flag": {"$ref": "#/definitions/a~0b~1c"}},
	  "required": ["score", "flag"],
	  "additionalProperties": false
	}`, []string{"score", "flag"}},
	{"type arrays", `{
	  "type": "object",
	  "properties": {
	    "a": {"type": ["string", "null"], "maxLength": 3},
	    "b": {"type": ["integer", "string"], "minimum": 5, "maximum": 7},
	    "c": {"type": ["null", "boolean"]},
	    "d": {"type": "null"}
	  },
	  "required": ["a", "b", "c", "d"],
	  "additionalProperties": false
	}`, []string{"a", "b", "c", "d"}},
	{"allOf and oneOf", `{
	  "allOf": [
	    {"type": "object", "properties": {"x": {"type": "integer", "minimum": 1}}, "required": ["x"]},
	    {"properties": {"x": {"maximum": 2}, "y": {"oneOf": [{"type": "string", "minLength": 3}, {"type": "integer"}]}}, "required": ["y"]}
	  ]
	}`, []string{"x", "y"}},
	{"draft-04 boolean exclusive bounds", `{
	  "$schema": "http://json-schema.org/draft-04/schema#",
	  "type": "array", "minItems": 4, "uniqueItems": true,
	  "items": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMinimum": true, "exclusiveMaximum": true}
	}`, nil},
}

func compile(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("read schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return s
}

func TestCompleteAnswersValidForSchema(t *testing.T) {
	for _, tc := range schemas {
		t.Run(tc.name, func(t *testing.T) {
			s := compile(t, tc.schema)
			req := &afloat.Request{
				Messages:       []afloat.Message{{Role: afloat.RoleUser, Content: "my card was charged twice"}},
				ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Name: "out", Schema: json.RawMessage(tc.schema)},
			}
			for seed := uint64(1); seed <= 40; seed++ {
				p, err := sim.New(sim.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				for range 5 {
					resp, err := p.Complete(context.Background(), req)
					if err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
					v, err := jsonschema.UnmarshalJSON(strings.NewReader(resp.Content))
					if err != nil {
						t.Fatalf("seed %d: answer is not JSON: %v\n%s", seed, err, resp.Content)
					}
					if err := s.Validate(v); err != nil {
						t.Fatalf("seed %d: answer does not fit the schema: %#v\n%s", seed, err, resp.Content)
					}
					if tc.keys != nil {
						obj, _ := v.(map[string]any)
						for _, k := range tc.keys {
							if _, ok := obj[k]; !ok {
								t.Fatalf("seed %d: answer lacks %q: %s", seed, k, resp.Content)
							}
						}
					}
				}
			}
		})
	}
}

// TestCompleteUsesEveryEnumValue checks that enum choices come from the random source rather
// than always the first value.
func TestCompleteUsesEveryEnumValue(t *testing.T) {
	p, err := sim.New(sim.Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	req := &afloat.Request{ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(triageSchema)}}
	seen := map[string]bool{}
	for range 200 {
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Department *string }
		if err := json.Unmarshal([]byte(resp.Content), &v); err != nil {
			t.Fatal(err)
		}
		d := "null"
		if v.Department != nil {
			d = *v.Department
		}
		seen[d] = true
	}
	for _, want := range []string{"technical", "billing", "sales", "other", "null"} {
		if !seen[want] {
			t.Errorf("department %s never chosen in 200 answers; saw %v", want, seen)
		}
	}
}
