// Package prompt parses and renders versioned prompt templates: the messages a task sends to
// one provider (DESIGN.md §4).
//
// A template is a Go text/template. A line "--- system", "--- user" or "--- assistant",
// alone on its line (trailing spaces allowed), starts a message; "--- " and any other single
// word is an error, while "---" alone or "--- " and several words is text. The source is cut
// at these lines before it is parsed and each message is its own template, so no action spans
// two messages and an input value that contains "--- user" stays text inside its message. The
// file name carries the version: the "vN" before ".tmpl" ("triage/gigachat-pro.v3.tmpl" is
// "v3").
//
//	--- system
//	You triage support tickets. Answer with one JSON object: department, is_urgent, urgency_score.
//	--- user
//	Subject: {{.subject}}
//	Message: {{.message}}
//
// A template is parsed once, at configuration time, and rendered on every call:
//
//	t, err := prompt.ParseFile("prompts/triage/gigachat-pro.v3.tmpl")
//	if err != nil { ... }                    // names the file and the line
//	t.Fields()                               // ["message" "subject"]: the task's input fields
//	msgs, err := t.Render(map[string]any{"subject": s, "message": m})
//	var missing *prompt.MissingInputError    // a field absent from the input: a 400
//	if errors.As(err, &missing) { ... }
//	req := &afloat.Request{Messages: msgs}
//
// Inside a template, every field the template reads must be present in the input; a present
// field whose value is nil renders as "". Values that are not strings render as fmt's %v; the
// function json renders a value as JSON ({{json .customer}}), besides text/template's own
// functions.
package prompt
