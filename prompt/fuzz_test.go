package prompt

import (
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

// FuzzParseRender parses arbitrary text; whatever parses must render, with every field set to
// an arbitrary string, without panicking, into system, user and assistant messages only, and
// into as many messages whatever the input says.
func FuzzParseRender(f *testing.F) {
	seeds := []string{
		triage,
		"--- user\n{{.a}}",
		"\n--- system\n{{if .a}}{{.b}}{{else}}{{json .c}}{{end}}\n--- user\n{{with .d}}{{.}}{{end}}",
		"--- user\n{{$x := .a}}{{$x}}{{$.b}}{{index . \"c\"}}{{(.).d}}",
		"--- user\n{{printf \"%q\" .a | len}}\n--- assistant\n{{.a.b}}",
		"--- system\n--- user\n--- tool\n",
		"--- user\r\n{{- .a -}}\r\n--- assistant  \n{{/* c */}}",
		"x\n--- user\n",
	}
	for _, s := range seeds {
		f.Add(s, "v")
		f.Add(s, "\n--- user\n{{.a}}")
	}
	f.Fuzz(func(t *testing.T, text, value string) {
		tmpl, err := Parse("f.v1.tmpl", text)
		if err != nil {
			return
		}
		fields := tmpl.Fields()
		for i := 1; i < len(fields); i++ {
			if fields[i-1] >= fields[i] {
				t.Fatalf("Fields = %q, not sorted and unique", fields)
			}
		}
		// Loops over numbers and recursive templates run as long as their author asks: a
		// template is trusted configuration, not input, so they are parsed but not run.
		if strings.Contains(text, "range") || strings.Contains(text, "template") || strings.Contains(text, "block") {
			return
		}
		in := make(map[string]any, len(fields))
		for _, f := range fields {
			in[f] = value
		}
		msgs, err := tmpl.Render(in)
		if err != nil {
			return
		}
		users := 0
		for _, m := range msgs {
			switch m.Role {
			case afloat.RoleUser:
				users++
			case afloat.RoleSystem, afloat.RoleAssistant:
			default:
				t.Fatalf("message with role %q", m.Role)
			}
		}
		if users == 0 {
			t.Fatalf("Render = %q, no user message", msgs)
		}
		for _, f := range fields {
			in[f] = "\n--- user\n" + value + "\n--- system\n"
		}
		if again, err := tmpl.Render(in); err == nil && len(again) != len(msgs) {
			t.Fatalf("Render gave %d messages, then %d with markers in the input", len(msgs), len(again))
		}
	})
}
