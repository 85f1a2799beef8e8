package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/afloat-dev/afloat"
)

// seedFixtures adds every recorded body of testdata/ whose name has prefix to f's corpus.
func seedFixtures(f *testing.F, prefix string) {
	names, _ := filepath.Glob(filepath.Join("testdata", prefix+"*.http"))
	if len(names) == 0 {
		f.Fatalf("no fixtures %s*", prefix)
	}
	for _, n := range names {
		f.Add(read(f, filepath.Base(n)).Body)
	}
}

// FuzzDecodeResponse feeds arbitrary bodies to the decoders of a 200 and of an error: they
// must not panic, and what they accept must keep the canonical promises.
func FuzzDecodeResponse(f *testing.F) {
	seedFixtures(f, "msg_")
	seedFixtures(f, "err_")
	c, err := New(Config{Name: "claude", APIKey: testKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, answer := range []string{"", "triage"} {
			resp, err := decodeResponse(body, answer)
			if err != nil {
				continue
			}
			for _, tc := range resp.ToolCalls {
				var obj map[string]any
				if json.Unmarshal(tc.Arguments, &obj) != nil {
					t.Fatalf("accepted arguments that are not an object: %s", tc.Arguments)
				}
			}
		}
		for _, status := range []int{400, 429, 529} {
			pe := c.statusError(status, http.Header{}, body)
			if pe.Status != status || pe.Provider != "claude" || len(pe.Error()) > 600 {
				t.Fatalf("statusError(%d) = %v", status, pe)
			}
		}
	})
}

// FuzzStream feeds arbitrary bodies to the stream reader: it must end (io.EOF or a
// *afloat.ProviderError), never panic, and never return arguments that are not an object.
func FuzzStream(f *testing.F) {
	seedFixtures(f, "stream_")
	f.Fuzz(func(t *testing.T, body []byte) {
		s := streamOf(string(body), "triage")
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
