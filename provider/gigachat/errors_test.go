package gigachat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
)

func TestChatErrorClasses(t *testing.T) {
	tests := []struct {
		fixture    string
		status     int
		kind       afloat.Kind
		retryAfter time.Duration
		transient  bool
		errHas     string
	}{
		{"err_400_bad_request.http", 400, afloat.Contract, 0, false, "Invalid params"},
		{"err_402_payment_required.http", 402, afloat.Unusable, 0, false, "Payment Required"},
		{"err_403_forbidden.http", 403, afloat.Unusable, 0, false, "Permission denied"},
		{"err_404_not_found.http", 404, afloat.Contract, 0, false, "GigaChat-Ultra"},
		{"err_413_too_large.http", 413, afloat.Contract, 0, false, "Payload too large"},
		{"err_422_functions.http", 422, afloat.Contract, 0, false, "does not support functions"},
		{"err_429_rate_limit.http", 429, afloat.Throttled, 3 * time.Second, true, "Too Many Requests"},
		{"err_500_internal.http", 500, afloat.Unavailable, 0, false, "Internal Server Error"},
		{"err_502_html.http", 502, afloat.Unavailable, 0, true, "unexpected body: <html>"},
		{"err_503_unavailable.http", 503, afloat.Unavailable, 0, true, "Service Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := server(t, tt.fixture)
			c := newClient(t, srv, nil)
			for _, call := range []struct {
				name string
				do   func() error
			}{
				{"complete", func() error { _, err := c.Complete(t.Context(), hello); return err }},
				{"stream", func() error { _, err := c.Stream(t.Context(), hello); return err }},
			} {
				err := call.do()
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("%s: err = %v (%T), want *afloat.ProviderError", call.name, err, err)
				}
				if pe.Provider != "gigachat-pro" || pe.Status != tt.status || pe.Kind != tt.kind || pe.Timeout {
					t.Errorf("%s: provider, status, kind, timeout = %s, %d, %s, %v; want gigachat-pro, %d, %s, false",
						call.name, pe.Provider, pe.Status, pe.Kind, pe.Timeout, tt.status, tt.kind)
				}
				if pe.RetryAfter != tt.retryAfter || pe.Transient() != tt.transient {
					t.Errorf("%s: RetryAfter, Transient = %v, %v; want %v, %v", call.name, pe.RetryAfter, pe.Transient(), tt.retryAfter, tt.transient)
				}
				if !strings.Contains(err.Error(), tt.errHas) || len(err.Error()) > 400 {
					t.Errorf("%s: error %q does not quote %q briefly", call.name, err, tt.errHas)
				}
			}
			// A status other than 401 never refreshes the token.
			if n := len(srv.Requests(authPath)); n != 1 {
				t.Errorf("%d token exchanges, want 1", n)
			}
		})
	}
}
