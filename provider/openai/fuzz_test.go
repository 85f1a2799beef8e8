package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
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
		_, _, body := readFixture(f, filepath.Base(n))
		f.Add(body)
	}
}

// FuzzDecodeResponse feeds arbitrary bodies to the decoders of a 200 and of an error
// response: they must not panic, and what they accept must keep the canonical promises.
func FuzzDecodeResponse(f *testing.F) {
	seedFixtures(f, "chat_")
	seedFixtures(f, "err_")
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":"\"{}\""}}]}}]}`))
	f.Add([]byte(`{"error":{"code":1e999}}`))
	c := bareClient()
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := decodeResponse(body)
		switch {
		case err == nil:
			for _, tc := range resp.ToolCalls {
				var obj map[string]any
				if json.Unmarshal(tc.Arguments, &obj) != nil {
					t.Fatalf("accepted arguments that are not an object: %s", tc.Arguments)
				}
			}
		case resp != nil:
			t.Fatal("a response returned with an error")
		}
		for _, status := range []int{400, 429, 503} {
			pe := c.statusError(status, http.Header{}, body)
			if pe.Status != status || pe.Provider != "t-lite" {
				t.Fatalf("statusError lost the status or provider: %+v", pe)
			}
			if len(pe.Error()) > 700 {
				t.Fatalf("error text is %d bytes", len(pe.Error()))
			}
		}
	})
}

// FuzzStream feeds arbitrary bodies to the SSE reader: it must not panic, must end, and must
// end with io.EOF or a *afloat.ProviderError.
func FuzzStream(f *testing.F) {
	seedFixtures(f, "stream_")
	f.Add([]byte("data: [DONE]"))
	f.Add([]byte("error: {\"code\":500}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := streamOf(string(body))
		for range len(body) + 2 {
			ch, err := s.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("end = %v (%T), want a *afloat.ProviderError", err, err)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Fatal("error text holds the key")
				}
				return
			}
			for _, tc := range ch.ToolCalls {
				if !json.Valid(tc.Arguments) {
					t.Fatalf("invalid arguments %s", tc.Arguments)
				}
			}
		}
		t.Fatal("the stream did not end")
	})
}
