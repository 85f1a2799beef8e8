package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadBodyReadsWhatCame reads bodies whose Content-Length is right, unknown, above the
// presize cap, shorter or longer than what the body holds, and over max_body.
func TestReadBodyReadsWhatCame(t *testing.T) {
	long := strings.Repeat("x", presizeMax+10)
	for _, c := range []struct {
		name   string
		body   string
		length int64
	}{
		{"exact", `{"input": {"message": "hello"}}`, -2}, // -2: as the body says
		{"unknown length", `{"input": {}}`, -1},
		{"over the presize cap", long, -2},
		{"longer than declared", "0123456789", 4},
		{"shorter than declared", "0123", 10},
		{"empty", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
			if c.length != -2 {
				r.ContentLength = c.length
			}
			got, err := readBody(r)
			if err != nil || string(got) != c.body {
				t.Fatalf("read %d bytes (%v), want the %d of the body", len(got), err, len(c.body))
			}
		})
	}
	t.Run("over max_body", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 100)))
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 50)
		_, err := readBody(r)
		var mbe *http.MaxBytesError
		if !errors.As(err, &mbe) {
			t.Fatalf("err %v, want the MaxBytesError", err)
		}
	})
}

// TestReadBodyAllocatesOnce holds an 8 KiB task call with its Content-Length to one buffer
// (io.ReadAll took five, 20 KB for 8).
func TestReadBodyAllocatesOnce(t *testing.T) {
	rd := bytes.NewReader(longTicket)
	r := httptest.NewRequest("POST", "/", rd)
	r.Body = io.NopCloser(rd)
	allocs := testing.AllocsPerRun(100, func() {
		rd.Reset(longTicket)
		if b, err := readBody(r); err != nil || len(b) != len(longTicket) {
			t.Fatal(len(b), err)
		}
	})
	if allocs != 1 {
		t.Errorf("%v allocations a body, want 1", allocs)
	}
}
