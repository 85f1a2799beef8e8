package httpx

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Quote prepares a provider's text for an error message: each non-empty secret is cut out
// wherever a server echoed it, runs of white space are folded, invalid UTF-8 is repaired,
// and the rest is truncated at a rune boundary to at most max bytes (plus "…").
func Quote(s string, max int, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Headers checks extra request headers from a config and returns them canonicalized: each
// name must be an HTTP token and no value may hold a control character that could split
// the request. nil is an empty header.
func Headers(h map[string]string) (http.Header, error) {
	out := make(http.Header, len(h))
	for k, v := range h {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("invalid header name %q", k)
		}
		if HasControl(v) {
			return nil, fmt.Errorf("header %s holds a control character", k)
		}
		out.Set(k, v)
	}
	return out, nil
}

// HasControl reports whether s holds a character that would break an HTTP header line.
func HasControl(s string) bool { return strings.ContainsAny(s, "\r\n\x00") }

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r >= 0x7f || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}
