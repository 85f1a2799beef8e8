package anthropic

import (
	"io"
	"testing"
)

func BenchmarkStreamRecv(b *testing.B) {
	body := string(read(b, "stream_tool_use.http").Body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s := streamOf(body, "")
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
	srv := replay(b, "msg_ok.http")
	c := newClient(b, srv.URL, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(b.Context(), hello); err != nil {
			b.Fatal(err)
		}
	}
}
