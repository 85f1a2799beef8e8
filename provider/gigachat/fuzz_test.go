package gigachat

import (
	"net/http"
	"testing"

	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// FuzzDecode feeds arbitrary bodies to the decoders of a chat, an error and a token
// response's error: no panic, and accepted arguments are objects.
func FuzzDecode(f *testing.F) {
	fixture.Seed(f, "testdata/chat_*.http")
	fixture.Seed(f, "testdata/err_*.http")
	fixture.Seed(f, "testdata/oauth_*.http")
	c, err := New(Config{Name: "gigachat-pro", AuthKey: testKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if resp, err := decodeResponse(body); err == nil {
			fixture.CheckObjects(t, resp.ToolCalls)
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
	fixture.Seed(f, "testdata/stream_*.http")
	f.Fuzz(func(t *testing.T, body []byte) {
		fixture.Exhaust(t, streamOf(string(body)), 10000)
	})
}
