package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
	"github.com/jonboulle/clockwork"
)

// fixtureNow is the fake clock's time for err_429_rate_limit_date.http, 45s before its date.
var fixtureNow = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

var hello = &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hello"}}}

func TestCompleteErrorClasses(t *testing.T) {
	tests := []struct {
		fixture    string
		status     int
		kind       afloat.Kind
		code       string
		retryAfter time.Duration
		transient  bool
		errHas     string
	}{
		{"err_400_invalid_request.http", 400, afloat.Contract, "invalid_request_error", 0, false, "additionalProperties"},
		{"err_400_vllm_tool_parser.http", 400, afloat.Contract, "BadRequestError", 0, false, "--tool-call-parser"},
		{"err_400_content_policy.http", 400, afloat.Refused, "content_policy_violation", 0, false, "rejected as a result of our safety system"},
		{"err_400_azure_content_filter.http", 400, afloat.Refused, "content_filter", 0, false, "content management policy"},
		{"err_401_invalid_api_key.http", 401, afloat.Unusable, "invalid_api_key", 0, false, "Incorrect API key"},
		{"err_402_openrouter.http", 402, afloat.Unusable, "402", 0, false, "Insufficient credits"},
		{"err_403_region.http", 403, afloat.Unusable, "unsupported_country_region_territory", 0, false, "not supported"},
		{"err_404_model_not_found.http", 404, afloat.Contract, "model_not_found", 0, false, "gpt-5-turbo"},
		{"err_404_ollama.http", 404, afloat.Contract, "", 0, false, `model "t-lite" not found`},
		{"err_408_timeout.http", 408, afloat.Unavailable, "", 0, true, "unexpected body: request timed out"},
		{"err_409_conflict.http", 409, afloat.Contract, "invalid_request_error", 0, false, "Conflict"},
		{"err_413_too_large.http", 413, afloat.Contract, "rate_limit_exceeded", 0, false, "Request too large"},
		{"err_422_vllm_validation.http", 422, afloat.Contract, "", 0, false, "Field required"},
		{"err_429_rate_limit.http", 429, afloat.Throttled, "rate_limit_exceeded", 20 * time.Second, true, "Rate limit reached"},
		{"err_429_rate_limit_ms.http", 429, afloat.Throttled, "rate_limit_exceeded", 1500 * time.Millisecond, true, "1.5s"},
		{"err_429_rate_limit_date.http", 429, afloat.Throttled, "rate_limit_exceeded", 45 * time.Second, true, "Rate limit"},
		{"err_429_insufficient_quota.http", 429, afloat.Unusable, "insufficient_quota", 0, false, "exceeded your current quota"},
		{"err_500_server_error.http", 500, afloat.Unavailable, "server_error", 0, true, "Sorry about that"},
		{"err_500_ollama.http", 500, afloat.Unavailable, "", 0, true, "llama runner process has terminated"},
		{"err_502_html.http", 502, afloat.Unavailable, "", 0, true, "unexpected body: <html> <head><title>502 Bad Gateway"},
		{"err_503_overloaded.http", 503, afloat.Unavailable, "server_is_overloaded", 0, true, "overloaded"},
		{"err_503_llamacpp_loading.http", 503, afloat.Unavailable, "unavailable_error", 0, true, "Loading model"},
		{"err_504_empty.http", 504, afloat.Unavailable, "", 0, true, ""},
		{"err_529_overloaded.http", 529, afloat.Unavailable, "overloaded_error", 0, false, "Overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := replay(t, tt.fixture)
			c := newClient(t, srv.URL, func(c *Config) { c.Clock = clockwork.NewFakeClockAt(fixtureNow) })
			for _, call := range fixture.Calls(t.Context(), c, hello) {
				fixture.CheckError(t, call.Name, call.Do(), fixture.WantError{Provider: "t-lite", Status: tt.status, Kind: tt.kind,
					Code: tt.code, RetryAfter: tt.retryAfter, Transient: tt.transient, Has: tt.errHas})
			}
		})
	}
}

func TestQuote(t *testing.T) {
	c := bareClient()
	tests := []struct {
		name, in, want string
	}{
		{"folds space", "a\n\t b", "a b"},
		{"redacts key", "bad key " + testKey + ".", "bad key [redacted]."},
		{"truncates at a rune", strings.Repeat("я", 150), strings.Repeat("я", 100) + "…"},
		{"repairs utf-8", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.quote(tt.in); got != tt.want {
				t.Errorf("quote = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorsNeverHoldTheKey(t *testing.T) {
	fixtures, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, f := range fixtures {
		if !strings.HasSuffix(f.Name(), ".http") {
			continue
		}
		t.Run(f.Name(), func(t *testing.T) {
			srv := replay(t, f.Name())
			c := newClient(t, srv.URL, nil)
			var errs []error
			if _, err := c.Complete(t.Context(), hello); err != nil {
				errs = append(errs, err)
			}
			if s, err := c.Stream(t.Context(), hello); err != nil {
				errs = append(errs, err)
			} else {
				for {
					if _, err := s.Recv(); err != nil {
						errs = append(errs, err)
						break
					}
				}
				s.Close()
			}
			for _, err := range errs {
				checked++
				if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "0123456789abcdef") {
					t.Errorf("error text holds the key: %v", err)
				}
			}
		})
	}
	if checked < 20 {
		t.Errorf("checked %d errors, want every error fixture", checked)
	}
}

// hangingServer accepts a request and answers nothing until the client gives up or the test
// ends; with a body it sends the headers and the body first, then hangs.
func hangingServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if body != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte(body))
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv
}

func TestTransportFailures(t *testing.T) {
	refusedURL := fixture.ClosedURL(t)
	reset := fixture.ResetServer(t)
	hang := hangingServer(t, "")

	tests := []struct {
		name      string
		url       string
		deadline  time.Duration
		cause     error
		timeout   bool
		transient bool
	}{
		{"connection refused", refusedURL, 0, syscall.ECONNREFUSED, false, false},
		{"connection reset", reset.URL, 0, syscall.ECONNRESET, false, true},
		{"hang cut by the deadline", hang.URL, 100 * time.Millisecond, context.DeadlineExceeded, true, false},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.name + map[bool]string{false: "/complete", true: "/stream"}[stream]
			t.Run(name, func(t *testing.T) {
				c := newClient(t, tt.url, nil)
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				start := time.Now()
				var err error
				if stream {
					_, err = c.Stream(ctx, hello)
				} else {
					_, err = c.Complete(ctx, hello)
				}
				if el := time.Since(start); el > 5*time.Second {
					t.Errorf("took %v", el)
				}
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want *afloat.ProviderError", err)
				}
				if pe.Kind != afloat.Unavailable || pe.Status != 0 || pe.Provider != "t-lite" {
					t.Errorf("got %+v, want an unavailable transport error of t-lite", pe)
				}
				if !errors.Is(err, tt.cause) {
					t.Errorf("err = %v, want %v in its chain", err, tt.cause)
				}
				if pe.Timeout != tt.timeout || afloat.IsTimeout(err) != tt.timeout {
					t.Errorf("Timeout = %v, want %v", pe.Timeout, tt.timeout)
				}
				if pe.Transient() != tt.transient {
					t.Errorf("Transient = %v, want %v", pe.Transient(), tt.transient)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Errorf("error text holds the key: %v", err)
				}
			})
		}
	}
}

func TestCancelledContextIsATimeout(t *testing.T) {
	srv := hangingServer(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := newClient(t, srv.URL, nil).Complete(ctx, hello)
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || !pe.Timeout || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want an unavailable timeout wrapping context.Canceled", err)
	}
}
