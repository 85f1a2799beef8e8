package httpx

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The upstream connections' small buffers (1 KiB to write, 2 KiB to read) carry a request
// and an answer far larger than them whole: a long prompt and a long answer.
func TestSmallBuffersCarryLargeBodies(t *testing.T) {
	big := bytes.Repeat([]byte("Подробный контекст тикета. "), 10000) // about 450 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(got, big) {
			http.Error(w, "body differs", http.StatusBadRequest)
			return
		}
		_, _ = w.Write(got)
	}))
	defer srv.Close()
	c := NewClient(Timeouts{})
	tr := c.Transport.(*http.Transport)
	if tr.WriteBufferSize != writeBuffer || tr.ReadBufferSize != readBuffer {
		t.Fatalf("buffers %d / %d", tr.WriteBufferSize, tr.ReadBufferSize)
	}
	resp, err := c.Post(srv.URL, "text/plain", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, big) {
		t.Fatalf("status %d, %d bytes back of %d: %v", resp.StatusCode, len(got), len(big), err)
	}
}
