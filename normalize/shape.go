package normalize

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// types is a set of JSON types; the zero set allows any.
type types uint8

const (
	tNull types = 1 << iota
	tBoolean
	tNumber
	tInteger
	tString
	tArray
	tObject
)

func typeOf(name string) types {
	switch name {
	case "null":
		return tNull
	case "boolean":
		return tBoolean
	case "number":
		return tNumber
	case "integer":
		return tInteger
	case "string":
		return tString
	case "array":
		return tArray
	case "object":
		return tObject
	}
	return 0
}

// typeOfValue returns the type of a decoded JSON value (numbers as json.Number).
func typeOfValue(v any) types {
	switch v.(type) {
	case nil:
		return tNull
	case bool:
		return tBoolean
	case json.Number, float64:
		return tNumber
	case string:
		return tString
	case []any:
		return tArray
	case map[string]any:
		return tObject
	}
	return 0
}

// allows reports whether the set admits t (a number admits an integer and back: the
// validator decides).
func (s types) allows(t types) bool {
	if s == 0 {
		return true
	}
	if t == tNumber || t == tInteger {
		return s&(tNumber|tInteger) != 0
	}
	return s&t != 0
}

// widen adds integer to a set that admits number: every integer is a number.
func widen(t types) types {
	if t&tNumber != 0 {
		t |= tInteger
	}
	return t
}

// shape is what rename and coerce read of a schema location: the types it admits, its
// properties with the folded names that reach them, its items, and its enum. It is derived
// once from the compiled schema, $ref and allOf merged in, and never changes after.
type shape struct {
	types   types
	props   map[string]*shape
	fold    map[string]string // folded name or synonym → property; ambiguous folds removed
	items   *shape
	prefix  []*shape
	enum    []string // the enum's strings
	enumNil bool     // the enum (or const) admits null
	hasEnum bool
}

// buildShape derives the shape of s; memo breaks the cycles of recursive schemas.
func buildShape(s *jsonschema.Schema, memo map[*jsonschema.Schema]*shape) *shape {
	if s == nil || s.Bool != nil {
		return nil
	}
	if sh, ok := memo[s]; ok {
		return sh
	}
	sh := &shape{}
	memo[s] = sh
	if s.Types != nil && !s.Types.IsEmpty() {
		for _, name := range s.Types.ToStrings() {
			sh.types |= typeOf(name)
		}
	}
	if s.Enum != nil {
		sh.hasEnum = true
		var ts types
		for _, v := range s.Enum.Values {
			ts |= typeOfValue(v)
			switch v := v.(type) {
			case string:
				sh.enum = append(sh.enum, v)
			case nil:
				sh.enumNil = true
			}
		}
		if sh.types == 0 {
			sh.types = ts
		}
	}
	if s.Const != nil {
		sh.hasEnum = true
		v := *s.Const
		if str, ok := v.(string); ok {
			sh.enum = append(sh.enum, str)
		}
		sh.enumNil = v == nil
		if sh.types == 0 {
			sh.types = typeOfValue(v)
		}
	}
	// Alternatives: the union of their types, unless one admits any.
	if alts := slices.Concat(s.AnyOf, s.OneOf); len(alts) > 0 && sh.types == 0 {
		var ts types
		for _, a := range alts {
			as := buildShape(a, memo)
			if as == nil || as.types == 0 {
				ts = 0
				break
			}
			ts |= as.types
		}
		sh.types = ts
	}
	addProps := func(from map[string]*jsonschema.Schema) {
		for name, ps := range from {
			if sh.props == nil {
				sh.props = map[string]*shape{}
			}
			if _, ok := sh.props[name]; !ok {
				sh.props[name] = buildShape(ps, memo)
			}
		}
	}
	addProps(s.Properties)
	if it, ok := s.Items.(*jsonschema.Schema); ok {
		sh.items = buildShape(it, memo)
	}
	if s.Items2020 != nil {
		sh.items = buildShape(s.Items2020, memo)
	}
	for _, p := range s.PrefixItems {
		sh.prefix = append(sh.prefix, buildShape(p, memo))
	}
	if its, ok := s.Items.([]*jsonschema.Schema); ok {
		for _, p := range its {
			sh.prefix = append(sh.prefix, buildShape(p, memo))
		}
	}
	// $ref and allOf add their constraints to this location.
	for _, m := range append([]*jsonschema.Schema{s.Ref}, s.AllOf...) {
		ms := buildShape(m, memo)
		if ms == nil {
			continue
		}
		switch {
		case sh.types == 0:
			sh.types = ms.types
		case ms.types != 0:
			sh.types = widen(sh.types) & widen(ms.types) // what both admit
		}
		for name, ps := range ms.props {
			if sh.props == nil {
				sh.props = map[string]*shape{}
			}
			if _, ok := sh.props[name]; !ok {
				sh.props[name] = ps
			}
		}
		if sh.items == nil {
			sh.items = ms.items
		}
		if !sh.hasEnum && ms.hasEnum {
			sh.hasEnum, sh.enum, sh.enumNil = true, ms.enum, ms.enumNil
		}
	}
	return sh
}

// indexNames fills every object shape's fold map with the folded names of its properties
// and their synonyms, and returns the properties the schema has anywhere.
func indexNames(root *shape, synonyms map[string][]string) map[string]bool {
	seen := map[*shape]bool{}
	known := map[string]bool{}
	var walk func(sh *shape)
	walk = func(sh *shape) {
		if sh == nil || seen[sh] {
			return
		}
		seen[sh] = true
		if len(sh.props) > 0 {
			sh.fold = map[string]string{}
			ambiguous := map[string]bool{}
			add := func(word, prop string) {
				f := fold(word)
				if f == "" || ambiguous[f] {
					return
				}
				if p, ok := sh.fold[f]; ok && p != prop {
					delete(sh.fold, f)
					ambiguous[f] = true
					return
				}
				sh.fold[f] = prop
			}
			for name := range sh.props {
				known[name] = true
				add(name, name)
				for _, w := range synonyms[name] {
					add(w, name)
				}
			}
		}
		for _, ps := range sh.props {
			walk(ps)
		}
		walk(sh.items)
		for _, p := range sh.prefix {
			walk(p)
		}
	}
	walk(root)
	return known
}

// checkSynonyms refuses synonyms for properties the schema does not have.
func checkSynonyms(name string, synonyms map[string][]string, known map[string]bool) error {
	var unknown []string
	for prop := range synonyms {
		if !known[prop] {
			unknown = append(unknown, prop)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("schema %s: synonyms for %s, which the schema has no property of that name for", name, quoteAll(unknown))
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
