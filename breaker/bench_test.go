package breaker

import (
	"context"
	"testing"
	"time"
)

func benchBreaker(b *testing.B, open bool) *Breaker {
	b.Helper()
	br, err := New("p", Config{Recovery: time.Hour, MaxRecovery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if open {
		if err := br.Force(context.Background(), StateOpen); err != nil {
			b.Fatal(err)
		}
	}
	return br
}

func BenchmarkAllowOpen(b *testing.B) {
	br := benchBreaker(b, true)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(ctx); err != ErrOpen {
			b.Fatalf("Allow = %v, want ErrOpen", err)
		}
	}
}

func BenchmarkAllowDoneClosed(b *testing.B) {
	br := benchBreaker(b, false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := br.Allow(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Done(ctx, nil)
	}
}

func BenchmarkAllowOpenParallel(b *testing.B) {
	br := benchBreaker(b, true)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := br.Allow(ctx); err != ErrOpen {
				b.Errorf("Allow = %v, want ErrOpen", err)
				return
			}
		}
	})
}

func BenchmarkAllowDoneClosedParallel(b *testing.B) {
	br := benchBreaker(b, false)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := br.Allow(ctx)
			if err != nil {
				b.Errorf("Allow: %v", err)
				return
			}
			p.Done(ctx, nil)
		}
	})
}
