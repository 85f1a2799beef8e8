package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Generation limits. Past shallowDepth an object gets only its required properties, an array
// only its minItems and a nullable value is null, so recursive schemas end; past maxDepth the
// value is null whatever the schema says.
const (
	shallowDepth = 8
	maxDepth     = 32
)

// generate returns a JSON value valid for the JSON Schema doc, choosing with r.
//
// It reads: $ref to a JSON pointer in the same document ($defs, definitions, "#"), allOf
// (merged), anyOf and oneOf (the first branch), const, enum, type (one or a list), properties
// and required, additionalProperties and minProperties, items, prefixItems, minItems,
// maxItems and uniqueItems, minLength and maxLength, a few formats, minimum, maximum, the
// exclusive bounds (2020-12 numbers or draft-4 booleans) and multipleOf. It ignores pattern,
// not, if/then/else, contains and references to other documents, so a schema that leans on
// them may get a value that does not fit.
//
// root is a schema document read by parseSchema; generate does not change it.
func generate(root any, r *rand.Rand) (json.RawMessage, error) {
	g := generator{root: root, r: r}
	return json.Marshal(g.value(root, 0))
}

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

type generator struct {
	root any
	r    *rand.Rand
}

func (g *generator) value(s any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	sch := g.flatten(s, depth)
	if sch == nil { // the false schema: nothing fits
		return nil
	}
	if c, ok := sch["const"]; ok {
		return c
	}
	if e, ok := sch["enum"].([]any); ok && len(e) > 0 {
		return e[g.r.IntN(len(e))]
	}
	switch g.pickType(sch, depth) {
	case "null":
		return nil
	case "boolean":
		return g.r.IntN(2) == 0
	case "integer":
		return g.integer(sch)
	case "number":
		return g.number(sch)
	case "array":
		return g.array(sch, depth)
	case "object":
		return g.object(sch, depth)
	}
	return g.str(sch)
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

// bounds returns the schema's numeric range and whether each end is open. A draft-4 boolean
// exclusiveMinimum or exclusiveMaximum makes minimum or maximum open.
func bounds(sch map[string]any) (lo, hi float64, hasLo, hasHi, openLo, openHi bool) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if v, ok := sch["minimum"]; ok {
		lo, hasLo = num(v), true
		openLo = sch["exclusiveMinimum"] == true
	}
	if v, ok := sch["maximum"]; ok {
		hi, hasHi = num(v), true
		openHi = sch["exclusiveMaximum"] == true
	}
	if v, ok := sch["exclusiveMinimum"]; ok {
		if _, isBool := v.(bool); !isBool && (!hasLo || num(v) >= lo) {
			lo, hasLo, openLo = num(v), true, true
		}
	}
	if v, ok := sch["exclusiveMaximum"]; ok {
		if _, isBool := v.(bool); !isBool && (!hasHi || num(v) <= hi) {
			hi, hasHi, openHi = num(v), true, true
		}
	}
	return lo, hi, hasLo, hasHi, openLo, openHi
}

// unboundedSpan is how far a value may stray from its one bound, or from 0 with none.
const unboundedSpan = 100

func span(lo, hi float64, hasLo, hasHi bool) (float64, float64) {
	switch {
	case !hasLo && !hasHi:
		return 0, unboundedSpan
	case !hasLo:
		return hi - unboundedSpan, hi
	case !hasHi:
		return lo, lo + unboundedSpan
	}
	return lo, hi
}

func (g *generator) integer(sch map[string]any) any {
	lo, hi, hasLo, hasHi, openLo, openHi := bounds(sch)
	flo, fhi := span(lo, hi, hasLo, hasHi)
	a, b := math.Ceil(flo), math.Floor(fhi)
	if openLo && a == flo {
		a++
	}
	if openHi && b == fhi {
		b--
	}
	step := 1.0
	if m := num(sch["multipleOf"]); m > 0 && m == math.Trunc(m) {
		step = m
		a, b = math.Ceil(a/m)*m, math.Floor(b/m)*m
	}
	if b < a { // no integer fits
		return int64(a)
	}
	n := int64((b-a)/step) + 1
	return int64(a) + g.r.Int64N(n)*int64(step)
}

func (g *generator) number(sch map[string]any) any {
	lo, hi, hasLo, hasHi, openLo, openHi := bounds(sch)
	a, b := span(lo, hi, hasLo, hasHi)
	if m := num(sch["multipleOf"]); m > 0 {
		ka, kb := math.Ceil(a/m), math.Floor(b/m)
		if openLo && ka*m <= a {
			ka++
		}
		if openHi && kb*m >= b {
			kb--
		}
		if kb < ka {
			return ka * m
		}
		return (ka + float64(g.r.Int64N(int64(kb-ka)+1))) * m
	}
	fits := func(x float64) bool {
		return (x > a || !openLo && x == a) && (x < b || !openHi && x == b)
	}
	x := a + g.r.Float64()*(b-a)
	if r := math.Round(x*100) / 100; fits(r) { // two decimals read like a model's answer
		return r
	}
	if fits(x) {
		return x
	}
	return a + (b-a)/2
}

var words = []string{
	"simulated", "answer", "ticket", "customer", "request", "account", "payment",
	"update", "status", "service", "order", "issue", "resolved", "pending", "review",
}

func (g *generator) str(sch map[string]any) string {
	switch sch["format"] {
	case "date-time":
		return g.instant().Format(time.RFC3339)
	case "date":
		return g.instant().Format(time.DateOnly)
	case "time":
		return g.instant().Format("15:04:05Z")
	case "email":
		return words[g.r.IntN(len(words))] + "@example.com"
	case "uri", "url", "iri":
		return "https://example.com/" + words[g.r.IntN(len(words))]
	case "uuid":
		return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", g.r.Uint32(), g.r.IntN(1<<16), g.r.IntN(1<<12),
			g.r.IntN(1<<12), g.r.Int64N(1<<48))
	case "ipv4":
		return fmt.Sprintf("192.0.2.%d", g.r.IntN(256))
	}
	n := 2 + g.r.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[g.r.IntN(len(words))]
	}
	s := strings.Join(parts, " ")
	minLen, maxLen := int(num(sch["minLength"])), math.MaxInt
	if v, ok := sch["maxLength"]; ok {
		maxLen = int(num(v))
	}
	// Lengths count code points; the words are ASCII, so bytes are code points.
	for len(s) < minLen {
		s += " " + words[g.r.IntN(len(words))]
	}
	if len(s) > maxLen {
		s = strings.TrimRight(s[:maxLen], " ")
		for len(s) < minLen { // trimming a space went under minLength
			s += "x"
		}
	}
	return s
}

func (g *generator) instant() time.Time {
	return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(g.r.Int64N(365*24*3600)) * time.Second)
}

func (g *generator) array(sch map[string]any, depth int) []any {
	var prefix []any
	items := sch["items"]
	switch it := items.(type) {
	case []any: // draft 4 to 2019-09: a tuple, then additionalItems
		prefix, items = it, sch["additionalItems"]
	default:
		prefix, _ = sch["prefixItems"].([]any)
	}
	n := int(num(sch["minItems"]))
	if n == 0 && depth < shallowDepth {
		n = 1
	}
	if v, ok := sch["maxItems"]; ok {
		n = min(n, int(num(v)))
	}
	if items == false {
		n = min(n, len(prefix))
	}
	unique := sch["uniqueItems"] == true
	out := make([]any, 0, n)
	for i := range n {
		s := items
		if i < len(prefix) {
			s = prefix[i]
		}
		if s == nil {
			s = true
		}
		v := g.value(s, depth+1)
		for try := 0; unique && try < 10 && slices.ContainsFunc(out, func(x any) bool { return jsonEqual(x, v) }); try++ {
			v = g.value(s, depth+1)
		}
		out = append(out, v)
	}
	return out
}

func (g *generator) object(sch map[string]any, depth int) map[string]any {
	props, _ := sch["properties"].(map[string]any)
	required, _ := sch["required"].([]any)
	extra := sch["additionalProperties"]
	if extra == nil {
		extra = true
	}
	names := make([]string, 0, len(props)+len(required))
	if depth < shallowDepth {
		for name := range props {
			names = append(names, name)
		}
	}
	for _, r := range required {
		if name, ok := r.(string); ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names) // map order would make the answer depend on more than the seed
	out := make(map[string]any, len(names))
	for _, name := range names {
		s, ok := props[name]
		if !ok {
			s = extra
		}
		out[name] = g.value(s, depth+1)
	}
	if extra != false {
		for i := 1; len(out) < int(num(sch["minProperties"])); i++ {
			if name := "extra" + strconv.Itoa(i); !hasKey(out, name) {
				out[name] = g.value(extra, depth+1)
			}
		}
	}
	return out
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
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
