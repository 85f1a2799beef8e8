package review_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/afloat-dev/afloat/review"
)

// An item is queued (durably, before the caller's 202), claimed by one operator, refused to
// another, and resolved; the caller then reads the answer.
func ExampleSQLite() {
	dir, err := os.MkdirTemp("", "afloat-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := review.OpenSQLite(ctx, filepath.Join(dir, "afloat.db"), review.Options{ClaimTTL: 15 * time.Minute})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	id, err := q.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: json.RawMessage(`{"text": "hi"}`)})
	if err != nil {
		panic(err) // the gateway answers 503: never fail open
	}
	if _, err := q.Claim(ctx, id, "alice"); err != nil {
		panic(err)
	}
	_, err = q.Claim(ctx, id, "bob")
	fmt.Println(errors.Is(err, review.ErrConflict))
	if _, err := q.Resolve(ctx, id, "alice", json.RawMessage(`{"allowed": true}`)); err != nil {
		panic(err)
	}
	it, err := q.Get(ctx, "acme", id)
	if err != nil {
		panic(err)
	}
	fmt.Println(it.Status, it.Operator, string(it.Result))
	// Output:
	// true
	// resolved alice {"allowed":true}
}
