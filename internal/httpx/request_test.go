package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/afloat-dev/afloat"
)

func TestAbsURL(t *testing.T) {
	tests := []struct {
		raw, def, want string
		ok             bool
	}{
		{"", "https://api.example.com/v1", "https://api.example.com/v1", true},
		{"http://127.0.0.1:8000/v1/", "https://x", "http://127.0.0.1:8000/v1/", true},
		{"/v1", "https://x", "", false},
		{"ftp://example.com", "https://x", "", false},
		{"http://[::1", "https://x", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := AbsURL(tt.raw, tt.def)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("AbsURL(%q) = %q, %v; want %q, ok %v", tt.raw, got, err, tt.want, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "is not an absolute http(s) url") {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestNewJSONRequest(t *testing.T) {
	for _, stream := range []bool{false, true} {
		req, err := NewJSONRequest(t.Context(), "http://127.0.0.1/x", []byte(`{}`), stream)
		if err != nil {
			t.Fatal(err)
		}
		accept := map[bool]string{false: "application/json", true: "text/event-stream"}[stream]
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || req.Header.Get("Accept") != accept {
			t.Errorf("stream %v: %s %v", stream, req.Method, req.Header)
		}
	}
	if _, err := NewJSONRequest(t.Context(), "http://[::1", nil, false); err == nil {
		t.Error("a bad url made a request")
	}
}

// closeCounter records whether a body was closed.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

func TestCheckStatus(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		passes  bool
		headLen int // of the body statusError sees
	}{
		{"200", 200, "answer", true, 0},
		{"204", 204, "", true, 0},
		{"429", 429, "slow down", false, len("slow down")},
		{"huge error body", 502, strings.Repeat("x", MaxErrorBody+10), false, MaxErrorBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &closeCounter{Reader: strings.NewReader(tt.body)}
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{"Retry-After": {"3"}}, Body: body}
			var seen []byte
			got, err := CheckStatus(resp, func(status int, h http.Header, b []byte) *afloat.ProviderError {
				seen = b
				return &afloat.ProviderError{Provider: "p", Status: status, RetryAfter: RetryAfter(h, time.Time{})}
			})
			if tt.passes {
				if got != resp || err != nil || body.closed != 0 {
					t.Fatalf("got %v, %v, closed %d; want the open response", got, err, body.closed)
				}
				return
			}
			var pe *afloat.ProviderError
			if got != nil || !errors.As(err, &pe) || pe.Status != tt.status || pe.RetryAfter == 0 {
				t.Fatalf("got %v, %v; want the status error", got, err)
			}
			if len(seen) != tt.headLen || body.closed != 1 {
				t.Errorf("statusError saw %d bytes, body closed %d times; want %d, 1", len(seen), body.closed, tt.headLen)
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	tests := []struct {
		name   string
		body   io.Reader
		kind   afloat.Kind
		status int
		errHas string // "" means the body is read
	}{
		{name: "whole", body: strings.NewReader("answer")},
		{name: "too long", body: strings.NewReader(strings.Repeat("x", MaxBody+1)), kind: afloat.Unavailable, status: 200,
			errHas: "response body exceeds 16777216 bytes"},
		{name: "read fails", body: iotest.ErrReader(io.ErrUnexpectedEOF), kind: afloat.Unavailable, status: 0,
			errHas: "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &closeCounter{Reader: tt.body}
			got, err := ReadBody("p", &http.Response{StatusCode: 200, Body: body})
			if body.closed != 1 {
				t.Errorf("body closed %d times, want 1", body.closed)
			}
			if tt.errHas == "" {
				if err != nil || string(got) != "answer" {
					t.Fatalf("got %q, %v", got, err)
				}
				return
			}
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != tt.status || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("err = %v, want a %s error of status %d saying %q", err, tt.kind, tt.status, tt.errHas)
			}
		})
	}
}

func TestEncodeBody(t *testing.T) {
	got, err := EncodeBody(map[string]string{"content": "<b>&</b>"})
	if err != nil || string(got) != `{"content":"<b>&</b>"}`+"\n" {
		t.Errorf("EncodeBody = %q, %v; want the text unescaped", got, err)
	}
	if _, err := EncodeBody(json.RawMessage(`{"type":`)); err == nil || !strings.Contains(err.Error(), "encode request") {
		t.Errorf("err = %v, want an encode request error", err)
	}
}
