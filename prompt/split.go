package prompt

import (
	"fmt"
	"strings"

	"github.com/afloat-dev/afloat"
)

// section is the source of one message: the text between its role marker and the next.
type section struct {
	role string
	text string
	line int // line of the file on which text starts
}

// source returns the section's text preceded by a comment holding as many newlines as there
// are lines above it in the file, so that text/template's errors and positions name the line
// of the file, not of the section. A comment renders nothing.
func (s section) source() string {
	return "{{/*" + strings.Repeat("\n", s.line-1) + "*/}}" + s.text
}

// split cuts text at its role marker lines, before any template parsing, so that no template
// action can span two messages and no rendered value can start one.
func split(name, text string) ([]section, error) {
	var sections []section
	start, line := 0, 0 // start of the current section's text; number of the line just read
	for pos := 0; pos < len(text); {
		end := strings.IndexByte(text[pos:], '\n') + 1
		if end == 0 {
			end = len(text) - pos
		}
		l := text[pos : pos+end]
		line++
		word, ok := marker(l)
		switch {
		case ok:
			if !isRole(word) {
				return nil, fmt.Errorf("prompt %s:%d: unknown role %q", name, line, word)
			}
			if len(sections) > 0 {
				sections[len(sections)-1].text = text[start:pos]
			}
			sections = append(sections, section{role: word, line: line + 1})
			start = pos + end
		case len(sections) == 0 && strings.TrimSpace(l) != "":
			return nil, fmt.Errorf("prompt %s:%d: text before the first role marker", name, line)
		}
		pos += end
	}
	if len(sections) > 0 {
		sections[len(sections)-1].text = text[start:]
	}
	return sections, nil
}

// marker reports whether line is a role marker, "--- " and one word alone on the line, and
// returns the word. A line of prose after "--- " (more than one word) is text; "---" alone, a
// Markdown rule, is text too.
func marker(line string) (word string, ok bool) {
	rest, ok := strings.CutPrefix(line, "--- ")
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" || strings.ContainsAny(rest, " \t") {
		return "", false
	}
	return rest, true
}

func isRole(word string) bool {
	switch word {
	case afloat.RoleSystem, afloat.RoleUser, afloat.RoleAssistant:
		return true
	}
	return false
}
