package gateway

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// The resolve form of a review item, generated from its task's JSON Schema: one field per
// property of a flat object schema (string, number, integer, boolean or enum values, each
// maybe nullable); any other schema gets one JSON text area for the whole answer.

// formField is one field of a resolve form.
type formField struct {
	Name        string
	Kind        string // "string", "number", "integer", "boolean", "enum"
	Description string
	Required    bool
	Nullable    bool
	Options     []formOption // an enum's values, each as JSON
	Value       string       // what the operator typed, to show again after an error
	Error       string
}

type formOption struct{ Value, Label string }

// jsonField is the one field of a resolve form for a schema that is not flat.
const jsonField = "result_json"

// schemaForm returns the fields of schema's form, or ok false when the schema is not a flat
// object of scalar properties.
func schemaForm(schema json.RawMessage) (fields []formField, ok bool) {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || s.Type != "object" || len(s.Properties) == 0 {
		return nil, false
	}
	for _, name := range orderedKeys(schema, "properties") {
		var p struct {
			Type        any               `json:"type"`
			Enum        []json.RawMessage `json:"enum"`
			Description string            `json:"description"`
		}
		if json.Unmarshal(s.Properties[name], &p) != nil {
			return nil, false
		}
		f := formField{Name: name, Description: p.Description}
		for _, r := range s.Required {
			f.Required = f.Required || r == name
		}
		var types []string
		switch t := p.Type.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				if xs, ok := x.(string); ok {
					types = append(types, xs)
				}
			}
		}
		var kinds []string
		for _, t := range types {
			if t == "null" {
				f.Nullable = true
			} else {
				kinds = append(kinds, t)
			}
		}
		switch {
		case len(p.Enum) > 0:
			f.Kind = "enum"
			for _, v := range p.Enum {
				v = bytes.TrimSpace(v)
				switch v[0] {
				case '{', '[':
					return nil, false
				}
				label := string(v)
				if uq, err := strconv.Unquote(label); err == nil && v[0] == '"' {
					label = uq
				}
				if label == "null" {
					label = "(none)"
				}
				f.Options = append(f.Options, formOption{Value: string(v), Label: label})
			}
		case len(kinds) == 1 && (kinds[0] == "string" || kinds[0] == "number" || kinds[0] == "integer" || kinds[0] == "boolean"):
			f.Kind = kinds[0]
		default:
			return nil, false
		}
		fields = append(fields, f)
	}
	return fields, true
}

// orderedKeys returns the keys of doc's object under key in the order they are written, so
// that the form follows the schema.
func orderedKeys(doc json.RawMessage, key string) []string {
	var top map[string]json.RawMessage
	if json.Unmarshal(doc, &top) != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(top[key]))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

// formResult builds the answer from the posted form, marking the fields whose values are
// not of their type; ok is false when one is.
func formResult(fields []formField, value func(string) string) (json.RawMessage, bool) {
	out := map[string]json.RawMessage{}
	good := true
	for i := range fields {
		f := &fields[i]
		v := value(f.Name)
		f.Value = v
		if f.Kind != "string" {
			v = strings.TrimSpace(v)
		}
		if v == "" && f.Kind != "string" {
			if f.Nullable {
				out[f.Name] = json.RawMessage("null")
			}
			continue // a required field left empty: the schema says so, at the field
		}
		switch f.Kind {
		case "enum":
			found := false
			for _, o := range f.Options {
				found = found || o.Value == v
			}
			if !found {
				f.Error, good = "choose one of the values offered", false
				continue
			}
			out[f.Name] = json.RawMessage(v)
		case "string":
			if v == "" && !f.Required {
				if f.Nullable {
					out[f.Name] = json.RawMessage("null")
				}
				continue
			}
			b, _ := json.Marshal(v)
			out[f.Name] = b
		case "number":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				f.Error, good = "must be a number", false
				continue
			}
			out[f.Name] = json.RawMessage(strconv.FormatFloat(n, 'g', -1, 64))
		case "integer":
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				f.Error, good = "must be a whole number", false
				continue
			}
			out[f.Name] = json.RawMessage(v)
		case "boolean":
			if v != "true" && v != "false" {
				f.Error, good = "must be true or false", false
				continue
			}
			out[f.Name] = json.RawMessage(v)
		}
	}
	b, _ := json.Marshal(out)
	return b, good
}

// detailLine is one line of a schema validation error: "at /is_urgent: must be <= 1".
var detailLine = regexp.MustCompile(`^at (/[^:]*): (.*)$`)

var quotedName = regexp.MustCompile(`'([^']*)'`)

// fieldErrors maps the API's validation details to the fields they name; the lines that name
// no field of the form are returned apart.
func fieldErrors(fields []formField, details []string) (rest []string) {
	index := map[string]int{}
	for i, f := range fields {
		index[f.Name] = i
	}
	add := func(name, msg string) bool {
		i, ok := index[name]
		if !ok {
			return false
		}
		if fields[i].Error != "" {
			fields[i].Error += "; "
		}
		fields[i].Error += msg
		return true
	}
	for _, d := range details {
		m := detailLine.FindStringSubmatch(d)
		if m == nil {
			rest = append(rest, d)
			continue
		}
		path, msg := m[1], m[2]
		if path != "/" {
			seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
			seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
			if !add(seg, msg) {
				rest = append(rest, d)
			}
			continue
		}
		if strings.HasPrefix(msg, "missing propert") {
			placed := false
			for _, q := range quotedName.FindAllStringSubmatch(msg, -1) {
				placed = add(q[1], "required") || placed
			}
			if placed {
				continue
			}
		}
		rest = append(rest, d)
	}
	return rest
}
