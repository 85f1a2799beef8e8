package httpx

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

func TestStatusKind(t *testing.T) {
	tests := []struct {
		status     int
		quotaSpent bool
		want       afloat.Kind
	}{
		{429, false, afloat.Throttled},
		{429, true, afloat.Unusable},
		{401, false, afloat.Unusable},
		{402, false, afloat.Unusable},
		{403, true, afloat.Unusable},
		{408, false, afloat.Unavailable},
		{500, false, afloat.Unavailable},
		{503, true, afloat.Unavailable}, // quotaSpent speaks of a 429 only
		{529, false, afloat.Unavailable},
		{400, false, afloat.Contract},
		{404, false, afloat.Contract},
		{413, false, afloat.Contract},
		{422, false, afloat.Contract},
		{302, false, afloat.Unavailable},
		{101, false, afloat.Unavailable},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%v", tt.status, tt.quotaSpent), func(t *testing.T) {
			if got := StatusKind(tt.status, tt.quotaSpent); got != tt.want {
				t.Errorf("StatusKind(%d, %v) = %s, want %s", tt.status, tt.quotaSpent, got, tt.want)
			}
		})
	}
}

func TestStatusCause(t *testing.T) {
	quote := func(s string) string { return strings.ReplaceAll(s, "KEY", "[redacted]") }
	tests := []struct {
		name    string
		found   bool
		message string
		body    string
		want    string // "" means a nil cause
	}{
		{"vendor message", true, "bad KEY", `{"error":{"message":"bad KEY"}}`, "bad [redacted]"},
		{"vendor shape without a message", true, "", `{"error":{}}`, ""},
		{"another shape", false, "", "<html>bad KEY</html>", "unexpected body: <html>bad [redacted]</html>"},
		{"empty body", false, "", " \n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := StatusCause(tt.found, tt.message, []byte(tt.body), quote)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("cause = %v, want none", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("cause = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestBodyErrors(t *testing.T) {
	bad := &ArgumentsError{Tool: "f", Err: errors.New("not an object")}
	tests := []struct {
		name   string
		pe     *afloat.ProviderError
		status int
		kind   afloat.Kind
		text   string
	}{
		{"body", BodyError("p", 200, errors.New("cut")), 200, afloat.Unavailable, "p: unavailable: status 200: cut"},
		{"decode", DecodeError("p", 200, errors.New("no choices")), 200, afloat.Unavailable, "p: unavailable: status 200: no choices"},
		{"decode arguments", DecodeError("p", 200, fmt.Errorf("decode: %w", bad)), 200, afloat.Contract,
			`p: contract: status 200: decode: tool "f": arguments are not a json object: not an object`},
		{"contract", ContractError("p", errors.New("nil request")), 0, afloat.Contract, "p: contract: nil request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.pe.Provider != "p" || tt.pe.Status != tt.status || tt.pe.Kind != tt.kind || tt.pe.Error() != tt.text {
				t.Errorf("got %+v (%q), want status %d, kind %s, %q", tt.pe, tt.pe.Error(), tt.status, tt.kind, tt.text)
			}
		})
	}
}
