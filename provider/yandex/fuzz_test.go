package yandex

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/afloat-dev/afloat"
)

func seedFixtures(f *testing.F, prefix string) {
	names, _ := filepath.Glob(filepath.Join("testdata", prefix+"*.http"))
	if len(names) == 0 {
		f.Fatalf("no fixtures %s*", prefix)
	}
	for _, n := range names {
		f.Add(read(f, filepath.Base(n)).Body)
	}
}

// FuzzDecode: no panic on any body; accepted arguments are objects.
func FuzzDecode(f *testing.F) {
	seedFixtures(f, "completion_")
	seedFixtures(f, "err_")
	c, err := New(Config{APIKey: testKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if resp, err := decodeResponse(body, modelURI); err == nil {
			for _, tc := range resp.ToolCalls {
				var obj map[string]any
				if json.Unmarshal(tc.Arguments, &obj) != nil {
					t.Fatalf("accepted arguments that are not an object: %s", tc.Arguments)
				}
			}
		}
		for _, status := range []int{400, 429, 503} {
			if pe := c.statusError(status, http.Header{}, body); pe.Status != status || len(pe.Error()) > 600 {
				t.Fatalf("statusError(%d) = %v", status, pe)
			}
		}
	})
}

// FuzzStream: the reader ends on any body with io.EOF or a *afloat.ProviderError, and the
// deltas it returns always add up to the last text it accepted.
func FuzzStream(f *testing.F) {
	seedFixtures(f, "stream_")
	f.Fuzz(func(t *testing.T, body []byte) {
		s := streamOf(string(body))
		var text string
		for range 10000 {
			ch, err := s.Recv()
			if err == io.EOF {
				if text != s.text {
					t.Fatalf("deltas add up to %q, the stream's text is %q", text, s.text)
				}
				return
			}
			if err != nil {
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("end = %v (%T), want a *afloat.ProviderError", err, err)
				}
				return
			}
			text += ch.Delta
		}
		t.Fatal("stream never ended")
	})
}
