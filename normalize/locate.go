package normalize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Locate finds the JSON value in a model's text (shared/DESIGN.md §5, step 1): a leading
// byte-order mark is dropped; a text that is one bracketed value and nothing else (white space
// aside) is that value, whatever its strings hold; else the body of the first Markdown code
// fence (with or without a language tag, closed or not) whose body starts with { or [ is
// taken when there is one; else
// the first span that opens with { or [ and looks like JSON, up to its matching closer, or to
// the end of the text when it never closes (a truncated answer). Quotes are tracked, so that a
// brace inside a string does not end the span: double quotes as JSON writes them, and single
// and typographic quotes where a string may start (after {, [, a comma or a colon). A bracket
// of prose ("[1]" is JSON, "[see below]" and "{name}" are not) is skipped. Text before and
// after the span is dropped. Locate reports false when the text holds no such span.
func Locate(text string) (string, bool) {
	text = strings.TrimPrefix(text, "\ufeff")
	if t := strings.TrimSpace(text); t != "" && (t[0] == '{' || t[0] == '[') && matchEnd(t, 0) == len(t) && looksLikeJSON(t) {
		return t, true
	}
	if body, ok := fenced(text); ok {
		if span, ok := firstValue(body); ok {
			return span, true
		}
	}
	return firstValue(text)
}

// firstValue returns the first span of text that opens with { or [, looks like JSON, and
// runs to its matching closer or to the end of the text.
func firstValue(text string) (string, bool) {
	for i := 0; i < len(text); {
		j := strings.IndexAny(text[i:], "{[")
		if j < 0 {
			return "", false
		}
		start := i + j
		if looksLikeJSON(text[start:]) {
			return text[start:matchEnd(text, start)], true
		}
		i = start + 1
	}
	return "", false
}

// looksLikeJSON reports whether s, which starts with { or [, starts a JSON value rather than
// prose in brackets: what follows the opener (after white space) must be able to start a
// key (for {) or a value (for [).
func looksLikeJSON(s string) bool {
	open := s[0]
	rest := strings.TrimLeftFunc(s[1:], unicode.IsSpace)
	if rest == "" {
		return true // a truncated answer: "{" and nothing after it
	}
	r, _ := utf8.DecodeRuneInString(rest)
	switch r {
	case '"', '\'', '“', '”', '‘', '’', '«', '„':
		return true
	case '/': // a comment
		return strings.HasPrefix(rest, "//") || strings.HasPrefix(rest, "/*")
	case '\\': // an escaped quote: JSON inside a JSON string
		return strings.HasPrefix(rest, `\"`)
	}
	if open == '{' {
		if r == '}' {
			return true
		}
		return unquotedKey(rest)
	}
	switch {
	case r == ']' || r == '{' || r == '[' || r == '-' || (r >= '0' && r <= '9'):
		return true
	}
	for _, kw := range [...]string{"true", "false", "null", "True", "False", "None"} {
		if after, ok := strings.CutPrefix(rest, kw); ok {
			r, _ := utf8.DecodeRuneInString(after)
			return after == "" || !isIdent(r)
		}
	}
	return false
}

// unquotedKey reports whether s starts with an identifier followed by a colon: the unquoted
// key of a JavaScript-like object ({department: "billing"}).
func unquotedKey(s string) bool {
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if !isIdent(r) {
			break
		}
		n += size
	}
	if n == 0 {
		return false
	}
	rest := strings.TrimLeft(s[n:], " \t")
	return strings.HasPrefix(rest, ":")
}

func isIdent(r rune) bool {
	return r == '_' || r == '$' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// matchEnd returns the index just past the closer matching the opener at text[start], or
// len(text) when it never closes.
func matchEnd(text string, start int) int {
	depth := 0
	var closer rune // the quote that ends the string we are in; 0 outside strings
	var prev rune   // the last rune outside strings and white space
	esc := false    // inside a double-quoted string, after a backslash
	for i := start; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		i += size
		if closer != 0 {
			switch {
			case closer == '"' && esc:
				esc = false
			case closer == '"' && r == '\\':
				esc = true
			case r == closer && (closer == '"' || endsQuote(text[i:])):
				closer, prev = 0, r
			}
			continue
		}
		switch r {
		case '"':
			closer = '"'
		case '\'', '‘', '’', '“', '”', '«', '„':
			if prev == '{' || prev == '[' || prev == ',' || prev == ':' {
				closer = closingQuote(r)
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i
			}
		}
		if !unicode.IsSpace(r) {
			prev = r
		}
	}
	return len(text)
}

// closingQuote returns the quote that closes a string opened with q.
func closingQuote(q rune) rune {
	switch q {
	case '‘':
		return '’'
	case '“', '„':
		return '”'
	case '«':
		return '»'
	}
	return q
}

// endsQuote reports whether a non-JSON quote followed by rest closes its string: what comes
// next (after white space) is a comma, a colon, a closer, or the end of the text. It keeps an
// apostrophe inside a single-quoted string ('it's') from ending it.
func endsQuote(rest string) bool {
	rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
	return rest == "" || strings.ContainsRune(",:}]", rune(rest[0]))
}

// fenced returns the body of the first ``` fence whose body starts with { or [, trimmed. An
// unclosed fence's body runs to the end of the text.
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
