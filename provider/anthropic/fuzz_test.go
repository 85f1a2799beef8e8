package anthropic

import (
	"net/http"
	"testing"

	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// FuzzDecodeResponse feeds arbitrary bodies to the decoders of a 200 and of an error: they
// must not panic, and what they accept must keep the canonical promises.
func FuzzDecodeResponse(f *testing.F) {
	fixture.Seed(f, "testdata/msg_*.http")
	fixture.Seed(f, "testdata/err_*.http")
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
			fixture.CheckObjects(t, resp.ToolCalls)
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
	fixture.Seed(f, "testdata/stream_*.http")
	f.Fuzz(func(t *testing.T, body []byte) {
		fixture.Exhaust(t, streamOf(string(body), "triage"), 10000)
	})
}
