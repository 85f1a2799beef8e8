package config

import (
	"bytes"
	"strconv"
	"strings"
)

// YAML ends a plain scalar at '{', '}', '[', ']' and ',' inside a flow collection, so an
// unquoted ${VAR} there ("keys: [${ACME_KEY}]") is a syntax error, while the same text in
// block style is a plain string. Before parsing, each ${...} is therefore masked with a
// placeholder that YAML reads as plain text in either style; the decoder unmasks a scalar's
// text before expanding it, so that ${VAR} means the same in both styles.
//
// The placeholders are built from private-use code points, which YAML allows in plain
// scalars and a config file has no reason to hold: a file that does hold one is left
// unmasked.
const (
	maskOpen  = "\uE000"
	maskClose = "\uE001"
)

// maskEnv returns data with each ${...} on one line replaced by a placeholder, and the
// replacer that restores them (nil when nothing was masked). A ${ whose text up to the
// closing brace holds a quote, a backslash or a " #" is left alone: there the YAML
// syntax around it (an escape, a comment) must keep its meaning.
func maskEnv(data []byte) ([]byte, *strings.Replacer) {
	if !bytes.Contains(data, []byte("${")) || bytes.Contains(data, []byte(maskOpen)) || bytes.Contains(data, []byte(maskClose)) {
		return data, nil
	}
	var (
		out   []byte
		pairs []string
	)
	for i := 0; i < len(data); {
		if !bytes.HasPrefix(data[i:], []byte("${")) {
			out = append(out, data[i])
			i++
			continue
		}
		end := bytes.IndexAny(data[i:], "}\n")
		if end < 0 || data[i+end] != '}' {
			out = append(out, data[i])
			i++
			continue
		}
		ref := data[i : i+end+1]
		if bytes.ContainsAny(ref, "\"'\\") || bytes.Contains(ref, []byte(" #")) || bytes.Contains(ref, []byte("\t#")) {
			out = append(out, data[i])
			i++
			continue
		}
		mask := maskOpen + strconv.Itoa(len(pairs)/2) + maskClose
		pairs = append(pairs, mask, string(ref))
		out = append(out, mask...)
		i += len(ref)
	}
	if len(pairs) == 0 {
		return data, nil
	}
	return out, strings.NewReplacer(pairs...)
}

// unmask restores the ${...} that maskEnv replaced in s.
func (d *decoder) unmask(s string) string {
	if d.masks == nil || !strings.Contains(s, maskOpen) {
		return s
	}
	return d.masks.Replace(s)
}
