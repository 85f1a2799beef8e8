package afloat

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Redacted is what a Secret prints, logs and marshals as.
const Redacted = "[redacted]"

// Secret is a credential: an API key, a token, an authorization key. It prints, logs
// (slog.LogValuer) and marshals to JSON as Redacted, so that a config struct or an adapter
// logged or formatted whole (any fmt verb, slog, encoding/json) never shows the value. Reveal
// returns the value, for the one place that sends it.
type Secret string

// Reveal returns the credential itself, for the request header that carries it.
func (s Secret) Reveal() string { return string(s) }

// String returns Redacted, or "" for an empty Secret (so that "no key" still reads as none).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString redacts %#v as String redacts %v.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// Format redacts every verb of fmt, the ones that do not fit a string (%d, %x) included, which
// would otherwise print the value inside their complaint.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'q':
		_, _ = f.Write([]byte(strconv.Quote(s.String())))
	case verb == 'v' && f.Flag('#'):
		_, _ = f.Write([]byte(s.GoString()))
	default:
		_, _ = f.Write([]byte(s.String()))
	}
}

// LogValue redacts the Secret in log/slog's output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON redacts the Secret in encoding/json's output.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText redacts the Secret where a text encoding (a map key, an XML or YAML encoder)
// reads it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
