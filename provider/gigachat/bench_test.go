package gigachat

import (
	"io"
	"testing"
)

// BenchmarkComplete is one whole call over loopback with the shared token: after the first
// call, no token exchange.
func BenchmarkComplete(b *testing.B) {
	srv := server(b, "chat_ok.http")
	c := newClient(b, srv, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(b.Context(), hello); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(srv.Requests(authPath)); n != 1 {
		b.Fatalf("%d token exchanges, want 1", n)
	}
}

func BenchmarkStreamRecv(b *testing.B) {
	body := string(read(b, "stream_ok.http").Body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s := streamOf(body)
		for {
			if _, err := s.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}
