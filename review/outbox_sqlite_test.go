package review

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestSQLiteOutboxSurvivesReopen: a delivery queued by an answer, and each attempt recorded,
// are in the file: a store opened again finds the pending delivery due, as it was left. A
// store opened without the outbox gives none, and keeps them for a later open with it.
func TestSQLiteOutboxSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	clk := clockwork.NewFakeClockAt(t0)
	s := openSQLite(t, path, Options{Clock: clk, Outbox: true})
	a := enqueue(t, s, modItem("acme", "a"))
	b := enqueue(t, s, modItem("acme", "b"))
	must(t)(s.Resolve(ctx, a, "alice", json.RawMessage(`{"allowed":true}`)))
	must(t)(s.Reject(ctx, b, "alice", "spam"))
	retry := Delivery{State: DeliveryPending, Attempts: 1, LastAttempt: t0, LastStatus: 503,
		LastError: "Service Unavailable", NextAt: t0.Add(2 * time.Second)}
	if err := s.RecordDelivery(ctx, a, retry); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	off := openSQLite(t, path, Options{Clock: clk})
	if ids := dueIDs(t, off, t0.Add(time.Hour), 10); len(ids) != 0 {
		t.Errorf("due without the outbox: %v, want none", ids)
	}
	if err := off.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSQLite(t, path, Options{Clock: clk, Outbox: true})
	if got, err := s.Lookup(ctx, a); err != nil || !sameDelivery(got.Delivery, retry) {
		t.Fatalf("after reopen: %+v, %v; want delivery %+v", got, err, retry)
	}
	if got := dueIDs(t, s, t0, 10); !slices.Equal(got, []string{b}) {
		t.Errorf("due at once after reopen: %v, want [b]", got)
	}
	if got := dueIDs(t, s, t0.Add(2*time.Second), 10); !slices.Equal(got, []string{b, a}) {
		t.Errorf("due once a's retry is: %v, want [b a]", got)
	}
}
