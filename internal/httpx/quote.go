package httpx

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Quote prepares a provider's text for an error message: each non-empty secret is cut out
// wherever a server echoed it (the longest first, so that a secret holding another is cut
// whole), runs of white space are folded, invalid UTF-8 is repaired, and the rest is
// truncated at a rune boundary to at most max bytes (plus "…").
func Quote(s string, max int, secrets ...string) string {
	if len(secrets) > 1 {
		secrets = slices.Clone(secrets)
		slices.SortFunc(secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	}
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

// Secrets returns what an adapter's errors must never quote: each non-empty credential and
// every value of its configured headers h. A header from a config is as secret as the key,
// since that is where a key goes that is not a bearer token (Azure OpenAI's api-key, a
// proxy's own key); the adapter cannot tell which header that is, so it cuts them all, but
// for values under minSecret bytes (a beta flag "x", "on"), which no key is and whose cutting
// would garble every message that holds those letters.
func Secrets(h http.Header, credentials ...string) []string {
	var out []string
	for _, c := range credentials {
		if c != "" {
			out = append(out, c)
		}
	}
	for _, vs := range h {
		for _, v := range vs {
			if len(v) >= minSecret {
				out = append(out, v)
			}
		}
	}
	return out
}

// minSecret is the shortest header value Secrets takes for a credential.
const minSecret = 8

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
