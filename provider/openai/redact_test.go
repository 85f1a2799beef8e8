package openai

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

// TestHeaderValuesRedacted: a configured header's value (Azure OpenAI's api-key, a proxy's
// key) is a credential like the API key: when a server echoes it, no error quotes it, in an
// error body of either shape, a refusal or a stream's error event.
func TestHeaderValuesRedacted(t *testing.T) {
	const (
		azureKey = "azure-0f3c9e1b7d5a4e2c"
		proxyKey = "proxy-7b1d9e3f5a"
	)
	tests := []struct {
		name   string
		status int
		body   string
		stream bool
		has    string
	}{
		{"json error", 401, `{"error":{"message":"Access denied: api-key %s or %s is invalid.","type":"invalid_request_error","code":"401"}}`, false, "Access denied: api-key [redacted] or [redacted]"},
		{"proxy page", 502, `<html>upstream refused key=%s proxy=%s</html>`, false, "unexpected body: <html>upstream refused key=[redacted] proxy=[redacted]"},
		{"refusal", 400, `{"error":{"message":"filtered for %s / %s","type":"invalid_request_error","code":"content_filter"}}`, false, "filtered for [redacted] / [redacted]"},
		{"stream error event", 200, "data: {\"error\":{\"message\":\"key %s, proxy %s\"}}\n\n", true, "key [redacted], proxy [redacted]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Api-Key") != azureKey || r.Header.Get("X-Proxy-Key") != proxyKey {
					t.Errorf("headers not sent: %v", r.Header)
				}
				ct := "application/json"
				if tc.stream {
					ct = "text/event-stream"
				} else if strings.HasPrefix(tc.body, "<") {
					ct = "text/html"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, tc.body, r.Header.Get("Api-Key"), r.Header.Get("X-Proxy-Key"))
			}))
			defer srv.Close()
			c := newClient(t, srv.URL, func(cfg *Config) {
				cfg.Headers = map[string]string{"api-key": azureKey, "X-Proxy-Key": proxyKey}
			})
			req := &afloat.Request{Messages: []afloat.Message{{Role: "user", Content: "hi"}}}
			var err error
			if tc.stream {
				s, serr := c.Stream(t.Context(), req)
				if err = serr; err == nil {
					defer s.Close()
					for err == nil {
						_, err = s.Recv()
					}
				}
			} else {
				_, err = c.Complete(t.Context(), req)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), azureKey) || strings.Contains(err.Error(), proxyKey) {
				t.Errorf("error quotes a header value: %v", err)
			}
			if !strings.Contains(err.Error(), tc.has) {
				t.Errorf("error %q does not hold %q", err, tc.has)
			}
		})
	}
}
