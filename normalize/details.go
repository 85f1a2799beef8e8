package normalize

import (
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Details flattens a validation error into readable lines, one per failing leaf, each naming
// the place in the answer (a JSON pointer; "/" is the whole answer) and the problem:
//
//	at /is_urgent: maximum: got 3, want 1
//	at /: additional properties 'note' not allowed
func Details(ve *jsonschema.ValidationError) []string {
	p := message.NewPrinter(language.English)
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			// The library prints a null of an enum as Go does: say it as JSON does.
			msg := strings.ReplaceAll(e.ErrorKind.LocalizedString(p), "<nil>", "null")
			out = append(out, "at "+loc+": "+msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}
