package review

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
)

// BenchmarkEnqueue is the commit a critical call waits for before its 202, with many calls
// at once: on SQLite, the calls that arrive together share one transaction synced to disk.
func BenchmarkEnqueue(b *testing.B) {
	for _, o := range []struct {
		name string
		open func(b *testing.B) Store
	}{
		{"memory", func(b *testing.B) Store { return NewMemory(nil) }},
		{"sqlite", func(b *testing.B) Store {
			s, err := OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "afloat.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}},
	} {
		b.Run(o.name, func(b *testing.B) {
			s := o.open(b)
			it := modItem("acme", "a message of a usual length for a moderation call, some forty words long")
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(16) // an outage: many critical calls queue at once
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Enqueue(ctx, it); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if sq, ok := s.(*SQLite); ok && sq.commits.Load() > 0 {
				b.ReportMetric(float64(b.N)/float64(sq.commits.Load()), "items/commit")
			}
		})
	}
}

// BenchmarkSQLiteWorkItem is an operator's claim and resolve of one item.
func BenchmarkSQLiteWorkItem(b *testing.B) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(b.TempDir(), "afloat.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := make([]string, 0, 1024)
	answer := json.RawMessage(`{"allowed":false}`)
	b.ReportAllocs()
	for b.Loop() {
		if len(ids) == 0 {
			b.StopTimer()
			for range cap(ids) {
				id, err := s.Enqueue(ctx, modItem("acme", "x"))
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
			}
			b.StartTimer()
		}
		id := ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		if _, err := s.Claim(ctx, id, "alice"); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Resolve(ctx, id, "alice", answer); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCursor: whatever cursor a caller sends, List answers a page or ErrInvalid, never
// anything else.
func FuzzCursor(f *testing.F) {
	s := NewMemory(nil)
	for i := range 3 {
		if _, err := s.Enqueue(context.Background(), modItem("acme", string(rune('a'+i)))); err != nil {
			f.Fatal(err)
		}
	}
	page, err := s.List(context.Background(), Filter{Limit: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(page.Next)
	f.Add("")
	f.Add("MTIzL3J2Xw")
	f.Fuzz(func(t *testing.T, cursor string) {
		_, err := s.List(context.Background(), Filter{Cursor: cursor})
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("cursor %q: %v", cursor, err)
		}
	})
}
