package review

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestStoreRelease: the claiming operator gives the item back, pending for anyone; another
// operator's claim and an answered item are conflicts; a pending or lapsed item is left as
// it is; an unknown id is ErrNotFound and an empty operator ErrInvalid. Every store alike.
func TestStoreRelease(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		s := o.open(t, Options{Clock: clk, ClaimTTL: 10 * time.Minute})
		id := enqueue(t, s, modItem("acme", "x"))

		if err := s.Release(ctx, "rv_nope", "alice"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("release of an unknown id: %v, want ErrNotFound", err)
		}
		if err := s.Release(ctx, id, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("release without an operator: %v, want ErrInvalid", err)
		}
		if err := s.Release(ctx, id, "alice"); err != nil {
			t.Fatalf("release of a pending item: %v, want none", err)
		}
		if _, err := s.Claim(ctx, id, "alice"); err != nil {
			t.Fatal(err)
		}
		var ce *ConflictError
		if err := s.Release(ctx, id, "bob"); !errors.As(err, &ce) || ce.Operator != "alice" || ce.Status != StatusClaimed {
			t.Fatalf("release by bob of alice's claim: %v, want a conflict naming alice", err)
		}
		if err := s.Release(ctx, id, "alice"); err != nil {
			t.Fatalf("release by alice: %v", err)
		}
		it, err := s.Lookup(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if it.Status != StatusPending || it.Operator != "" || !it.ClaimedAt.IsZero() || !it.ClaimExpiresAt.IsZero() {
			t.Fatalf("after release: %+v, want pending with no claim", it)
		}
		assertCounts(t, s, map[Status]int{StatusPending: 1, StatusClaimed: 0})
		if it, err := s.Claim(ctx, id, "bob"); err != nil || it.Operator != "bob" {
			t.Fatalf("claim by bob after the release: %+v, %v", it, err)
		}

		// A lapsed claim is pending already: releasing it changes nothing.
		clk.Advance(10 * time.Minute)
		if err := s.Release(ctx, id, "bob"); err != nil {
			t.Fatalf("release of a lapsed claim: %v", err)
		}
		if _, err := s.Resolve(ctx, id, "carol", json.RawMessage(`{"allowed":true}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, id, "carol"); !errors.As(err, &ce) || ce.Status != StatusResolved {
			t.Fatalf("release of a resolved item: %v, want a conflict", err)
		}
		if it, _ := s.Lookup(ctx, id); it.Status != StatusResolved || it.Operator != "carol" {
			t.Fatalf("a refused release changed the item: %+v", it)
		}
	})
}
