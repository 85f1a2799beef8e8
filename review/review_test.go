package review

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestMemoryEnqueueGet(t *testing.T) {
	ctx := context.Background()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	q := NewMemory(clk)
	id, err := q.Enqueue(ctx, &Item{Task: "moderation", Tenant: "acme", Input: []byte(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "rv_") || len(id) != 29 {
		t.Fatalf("id %q", id)
	}
	it, err := q.Get(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != StatusPending || it.Task != "moderation" || !it.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("item %+v", it)
	}
	if _, err := q.Get(ctx, "globex", id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant got %v, want ErrNotFound", err)
	}
	if _, err := q.Get(ctx, "acme", "rv_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id got %v", err)
	}
}

func TestIDsAreUniqueAndOrdered(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	prev := ""
	for i := range 1000 {
		id := NewID(t0.Add(time.Duration(i) * time.Millisecond))
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
		if id[:13] < prev {
			t.Fatalf("ids not time-ordered: %s after %s", id, prev)
		}
		prev = id[:13]
	}
}

func TestEnqueueOnCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := NewMemory(nil)
	if _, err := q.Enqueue(ctx, &Item{Task: "m"}); err == nil {
		t.Fatal("enqueue on a cancelled context succeeded")
	}
	if q.Len() != 0 {
		t.Fatal("item stored although enqueue failed")
	}
}
