package normalize

import (
	"errors"
	"fmt"
	"strings"

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
	// MaxClientRecursion bounds the $ref that name a subschema enclosing them (each must
	// also reach a part of the value no other one reaches: see expansion).
	MaxClientRecursion = 16
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
// subschema it names, as validation walks them, and checks the $ref that name a subschema
// enclosing them (which it does not follow): each one validates some part of the value
// against that subschema again. Two of them that reach the same part of the value (two
// branches of an anyOf that both descend into the items) double the work at every level of
// the answer, so they are refused; two that reach different parts (a tree's "left" and
// "right") only walk the answer once. It stops at the first limit exceeded, so its own work
// is bounded by MaxClientSubschemas.
type expansion struct {
	nodes int
	stack []frame                    // the schemas being walked, outermost first
	path  map[*jsonschema.Schema]int // a schema being walked → its index in stack
	refs  int
}

// frame is a schema being walked and the part of the value the edge into it leads to: ""
// for the same value (allOf, anyOf, $ref, …), else the member or item it descends into.
type frame struct {
	s    *jsonschema.Schema
	step string
	// branches are the parts of the value that the recursive $ref back to this frame, as
	// walked from here, descend through: a frame of its own each time s is walked, since
	// two walks of one subschema validate different parts of the value.
	branches [][]string
}

func newExpansion() *expansion {
	return &expansion{path: map[*jsonschema.Schema]int{}}
}

func (x *expansion) walk(s *jsonschema.Schema, step string) error {
	if s == nil {
		return nil
	}
	if at, ok := x.path[s]; ok {
		return x.recursion(at, step)
	}
	if x.nodes++; x.nodes > MaxClientSubschemas {
		return &LimitError{Limit: "subschemas", Max: MaxClientSubschemas,
			Msg: fmt.Sprintf("schema expands through $ref to over %d subschemas", MaxClientSubschemas)}
	}
	x.path[s] = len(x.stack)
	x.stack = append(x.stack, frame{s: s, step: step})
	defer func() {
		delete(x.path, s)
		x.stack = x.stack[:len(x.stack)-1]
	}()
	for _, c := range children(s) {
		if err := x.walk(c.s, c.step); err != nil {
			return err
		}
	}
	return nil
}

// recursion checks a $ref back to the enclosing schema (at index at of the stack),
// reached by the last edge step: the parts of the value it descends through must differ from
// those of every other recursive $ref to target.
func (x *expansion) recursion(at int, step string) error {
	var branch []string
	for _, f := range x.stack[at+1:] {
		if f.step != "" {
			branch = append(branch, f.step)
		}
	}
	if step != "" {
		branch = append(branch, step)
	}
	refused := func(msg string) error {
		return &LimitError{Limit: "recursion", Max: MaxClientRecursion, Msg: msg}
	}
	if x.refs++; x.refs > MaxClientRecursion {
		return refused(fmt.Sprintf("schema has over %d recursive $ref", MaxClientRecursion))
	}
	f := &x.stack[at]
	for _, other := range f.branches {
		if overlap(branch, other) {
			return refused("two recursive $ref validate the same part of the value against one schema: the work would double at every level of the answer")
		}
	}
	f.branches = append(f.branches, branch)
	return nil
}

// overlap reports whether two branches may reach the same part of a value: the same length,
// and at each step the same member or item, or a step that may stand for any (a wildcard:
// patternProperties, additionalProperties, items, contains, …).
func overlap(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !wildcard(a[i], b[i]) {
			return false
		}
	}
	return true
}

// wildcard reports whether one of two steps into the same kind of container may stand for
// the other: a named member and any member ("p:x" and "p*"), or two item steps ("i*").
func wildcard(a, b string) bool {
	member := func(s string) bool { return strings.HasPrefix(s, "p:") || s == "p*" }
	return (a == "p*" || b == "p*") && member(a) && member(b) || a == "i*" && b == "i*"
}

// edge is a subschema validation may apply from a schema, with the part of the value it
// applies to (see frame).
type edge struct {
	s    *jsonschema.Schema
	step string
}

// children lists the subschemas validation may apply from s, $ref targets included, each
// with the part of the value it applies to: "" the same value, "p:NAME" a named member, "p*"
// any member, "i*" any item (item steps are all taken as wildcards: items, prefixItems and
// contains may apply to one element together).
func children(s *jsonschema.Schema) []edge {
	var out []edge
	add := func(step string, cs ...*jsonschema.Schema) {
		for _, c := range cs {
			if c != nil {
				out = append(out, edge{c, step})
			}
		}
	}
	add("", s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else)
	if s.DynamicRef != nil {
		add("", s.DynamicRef.Ref)
	}
	add("", s.AllOf...)
	add("", s.AnyOf...)
	add("", s.OneOf...)
	for _, c := range s.DependentSchemas {
		add("", c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			add("", c)
		}
	}
	add("p*", s.PropertyNames, s.UnevaluatedProperties)
	for name, c := range s.Properties {
		add("p:"+name, c)
	}
	for _, c := range s.PatternProperties {
		add("p*", c)
	}
	add("i*", s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema)
	add("i*", s.PrefixItems...)
	for _, v := range []struct {
		step string
		v    any
	}{{"p*", s.AdditionalProperties}, {"i*", s.AdditionalItems}, {"i*", s.Items}} {
		switch c := v.v.(type) {
		case *jsonschema.Schema:
			add(v.step, c)
		case []*jsonschema.Schema:
			add(v.step, c...)
		}
	}
	return out
}
