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
//
// It gives at most MaxDetails lines; when there are more, the last says so instead: an
// answer that fails every branch of a schema's anyOf fails each in its own way, and the model
// it is quoted back to needs the first few.
func Details(ve *jsonschema.ValidationError) []string {
	p := message.NewPrinter(language.English)
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) > MaxDetails {
			return
		}
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
	if len(out) > MaxDetails {
		out = append(out[:MaxDetails-1], "(further problems left out)")
	}
	return out
}

// MaxDetails bounds the lines of Details.
const MaxDetails = 20
