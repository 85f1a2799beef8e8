package gigachat

import (
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
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
		{"err_500_internal.http", 500, afloat.Unavailable, 0, true, "Internal Server Error"},
		{"err_502_html.http", 502, afloat.Unavailable, 0, true, "unexpected body: <html>"},
		{"err_503_unavailable.http", 503, afloat.Unavailable, 0, true, "Service Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := server(t, tt.fixture)
			c := newClient(t, srv, nil)
			// GigaChat's error body names no type: Code stays empty.
			for _, call := range fixture.Calls(t.Context(), c, hello) {
				fixture.CheckError(t, call.Name, call.Do(), fixture.WantError{Provider: "gigachat-pro", Status: tt.status, Kind: tt.kind,
					RetryAfter: tt.retryAfter, Transient: tt.transient, Has: tt.errHas})
			}
			// A status other than 401 never refreshes the token.
			if n := len(srv.Requests(authPath)); n != 1 {
				t.Errorf("%d token exchanges, want 1", n)
			}
		})
	}
}
