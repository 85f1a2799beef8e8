package openai

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// FuzzDecodeResponse feeds arbitrary bodies to the decoders of a 200 and of an error
// response: they must not panic, and what they accept must keep the canonical promises.
func FuzzDecodeResponse(f *testing.F) {
	fixture.Seed(f, "testdata/chat_*.http")
	fixture.Seed(f, "testdata/err_*.http")
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":"\"{}\""}}]}}]}`))
	f.Add([]byte(`{"error":{"code":1e999}}`))
	c := bareClient()
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := decodeResponse(body)
		switch {
		case err == nil:
			fixture.CheckObjects(t, resp.ToolCalls)
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
	fixture.Seed(f, "testdata/stream_*.http")
	f.Add([]byte("data: [DONE]"))
	f.Add([]byte("error: {\"code\":500}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := fixture.Exhaust(t, streamOf(string(body)), len(body)+2)
		if err != io.EOF && strings.Contains(err.Error(), testKey) {
			t.Fatal("error text holds the key")
		}
	})
}
