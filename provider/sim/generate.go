package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Generation limits. Past shallowDepth an object gets only its required properties, an array
// only its minItems and a nullable value is null, so recursive schemas end; past maxDepth the
// value is null whatever the schema says.
const (
	shallowDepth = 8
	maxDepth     = 32
)

// generate returns a JSON value valid for the JSON Schema document root, choosing with r.
//
// It reads: $ref to a JSON pointer in the same document ($defs, definitions, "#"), allOf
// (merged), anyOf and oneOf (the first branch), const, enum, type (one or a list), properties
// and required, additionalProperties and minProperties, items, prefixItems, minItems,
// maxItems and uniqueItems, minLength and maxLength, a few formats, minimum, maximum, the
// exclusive bounds (2020-12 numbers or draft-4 booleans) and multipleOf. It ignores pattern,
// not, if/then/else, contains and references to other documents, so a schema that leans on
// them may get a value that does not fit.
//
// root comes from parseSchema (or a schemaCache); generate only reads it, so calls may share it.
func generate(root any, r *rand.Rand) (json.RawMessage, error) {
	g := generator{root: root, r: r}
	return json.Marshal(g.value(root, 0))
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
