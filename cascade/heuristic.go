package cascade

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/afloat-dev/afloat"
)

// Heuristic answers a task without a model, when its policy is heuristic and no tier
// answered. Its answer has the type of the model's: it is validated against the task's schema.
type Heuristic interface {
	// Answer returns the answer as JSON. An error means there is none; the call then
	// answers unavailable.
	Answer(in afloat.Input) (json.RawMessage, error)
}

// HeuristicFunc is a Heuristic written in Go; the value it returns is marshalled to JSON.
type HeuristicFunc func(in afloat.Input) (any, error)

// Answer calls f and marshals its value.
func (f HeuristicFunc) Answer(in afloat.Input) (json.RawMessage, error) {
	v, err := f(in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Rule is one heuristic rule of shared/DESIGN.md §4: a default rule (Default set) sets every
// field first; then each rule whose WhenAny word occurs in any string of the input sets its
// fields, in order.
type Rule struct {
	// WhenAny are words matched case-insensitively (Unicode-aware) as substrings of every
	// string in the input, nested ones included.
	WhenAny []string
	// Set are the fields the rule sets.
	Set map[string]any
	// Default, when set, makes this the default rule.
	Default map[string]any
}

// Rules is a rule set; it implements Heuristic.
type Rules []Rule

// Answer applies the rules to in.
func (r Rules) Answer(in afloat.Input) (json.RawMessage, error) {
	out := map[string]any{}
	for _, rule := range r {
		maps.Copy(out, rule.Default)
	}
	var texts []string
	collectStrings(map[string]any(in), &texts)
	for _, rule := range r {
		if rule.Default != nil || !matchAny(rule.WhenAny, texts) {
			continue
		}
		maps.Copy(out, rule.Set)
	}
	return json.Marshal(out)
}

// combinations returns the answers the rule set can give, for validating it at
// construction: the default alone, the default with each rule, and the default with every
// rule.
func (r Rules) combinations() []map[string]any {
	base := map[string]any{}
	for _, rule := range r {
		maps.Copy(base, rule.Default)
	}
	out := []map[string]any{base}
	all := maps.Clone(base)
	for _, rule := range r {
		if rule.Default != nil {
			continue
		}
		one := maps.Clone(base)
		maps.Copy(one, rule.Set)
		maps.Copy(all, rule.Set)
		out = append(out, one)
	}
	return append(out, all)
}

func matchAny(words, texts []string) bool {
	for _, w := range words {
		lw := strings.ToLower(w)
		for _, t := range texts {
			if strings.Contains(t, lw) {
				return true
			}
		}
	}
	return false
}

// collectStrings appends the lower-cased strings found in v.
func collectStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, strings.ToLower(x))
	case map[string]any:
		for _, e := range x {
			collectStrings(e, out)
		}
	case afloat.Input:
		for _, e := range x {
			collectStrings(e, out)
		}
	case []any:
		for _, e := range x {
			collectStrings(e, out)
		}
	case []string:
		for _, e := range x {
			*out = append(*out, strings.ToLower(e))
		}
	}
}
