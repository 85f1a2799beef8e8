package prompt

import (
	"fmt"
	"strings"
)

// MissingInputError is returned by Render when the input lacks a field the template reads.
// It is the caller's mistake, not the provider's: the gateway answers it with 400.
type MissingInputError struct {
	// Template is the template's name.
	Template string
	// Field is the missing input field.
	Field string
}

func (e *MissingInputError) Error() string {
	return fmt.Sprintf("prompt %s: missing input %q", e.Template, e.Field)
}

// templateErr is an error of text/template, reworded to read like this package's own:
// "template: x.v1.tmpl:3: ..." becomes "prompt x.v1.tmpl:3: ...". The original stays
// reachable with errors.As.
type templateErr struct {
	msg string
	err error
}

func (e *templateErr) Error() string { return e.msg }
func (e *templateErr) Unwrap() error { return e.err }

func templateError(name string, err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "template: "+name+":"); ok {
		msg = "prompt " + name + ":" + rest
	} else {
		msg = "prompt " + name + ": " + msg
	}
	return &templateErr{msg: msg, err: err}
}
