package gigachat

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

// FuzzDecode feeds arbitrary bodies to the decoders of a chat, an error and a token
// response's error: no panic, and accepted arguments are objects.
func FuzzDecode(f *testing.F) {
	seedFixtures(f, "chat_")
	seedFixtures(f, "err_")
	seedFixtures(f, "oauth_")
	c, err := New(Config{Name: "gigachat-pro", AuthKey: testKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if resp, err := decodeResponse(body); err == nil {
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
			if pe := c.tokenError(status, http.Header{}, body); pe.Status != status || len(pe.Error()) > 600 {
				t.Fatalf("tokenError(%d) = %v", status, pe)
			}
		}
	})
}

// FuzzStream: the stream reader ends on any body, with io.EOF or a *afloat.ProviderError.
func FuzzStream(f *testing.F) {
	seedFixtures(f, "stream_")
	f.Fuzz(func(t *testing.T, body []byte) {
		s := streamOf(string(body))
		for range 10000 {
			ch, err := s.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("end = %v (%T), want a *afloat.ProviderError", err, err)
				}
				return
			}
			for _, tc := range ch.ToolCalls {
				var obj map[string]any
				if json.Unmarshal(tc.Arguments, &obj) != nil {
					t.Fatalf("arguments that are not an object: %s", tc.Arguments)
				}
			}
		}
		t.Fatal("stream never ended")
	})
}
