package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// parseSchema reads a schema document, keeping numbers as written.
func parseSchema(doc []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var root any
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	if d.More() {
		return nil, errors.New("read schema: data after the document")
	}
	return root, nil
}

// schemaCacheSize caps the parsed schemas a provider keeps: a cascade asks for a few.
const schemaCacheSize = 64

// schemaCache keeps parsed schema documents by their text, so that a provider called with the
// same schema again does not read it again. It is safe for concurrent use.
type schemaCache struct {
	mu   sync.Mutex
	docs map[string]any
}

func (c *schemaCache) get(doc []byte) (any, error) {
	c.mu.Lock()
	root, ok := c.docs[string(doc)]
	c.mu.Unlock()
	if ok {
		return root, nil
	}
	root, err := parseSchema(doc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.docs) >= schemaCacheSize {
		clear(c.docs) // a caller cycling through many schemas: start over rather than grow
	}
	if c.docs == nil {
		c.docs = make(map[string]any)
	}
	c.docs[string(doc)] = root
	c.mu.Unlock()
	return root, nil
}

// flatten resolves s's $ref and merges its allOf and its first anyOf and oneOf branch into
// one schema object. It returns nil for the false schema and an empty map for true.
func (g *generator) flatten(s any, depth int) map[string]any {
	switch s := s.(type) {
	case bool:
		if !s {
			return nil
		}
		return map[string]any{}
	case map[string]any:
		if depth > maxDepth {
			return map[string]any{}
		}
		if !combines(s) {
			return s // nothing to merge; the generator only reads it
		}
		out := make(map[string]any, len(s))
		for k, v := range s {
			switch k {
			case "$ref", "allOf", "anyOf", "oneOf":
			default:
				out[k] = v
			}
		}
		var parts []any
		if ref, ok := s["$ref"].(string); ok {
			parts = append(parts, g.resolve(ref))
		}
		if all, ok := s["allOf"].([]any); ok {
			parts = append(parts, all...)
		}
		for _, k := range []string{"anyOf", "oneOf"} {
			if alts, ok := s[k].([]any); ok && len(alts) > 0 {
				parts = append(parts, alts[0])
			}
		}
		for _, p := range parts {
			sub := g.flatten(p, depth+1)
			if sub == nil {
				return nil
			}
			merge(out, sub)
		}
		return out
	}
	return map[string]any{}
}

func combines(s map[string]any) bool {
	for _, k := range []string{"$ref", "allOf", "anyOf", "oneOf"} {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// resolve follows a reference within the document; any other reference reads as the empty
// schema.
func (g *generator) resolve(ref string) any {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return true
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	cur := g.root
	if frag == "" {
		return cur
	}
	if !strings.HasPrefix(frag, "/") {
		return true // an $anchor: not supported
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur, ok = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			ok = err == nil && i >= 0 && i < len(c)
			if ok {
				cur = c[i]
			}
		default:
			ok = false
		}
		if !ok {
			return true
		}
	}
	return cur
}

// merge adds src's constraints to dst, keeping the tighter of two bounds and both sets of
// properties and required names.
func merge(dst, src map[string]any) {
	for k, v := range src {
		old, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		switch k {
		case "properties":
			a, _ := old.(map[string]any)
			b, _ := v.(map[string]any)
			props := make(map[string]any, len(a)+len(b))
			for name, s := range a {
				props[name] = s
			}
			for name, s := range b {
				if prev, ok := props[name]; ok {
					props[name] = map[string]any{"allOf": []any{prev, s}}
				} else {
					props[name] = s
				}
			}
			dst[k] = props
		case "required":
			a, _ := old.([]any)
			b, _ := v.([]any)
			req := slices.Clone(a)
			for _, name := range b {
				if !slices.Contains(req, name) {
					req = append(req, name)
				}
			}
			dst[k] = req
		case "type":
			if both := intersect(types(old), types(v)); len(both) > 0 {
				dst[k] = both
			}
		case "enum":
			a, _ := old.([]any)
			b, _ := v.([]any)
			var both []any
			for _, x := range a {
				if slices.ContainsFunc(b, func(y any) bool { return jsonEqual(x, y) }) {
					both = append(both, x)
				}
			}
			if len(both) > 0 {
				dst[k] = both
			}
		case "minimum", "minLength", "minItems", "minProperties":
			if num(v) > num(old) {
				dst[k] = v
			}
		case "maximum", "maxLength", "maxItems", "maxProperties":
			if num(v) < num(old) {
				dst[k] = v
			}
		case "exclusiveMinimum":
			if _, isBool := v.(bool); !isBool && num(v) > num(old) {
				dst[k] = v
			}
		case "exclusiveMaximum":
			if _, isBool := v.(bool); !isBool && num(v) < num(old) {
				dst[k] = v
			}
		}
	}
}

func (g *generator) pickType(sch map[string]any, depth int) string {
	ts := types(sch["type"])
	if len(ts) == 0 {
		return inferType(sch)
	}
	if len(ts) == 1 {
		return ts[0]
	}
	if depth >= shallowDepth && slices.Contains(ts, "null") {
		return "null"
	}
	for _, t := range ts {
		if t != "null" {
			return t
		}
	}
	return ts[0]
}

func types(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, t := range v {
			if s, ok := t.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case []string:
		return v
	}
	return nil
}

func intersect(a, b []string) []string {
	var out []string
	for _, t := range a {
		switch {
		case slices.Contains(b, t):
			out = append(out, t)
		case t == "number" && slices.Contains(b, "integer"), t == "integer" && slices.Contains(b, "number"):
			out = append(out, "integer")
		}
	}
	return out
}

// inferType guesses the type of a schema that names none from the keywords it uses.
func inferType(sch map[string]any) string {
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := sch[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties", "patternProperties", "minProperties"):
		return "object"
	case has("items", "prefixItems", "minItems", "maxItems", "uniqueItems"):
		return "array"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return "string"
}

// num reads a JSON number decoded with UseNumber; anything else reads as 0.
func num(v any) float64 {
	switch v := v.(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case float64:
		return v
	}
	return 0
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
