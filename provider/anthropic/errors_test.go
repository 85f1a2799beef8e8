package anthropic

import (
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestErrorClasses(t *testing.T) {
	tests := []struct {
		fixture    string
		status     int
		kind       afloat.Kind
		code       string
		retryAfter time.Duration
		transient  bool
		errHas     string
	}{
		{"err_400_invalid_request.http", 400, afloat.Contract, "invalid_request_error", 0, false, "roles must alternate"},
		{"err_401_authentication.http", 401, afloat.Unusable, "authentication_error", 0, false, "invalid x-api-key"},
		{"err_402_billing.http", 402, afloat.Unusable, "billing_error", 0, false, "credit balance"},
		{"err_403_permission.http", 403, afloat.Unusable, "permission_error", 0, false, "permission"},
		{"err_404_not_found.http", 404, afloat.Contract, "not_found_error", 0, false, "claude-sonnet-9"},
		{"err_413_too_large.http", 413, afloat.Contract, "request_too_large", 0, false, "maximum allowed"},
		{"err_429_rate_limit.http", 429, afloat.Throttled, "rate_limit_error", 20 * time.Second, true, "rate limit"},
		{"err_429_spend_limit.http", 429, afloat.Unusable, "enforced_spend_limit_reached", 0, false, "usage limits"},
		{"err_500_api_error.http", 500, afloat.Unavailable, "api_error", 0, true, "Internal server error"},
		{"err_502_html.http", 502, afloat.Unavailable, "", 0, true, "unexpected body: <html>"},
		{"err_529_overloaded.http", 529, afloat.Unavailable, "overloaded_error", 5 * time.Second, false, "Overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			c := newClient(t, srv.URL, nil)
			for _, call := range fixture.Calls(t.Context(), c, hello) {
				fixture.CheckError(t, call.Name, call.Do(), fixture.WantError{Provider: "claude", Status: tt.status, Kind: tt.kind,
					Code: tt.code, RetryAfter: tt.retryAfter, Transient: tt.transient, Has: tt.errHas})
			}
		})
	}
}

func TestTransportFailures(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		_, err := newClient(t, fixture.ClosedURL(t), nil).Complete(t.Context(), hello)
		var pe *afloat.ProviderError
		if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || pe.Status != 0 || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("err = %v, want an unavailable refused connection", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		_, err := newClient(t, fixture.ResetServer(t).URL, nil).Complete(t.Context(), hello)
		var pe *afloat.ProviderError
		if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || !pe.Transient() {
			t.Fatalf("err = %v, want a transient unavailable reset", err)
		}
	})
}

// TestErrorsNeverHoldTheKey replays every fixture with the key planted in its body, as a
// server echoing the request would.
func TestErrorsNeverHoldTheKey(t *testing.T) {
	names, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		r := read(t, n.Name())
		r.Body = []byte(strings.Replace(string(r.Body), `"message":"`, `"message":"key `+testKey+` `, 1))
		srv := httptest.NewServer(r)
		c := newClient(t, srv.URL, nil)
		if _, err := c.Complete(t.Context(), hello); err != nil && strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: complete error holds the key: %v", n.Name(), err)
		}
		if s, err := c.Stream(t.Context(), hello); err != nil {
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("%s: stream error holds the key: %v", n.Name(), err)
			}
		} else {
			_, err := fixture.Drain(t, s)
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("%s: stream end holds the key: %v", n.Name(), err)
			}
		}
		srv.Close()
	}
}
