package anthropic

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
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
		{"err_500_api_error.http", 500, afloat.Unavailable, "api_error", 0, false, "Internal server error"},
		{"err_502_html.http", 502, afloat.Unavailable, "", 0, true, "unexpected body: <html>"},
		{"err_529_overloaded.http", 529, afloat.Unavailable, "overloaded_error", 5 * time.Second, false, "Overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			c := newClient(t, srv.URL, nil)
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
				if pe.Provider != "claude" || pe.Status != tt.status || pe.Kind != tt.kind || pe.Code != tt.code {
					t.Errorf("%s: provider, status, kind, code = %s, %d, %s, %q; want claude, %d, %s, %q",
						call.name, pe.Provider, pe.Status, pe.Kind, pe.Code, tt.status, tt.kind, tt.code)
				}
				if pe.RetryAfter != tt.retryAfter || pe.Transient() != tt.transient || pe.Timeout {
					t.Errorf("%s: RetryAfter, Transient, Timeout = %v, %v, %v; want %v, %v, false",
						call.name, pe.RetryAfter, pe.Transient(), pe.Timeout, tt.retryAfter, tt.transient)
				}
				if !strings.Contains(err.Error(), tt.errHas) || len(err.Error()) > 400 {
					t.Errorf("%s: error %q does not quote %q briefly", call.name, err, tt.errHas)
				}
			}
		})
	}
}

func TestTransportFailures(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := newClient(t, url, nil).Complete(t.Context(), hello)
		var pe *afloat.ProviderError
		if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || pe.Status != 0 || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("err = %v, want an unavailable refused connection", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}))
		defer srv.Close()
		_, err := newClient(t, srv.URL, nil).Complete(t.Context(), hello)
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
			_, err := drain(t, s)
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("%s: stream end holds the key: %v", n.Name(), err)
			}
		}
		srv.Close()
	}
}
