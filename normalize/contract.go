package normalize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Contract is a task's output schema, compiled. It is immutable and safe for concurrent use.
type Contract struct {
	name   string
	raw    json.RawMessage
	schema *jsonschema.Schema
}

var printer = message.NewPrinter(language.English)

// Compile compiles a JSON Schema (draft 2020-12 unless it says otherwise). name appears in
// errors.
func Compile(name string, schema []byte) (*Contract, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// No loader: a $ref to a URL (file://, https://) is an error, never a read. Schemas may
	// come from clients (a chat request's response_format).
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "afloat:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return &Contract{name: name, raw: slices.Clip(json.RawMessage(schema)), schema: sch}, nil
}

// Schema returns the schema's source.
func (c *Contract) Schema() json.RawMessage { return c.raw }

// Check locates the JSON value in text and validates it. It returns the value as it stands in
// the text (valid JSON, whitespace kept),
// or an *afloat.ContractError with stage "extract" (no JSON value in the text), "repair" (a
// value that does not parse) or "schema" (valid JSON that does not fit).
func (c *Contract) Check(text string) (json.RawMessage, error) {
	span, ok := Locate(text)
	if !ok {
		return nil, &afloat.ContractError{Stage: "extract", Details: []string{"the answer holds no JSON object or array"}}
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(span))
	if err != nil {
		return nil, &afloat.ContractError{Stage: "repair", Details: []string{"the JSON does not parse: " + err.Error()}, Err: err}
	}
	if err := c.validate(v); err != nil {
		return nil, err
	}
	return json.RawMessage(span), nil
}

// Validate checks an already decoded JSON document (as encoding/json decodes into any, or a
// value of the caller's type marshalled first) against the schema.
func (c *Contract) Validate(doc json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &afloat.ContractError{Stage: "repair", Details: []string{err.Error()}, Err: err}
	}
	return c.validate(v)
}

func (c *Contract) validate(v any) error {
	err := c.schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &afloat.ContractError{Stage: "schema", Details: []string{err.Error()}, Err: err}
	}
	return &afloat.ContractError{Stage: "schema", Details: Details(ve), Err: err}
}

// Details flattens a validation error into readable lines, one per failing leaf:
// `at /is_urgent: maximum: got 3, want 1`.
func Details(ve *jsonschema.ValidationError) []string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			out = append(out, "at "+loc+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// Locate finds the JSON value in a model's text: the body of the first Markdown code fence
// that starts with { or [, else the span from the first { or [ to its matching closer
// (string- and escape-aware), or to the end of the text when it never closes.
func Locate(text string) (string, bool) {
	text = strings.TrimPrefix(text, "\ufeff")
	if body, ok := fenced(text); ok {
		text = body
	}
	start := strings.IndexAny(text, "{[")
	if start < 0 {
		return "", false
	}
	depth, inStr, esc := 0, false, false
	for i := start; i < len(text); i++ {
		ch := text[i]
		switch {
		case inStr && esc:
			esc = false
		case inStr && ch == '\\':
			esc = true
		case inStr && ch == '"':
			inStr = false
		case inStr:
		case ch == '"':
			inStr = true
		case ch == '{' || ch == '[':
			depth++
		case ch == '}' || ch == ']':
			depth--
			if depth == 0 {
				return text[start : i+1], true
			}
		}
	}
	return text[start:], true
}

// fenced returns the body of the first ``` fence whose body starts with { or [.
func fenced(text string) (string, bool) {
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			return "", false
		}
		rest = rest[i+3:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return "", false
		}
		body := rest[nl+1:]
		end := strings.Index(body, "```")
		if end >= 0 {
			body = body[:end]
		}
		trimmed := strings.TrimSpace(body)
		if strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
			return trimmed, true
		}
		if end < 0 {
			return "", false
		}
		rest = rest[nl+1+end+3:]
	}
}
