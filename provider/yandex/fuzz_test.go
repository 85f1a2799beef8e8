package yandex

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// FuzzDecode: no panic on any body; accepted arguments are objects.
func FuzzDecode(f *testing.F) {
	fixture.Seed(f, "testdata/completion_*.http")
	fixture.Seed(f, "testdata/err_*.http")
	c, err := New(Config{APIKey: testKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if resp, err := decodeResponse(body, modelURI); err == nil {
			fixture.CheckObjects(t, resp.ToolCalls)
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
	fixture.Seed(f, "testdata/stream_*.http")
	f.Fuzz(func(t *testing.T, body []byte) {
		s := streamOf(string(body))
		chunks, err := fixture.Exhaust(t, s, 10000)
		if text := strings.Join(fixture.Assemble(chunks).Deltas, ""); err == io.EOF && text != s.text {
			t.Fatalf("deltas add up to %q, the stream's text is %q", text, s.text)
		}
	})
}
