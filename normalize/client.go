package normalize

import (
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The limits of a schema that comes from a client (FromClient). The schema library has no
// budget of its own: it walks every branch of an anyOf and keeps each failing branch's
// errors, so a schema whose subschemas share one another through $ref validates in time and
// memory exponential in its depth. These bounds keep the work of one validation under
// MaxClientSubschemas times the number of values in the answer: without recursion every
// subschema, each $ref counted as the subschema it names, applies to each value at most
// once, and one recursive $ref adds a subschema again only one level deeper in the answer.
const (
	// MaxClientSize bounds a client schema's bytes.
	MaxClientSize = 64 << 10
	// MaxClientNesting bounds how deep a client schema's JSON nests (objects and arrays),
	// before it is decoded: compiling a schema takes time that grows faster than its depth.
	// A subschema takes two levels of JSON (a keyword's object or array, then itself).
	MaxClientNesting = 2*MaxClientDepth + 8
	// MaxClientDepth bounds how deep subschemas nest in a client schema.
	MaxClientDepth = 32
	// MaxClientSubschemas bounds a client schema's subschemas, both as written and with
	// every $ref replaced by the subschema it names.
	MaxClientSubschemas = 1000
	// MaxClientRefs bounds the $ref keywords of a client schema.
	MaxClientRefs = 64
	// MaxClientRecursion bounds the $ref that name a subschema enclosing them: two of them
	// could both apply to each level of the answer, doubling the work at every level.
	MaxClientRecursion = 1
)

// ErrClientSchema is the error, wrapped by *LimitError, of a client schema over a limit.
var ErrClientSchema = errors.New("schema over a limit")

// LimitError says which limit of a client schema (FromClient) a schema exceeds.
type LimitError struct {
	Limit string // what is bounded: "size", "nesting", "depth", "subschemas", "refs", ...
	Max   int    // the bound
	Msg   string // the problem, in words
}

func (e *LimitError) Error() string { return e.Msg }

// Unwrap returns ErrClientSchema.
func (e *LimitError) Unwrap() error { return ErrClientSchema }

// FromClient marks the schema as a client's (a chat request's response_format, a tool's
// parameters): one over the MaxClient limits, or with a $dynamicRef or $recursiveRef
// (whose targets depend on the answer), is an error of Compile, given as a *LimitError. The
// raw schema is checked before anything is compiled. Schemas an operator wrote need not be
// limited.
func FromClient() Option {
	return func(o *options) { o.client = true }
}

// checkNesting refuses a schema whose JSON nests deeper than MaxClientNesting, before it is
// decoded.
func checkNesting(b []byte) error {
	if len(b) > MaxClientSize {
		return &LimitError{Limit: "size", Max: MaxClientSize, Msg: fmt.Sprintf("schema over %d bytes", MaxClientSize)}
	}
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxClientNesting {
				return &LimitError{Limit: "nesting", Max: MaxClientNesting,
					Msg: fmt.Sprintf("schema nests deeper than %d levels of JSON", MaxClientNesting)}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// rawWalk counts the subschemas and $ref of a decoded schema as written.
type rawWalk struct {
	nodes, refs int
}

// Keywords whose value is a subschema, an array of them, or an object of them.
var (
	oneSchema = map[string]bool{"additionalProperties": true, "additionalItems": true, "unevaluatedProperties": true,
		"unevaluatedItems": true, "contains": true, "propertyNames": true, "not": true, "if": true, "then": true,
		"else": true, "contentSchema": true, "items": true}
	schemaList = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true, "items": true}
	schemaMap  = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true, "dependencies": true}
)

func (w *rawWalk) schema(v any, depth int) error {
	obj, ok := v.(map[string]any)
	if !ok {
		if _, ok := v.(bool); ok {
			return w.count()
		}
		return nil // not a schema: the compiler says so
	}
	if depth > MaxClientDepth {
		return &LimitError{Limit: "depth", Max: MaxClientDepth, Msg: fmt.Sprintf("schema nests subschemas deeper than %d", MaxClientDepth)}
	}
	if err := w.count(); err != nil {
		return err
	}
	for key, val := range obj {
		var err error
		switch {
		case key == "$ref":
			if w.refs++; w.refs > MaxClientRefs {
				return &LimitError{Limit: "refs", Max: MaxClientRefs, Msg: fmt.Sprintf("schema has over %d $ref", MaxClientRefs)}
			}
		case key == "$dynamicRef" || key == "$recursiveRef":
			return &LimitError{Limit: key, Msg: "schema has a " + key + ", which a client schema may not use"}
		case schemaList[key]:
			if list, ok := val.([]any); ok {
				for _, s := range list {
					if err = w.schema(s, depth+1); err != nil {
						break
					}
				}
			} else if oneSchema[key] {
				err = w.schema(val, depth+1)
			}
		case oneSchema[key]:
			err = w.schema(val, depth+1)
		case schemaMap[key]:
			if m, ok := val.(map[string]any); ok {
				for _, s := range m {
					if err = w.schema(s, depth+1); err != nil {
						break
					}
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *rawWalk) count() error {
	if w.nodes++; w.nodes > MaxClientSubschemas {
		return &LimitError{Limit: "subschemas", Max: MaxClientSubschemas,
			Msg: fmt.Sprintf("schema has over %d subschemas", MaxClientSubschemas)}
	}
	return nil
}

// expansion counts the subschemas of a compiled schema with each $ref replaced by the
// subschema it names, as validation walks them, and the $ref that name a subschema enclosing
// them (which it does not follow). It stops at the first limit exceeded, so its own work is
// bounded by MaxClientSubschemas.
type expansion struct {
	nodes, recursive int
	path             map[*jsonschema.Schema]bool
}

func (x *expansion) walk(s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	if x.path[s] {
		if x.recursive++; x.recursive > MaxClientRecursion {
			return &LimitError{Limit: "recursion", Max: MaxClientRecursion,
				Msg: fmt.Sprintf("schema has over %d recursive $ref", MaxClientRecursion)}
		}
		return nil
	}
	if x.nodes++; x.nodes > MaxClientSubschemas {
		return &LimitError{Limit: "subschemas", Max: MaxClientSubschemas,
			Msg: fmt.Sprintf("schema expands through $ref to over %d subschemas", MaxClientSubschemas)}
	}
	x.path[s] = true
	defer delete(x.path, s)
	for _, c := range children(s) {
		if err := x.walk(c); err != nil {
			return err
		}
	}
	return nil
}

// children lists the subschemas validation may apply from s, $ref targets included.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	out = append(out, s.PrefixItems...)
	for _, c := range s.Properties {
		out = append(out, c)
	}
	for _, c := range s.PatternProperties {
		out = append(out, c)
	}
	for _, c := range s.DependentSchemas {
		out = append(out, c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			out = append(out, c)
		}
	}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return out
}
