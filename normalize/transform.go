package normalize

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// fold reduces a key to what its variants share: decomposed, with accents dropped, lower case
// (Unicode-aware: "Категория" and "категория", "Categoría" and "categoria" meet), without
// underscores, hyphens, dots or spaces, so that urgency_score, urgencyScore, Urgency-Score and
// "urgency score" all fold to "urgencyscore".
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range norm.NFD.String(s) {
		switch {
		case unicode.Is(unicode.Mn, r):
		case r == '_' || r == '-' || r == '.' || unicode.IsSpace(r):
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// transformer renames keys and coerces scalars in a decoded value, following its shape, and
// records which of the two changed anything, and the objects that give a property twice.
type transformer struct {
	renamed, coerced bool
	// dups are details of objects with two keys for one property ("department" and
	// "категория", or "dept" and "категория"), which rename would have to choose between.
	dups []string
	path []string // where the walk is, as a JSON pointer's parts
}

// value returns v transformed; maps and slices are changed in place.
func (t *transformer) value(v any, sh *shape) any {
	if sh == nil {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		t.object(x, sh)
	case []any:
		for i, it := range x {
			is := sh.items
			if i < len(sh.prefix) {
				is = sh.prefix[i]
			}
			t.path = append(t.path, strconv.Itoa(i))
			x[i] = t.value(it, is)
			t.path = t.path[:len(t.path)-1]
		}
	default:
		if c, ok := coerce(v, sh); ok {
			t.coerced = true
			return c
		}
	}
	return v
}

// object renames the keys of m that are not properties of sh but fold to exactly one
// property that m lacks, then transforms every property's value. A property given twice (a
// key that folds to a property m holds already, or two keys that fold to one property) is
// recorded in t.dups and left as it is: nothing is merged, overwritten or dropped.
func (t *transformer) object(m map[string]any, sh *shape) {
	if len(sh.fold) > 0 {
		var from []string
		targets := map[string][]string{}
		for k := range m {
			if _, ok := sh.props[k]; ok {
				continue
			}
			if p, ok := sh.fold[fold(k)]; ok {
				if _, taken := m[p]; !taken {
					from = append(from, k)
				}
				targets[p] = append(targets[p], k)
			}
		}
		for p, ks := range targets {
			_, taken := m[p]
			if !taken && len(ks) == 1 {
				continue
			}
			slices.Sort(ks)
			if taken {
				ks = append([]string{p}, ks...)
			}
			loc := "/" + strings.Join(t.path, "/")
			t.dups = append(t.dups, fmt.Sprintf("at %s: duplicate key '%s' (given as '%s')", loc, p, strings.Join(ks, "' and '")))
		}
		slices.Sort(from)
		for _, k := range from {
			p := sh.fold[fold(k)]
			if len(targets[p]) != 1 {
				continue
			}
			m[p] = m[k]
			delete(m, k)
			t.renamed = true
		}
	}
	for k, v := range m {
		if ps, ok := sh.props[k]; ok {
			t.path = append(t.path, k)
			m[k] = t.value(v, ps)
			t.path = t.path[:len(t.path)-1]
		}
	}
}

// coerce converts a scalar the schema does not admit to the one value it must have meant,
// where that is unambiguous: a string holding a number where only numbers are admitted
// ("0.8", "0,8" → 0.8), a yes or no word where a boolean is ("да", "sim", "true" → true), a
// number where only strings are (42 → "42"), an enum's string in another case or with white
// space around it ("Technical " → "technical"), and "null" or "none" where the enum admits
// null and no string matches.
func coerce(v any, sh *shape) (any, bool) {
	switch x := v.(type) {
	case string:
		if sh.types.allows(tString) {
			return enumString(x, sh)
		}
		s := strings.TrimSpace(x)
		if sh.types.allows(tNumber) {
			if n, ok := number(s); ok {
				return n, true
			}
		}
		if sh.types.allows(tBoolean) {
			if b, ok := yesNo(s); ok {
				return b, true
			}
		}
		if sh.types.allows(tNull) && isNullWord(s) {
			return nil, true
		}
	case json.Number:
		if sh.types != 0 && !sh.types.allows(tNumber) && sh.types.allows(tString) {
			s := x.String()
			if !sh.hasEnum || slices.Contains(sh.enum, s) {
				return s, true
			}
		}
	}
	return nil, false
}

// enumString matches a string outside its enum to the enum's one string that equals it
// once trimmed and case-folded, or to null.
func enumString(s string, sh *shape) (any, bool) {
	if !sh.hasEnum || slices.Contains(sh.enum, s) {
		return nil, false
	}
	want := strings.TrimSpace(s)
	match, n := "", 0
	for _, e := range sh.enum {
		if strings.EqualFold(e, want) {
			match, n = e, n+1
		}
	}
	switch {
	case n == 1:
		return match, true
	case n == 0 && sh.enumNil && isNullWord(want):
		return nil, true
	}
	return nil, false
}

// number reads a decimal number as JSON writes it, or with a decimal comma ("0,8"). A
// separator that may group thousands as well makes the string ambiguous, so it is not read:
// "1,000" (one thousand in English), and "2.500" (two thousand five hundred in Portuguese
// and Russian), that is one to three digits other than a lone 0, a dot and exactly three
// digits. "0.500", "2.5" and "1234.567" are read.
func number(s string) (json.Number, bool) {
	if thousandsDot(s) {
		return "", false
	}
	if i := strings.IndexByte(s, ','); i >= 0 {
		frac := s[i+1:]
		if len(frac) == 0 || len(frac) == 3 || strings.ContainsAny(frac, ",.") {
			return "", false
		}
		s = s[:i] + "." + frac
	}
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) || !json.Valid([]byte(s)) {
		return "", false
	}
	return json.Number(s), true
}

// thousandsDot reports whether s is an optionally signed integer part of one to three
// digits, not 0, a dot and exactly three digits: a dot that may be a thousands separator.
func thousandsDot(s string) bool {
	s = strings.TrimLeft(s, "+-")
	whole, frac, ok := strings.Cut(s, ".")
	return ok && len(whole) >= 1 && len(whole) <= 3 && whole != "0" && len(frac) == 3 &&
		allDigits(whole) && allDigits(frac)
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// yesNo reads a yes or no word, in English, Russian or Portuguese.
func yesNo(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "y", "да", "sim", "verdadeiro":
		return true, true
	case "false", "no", "n", "нет", "não", "nao", "falso":
		return false, true
	}
	return false, false
}

func isNullWord(s string) bool {
	switch strings.ToLower(s) {
	case "null", "none", "nil":
		return true
	}
	return false
}
