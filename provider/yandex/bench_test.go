package yandex

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// BenchmarkStreamRecv reads a 200-line cumulative stream (an answer of ~2 KB, each line
// holding the whole text so far) and turns it into deltas.
func BenchmarkStreamRecv(b *testing.B) {
	var body strings.Builder
	text := ""
	for i := range 200 {
		text += "слово "
		status := "ALTERNATIVE_STATUS_PARTIAL"
		if i == 199 {
			status = "ALTERNATIVE_STATUS_FINAL"
		}
		fmt.Fprintf(&body, `{"result":{"alternatives":[{"message":{"role":"assistant","text":%q},"status":%q}],"usage":{"inputTextTokens":"19","completionTokens":"%d"}}}`+"\n", text, status, i+1)
	}
	raw := body.String()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		s := streamOf(raw)
		for {
			if _, err := s.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkComplete is one whole call over loopback HTTP/1.1 with keep-alive.
func BenchmarkComplete(b *testing.B) {
	srv := replay(b, "completion_ok.http")
	c := newClient(b, srv.URL, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(b.Context(), hello); err != nil {
			b.Fatal(err)
		}
	}
}
