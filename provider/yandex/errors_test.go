package yandex

import (
	"strings"
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
		{"err_400_invalid_argument.http", 400, afloat.Contract, "INVALID_ARGUMENT", 0, false, "number of input tokens"},
		{"err_401_unknown_key.http", 401, afloat.Unusable, "UNAUTHENTICATED", 0, false, "Unknown api key"},
		{"err_403_permission_denied.http", 403, afloat.Unusable, "PERMISSION_DENIED", 0, false, "denied"},
		{"err_404_not_found.http", 404, afloat.Contract, "NOT_FOUND", 0, false, "yandexgpt-ultra"},
		{"err_429_sessions.http", 429, afloat.Throttled, "ai.textGenerationCompletionSessionsCount.count", 0, false, "quota limit exceed"},
		{"err_429_rate.http", 429, afloat.Throttled, "ai.textGenerationCompletionRequestsPerSecond.rate", 2 * time.Second, true, "quota limit exceed"},
		{"err_429_monthly.http", 429, afloat.Unusable, "ai.textGenerationTokensPerMonth.month", 0, false, "quota limit exceed"},
		{"err_500_internal.http", 500, afloat.Unavailable, "INTERNAL", 0, true, "Fatal internal error"},
		{"err_502_html.http", 502, afloat.Unavailable, "", 0, true, "unexpected body: <html>"},
		{"err_503_unavailable.http", 503, afloat.Unavailable, "UNAVAILABLE", 0, true, "upstream connect error"},
		{"err_504_deadline.http", 504, afloat.Unavailable, "DEADLINE_EXCEEDED", 0, true, "Deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			c := newClient(t, srv.URL, nil)
			for _, call := range fixture.Calls(t.Context(), c, hello) {
				fixture.CheckError(t, call.Name, call.Do(), fixture.WantError{Provider: "yandexgpt", Status: tt.status, Kind: tt.kind,
					Code: tt.code, RetryAfter: tt.retryAfter, Transient: tt.transient, Has: tt.errHas})
			}
		})
	}
}

// TestEchoedKeyIsRedacted: Yandex quotes an unknown key back; our own never reaches an error.
func TestEchoedKeyIsRedacted(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"api key", nil},
		{"iam token", func(c *Config) { c.APIKey, c.IAMToken = "", testToken }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fixture.NewServer(t)
			c := newClient(t, srv.URL, tt.mod)
			r := read(t, "err_401_unknown_key.http")
			r.Body = []byte(strings.ReplaceAll(string(r.Body), "AQVNwrong-key-that-is-not-ours", c.secret.Reveal()))
			srv.Handle(completionPath, r)
			_, err := c.Complete(t.Context(), hello)
			if err == nil || strings.Contains(err.Error(), c.secret.Reveal()) || !strings.Contains(err.Error(), "Unknown api key '[redacted]'") {
				t.Fatalf("err = %v, want the echoed credential redacted", err)
			}
		})
	}
}
