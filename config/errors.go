package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a config file, at a key path ("tasks.triage.budget") and a line.
type Error struct {
	// Path is the key path of the value at fault; "" for the document as a whole.
	Path string
	// Line is the 1-based line in the file; 0 when no line is known (a value built in code).
	Line int
	// Msg says what is wrong.
	Msg string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Path != "":
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Path, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	case e.Path != "":
		return e.Path + ": " + e.Msg
	}
	return e.Msg
}

// Errors is every problem found in a config file, in the order of their lines. Load, Parse,
// Build and Check return it (as an error) so that one run reports them all.
type Errors []*Error

// Error lists the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// err returns es as an error, or nil when it is empty, so that a nil Errors never becomes a
// non-nil error.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// sorted drops repeated errors (below) and orders the rest by line, keeping the order of
// errors on one line; errors without a line go last.
func (es Errors) sorted() Errors {
	// One value every provider inherits from defaults fails each provider's build alike: it is
	// said once, and not at all where an error of the file's checks says it more closely
	// (defaults.breaker.failure_rate beside the build's defaults.breaker; the alerts' checks
	// beside the evaluator's, which repeats them at alerts).
	all := slices.Clone(es)
	es = slices.DeleteFunc(es, func(e *Error) bool {
		earlier := true
		for _, o := range all {
			switch {
			case o == e:
				earlier = false
			case earlier && o.Path == e.Path && o.Msg == e.Msg: // the first of equal errors stays
				return true
			case (strings.HasPrefix(e.Path, "defaults.") || e.Path == "alerts") && strings.HasPrefix(o.Path, e.Path+"."):
				return true
			}
		}
		return false
	})
	slices.SortStableFunc(es, func(a, b *Error) int {
		la, lb := a.Line, b.Line
		if la == 0 {
			la = int(^uint(0) >> 1)
		}
		if lb == 0 {
			lb = int(^uint(0) >> 1)
		}
		return cmp.Compare(la, lb)
	})
	return es
}
