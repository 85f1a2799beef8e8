package normalize

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one lexical piece of a span, as scanEnd reads it.
type token struct {
	kind  byte   // one of { [ } ] , : and 's' string, 'n' number, 'w' word, 'x' anything else
	value bool   // a string, number or word that stands where a value does (not a key)
	word  string // a word's text
}

// cutShort tells whether a span that never closes (an answer cut off by the provider's limit
// on tokens, or one that stops before its closers) ends on a value boundary, where repair
// only adds the closers, or in the middle of a value, whose end repair would make up: "0."
// becoming 0.0, tr true, an unclosed "Tech the string "Tech", a key without its value null.
// It returns "" for a span that closes, or stops right after a complete value: a closed
// string, a closed object or array, the literal true, false or null (or Python's True,
// False, None), or a comma after one of those. A number at the very end counts as complete
// only when the model ended the answer by itself (ended: the finish reason is stop or
// tool_calls) and it is a whole JSON number ("0.3", not "0." or "-"): else nothing says it
// was complete ("0.9" may have been "0.95"). Otherwise it returns why the end is incomplete.
func cutShort(span string, ended bool) string {
	end := scanEnd(span)
	switch {
	case end.closed:
		return ""
	case end.inString:
		return "it stops inside a string"
	}
	last, before := end.last, end.before
	complete := func(t token) bool {
		switch t.kind {
		case '}', ']':
			return true
		case 's', 'n':
			return t.value
		case 'w':
			return t.value && isLiteral(t.word)
		}
		return false
	}
	switch {
	case last.kind == 'n' && !ended:
		return "it stops on a number, which may be cut short"
	case last.kind == 'n' && !(last.value && json.Valid([]byte(last.word))):
		return "it stops on a number that is not complete"
	case last.kind == ',' && complete(before), last.kind != ',' && complete(last):
		return ""
	}
	return "it stops before its last value is complete"
}

// spanEnd is how a span ends, as scanEnd reads it.
type spanEnd struct {
	closed       bool  // the span closes: its first opener has its closer
	inString     bool  // it stops inside a string
	last, before token // its last two tokens, when neither
}

// scanEnd reads a span that starts with { or [ up to its closer or its end. Quotes are
// tracked as matchEnd tracks them, so that both agree on where the span closes.
func scanEnd(span string) spanEnd {
	var stack []byte // the open containers' openers
	var last, before token
	push := func(t token) { before, last = last, t }
	// inValue reports whether a string, number or word starting now stands for a value.
	inValue := func() bool {
		return len(stack) == 0 || stack[len(stack)-1] == '[' || last.kind == ':'
	}
	for i := 0; i < len(span); {
		r, size := utf8.DecodeRuneInString(span[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
		case r == '"':
			end := stringEnd(span, i+1)
			if end < 0 {
				return spanEnd{inString: true}
			}
			push(token{kind: 's', value: inValue()})
			i = end
		case strings.ContainsRune("'‘’“”«„", r) && strings.ContainsRune("{[,:", rune(last.kind)):
			end := quotedEnd(span, i+size, closingQuote(r))
			if end < 0 {
				return spanEnd{inString: true}
			}
			push(token{kind: 's', value: inValue()})
			i = end
		case r == '{' || r == '[':
			stack = append(stack, byte(r))
			push(token{kind: byte(r)})
			i += size
		case r == '}' || r == ']':
			if len(stack) <= 1 {
				return spanEnd{closed: true}
			}
			stack = stack[:len(stack)-1]
			push(token{kind: byte(r)})
			i += size
		case r == ',' || r == ':':
			push(token{kind: byte(r)})
			i += size
		case isIdent(r) || r == '.' || r == '+':
			j := i + size
			for j < len(span) {
				r2, s2 := utf8.DecodeRuneInString(span[j:])
				if !isIdent(r2) && r2 != '.' && r2 != '+' {
					break
				}
				j += s2
			}
			kind := byte('w')
			if r == '-' || r == '+' || r == '.' || (r >= '0' && r <= '9') {
				kind = 'n'
			}
			push(token{kind: kind, value: inValue(), word: span[i:j]})
			i = j
		default:
			push(token{kind: 'x'})
			i += size
		}
	}
	return spanEnd{last: last, before: before}
}

// truncation returns the detail of a span that cutShort finds cut in the middle of a value,
// quoting its last characters; "" when it is not.
func truncation(span string, ended bool) string {
	why := cutShort(span, ended)
	if why == "" {
		return ""
	}
	return fmt.Sprintf("the JSON is cut off and cannot be repaired without making up its end: %s (it ends with `%s`)", why, tail(span))
}

// cutByLimit returns the detail of a span that does not close in an answer the provider cut
// at its limit on tokens (finish reason length); "" when the span closes.
func cutByLimit(span string) string {
	if scanEnd(span).closed {
		return ""
	}
	return fmt.Sprintf("the answer was cut by the token limit before the JSON ended (it ends with `%s`)", tail(span))
}

// tail returns the last characters of a span, white space collapsed, to quote in a detail.
func tail(span string) string {
	t := strings.Join(strings.Fields(span), " ")
	if n := utf8.RuneCountInString(t); n > 24 {
		t = "…" + string([]rune(t)[n-24:])
	}
	return t
}

func isLiteral(w string) bool {
	switch w {
	case "true", "false", "null", "True", "False", "None":
		return true
	}
	return false
}

// stringEnd returns the index just past the double quote that ends the JSON string whose
// body starts at s[i], or -1 when it does not end.
func stringEnd(s string, i int) int {
	for {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return -1
		}
		j += i
		// The quote ends the string unless an odd run of backslashes escapes it.
		n := 0
		for k := j - 1; k >= i && s[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		i = j + 1
	}
}

// quotedEnd returns the index just past the quote closer that ends a single- or
// typographic-quoted string whose body starts at s[i] (see endsQuote), or -1.
func quotedEnd(s string, i int, closer rune) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == closer && endsQuote(s[i:]) {
			return i
		}
	}
	return -1
}
