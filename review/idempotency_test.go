package review

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
)

// TestStoreIdempotencyMismatch: a key reused with another input is refused by the store
// itself with ErrIdempotencyMismatch and queues nothing; the same input with other spacing or
// key order is the same call and gets the first id.
func TestStoreIdempotencyMismatch(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		s := o.open(t, Options{})
		keyed := func(input string) *Item {
			it := modItem("acme", "")
			it.Input, it.IdempotencyKey = json.RawMessage(input), "order-42"
			return it
		}
		first := enqueue(t, s, keyed(`{"text": "hello", "lang": "en"}`))
		tests := []struct {
			name, input string
			mismatch    bool
		}{
			{"the same input", `{"text": "hello", "lang": "en"}`, false},
			{"other spacing and key order", `{"lang":"en","text":"hello"}`, false},
			{"another text", `{"text": "goodbye", "lang": "en"}`, true},
			{"a number written otherwise", `{"text": "hello", "lang": "en", "n": 1.0}`, true},
			{"no input", ``, true},
		}
		for _, tc := range tests {
			id, err := s.Enqueue(context.Background(), keyed(tc.input))
			switch {
			case tc.mismatch && !errors.Is(err, ErrIdempotencyMismatch):
				t.Errorf("%s: id %q, err %v; want ErrIdempotencyMismatch", tc.name, id, err)
			case !tc.mismatch && (err != nil || id != first):
				t.Errorf("%s: id %q, err %v; want the first item %s", tc.name, id, err, first)
			}
		}
		page, err := s.List(context.Background(), Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 1 {
			t.Errorf("%d items queued, want 1", len(page.Items))
		}
		if sq, ok := s.(*SQLite); ok && sq.Health() != nil {
			t.Errorf("a refused key made the store unhealthy: %v", sq.Health())
		}
	})
}

// TestSQLiteIdempotencyMismatchAfterReopen: the input's hash is on disk, so the refusal
// holds after a restart (when the gateway's cache is empty).
func TestSQLiteIdempotencyMismatchAfterReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	s, err := OpenSQLite(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	it := modItem("acme", "first")
	it.IdempotencyKey = "order-42"
	first := enqueue(t, s, it)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSQLite(t, path, Options{})
	other := modItem("acme", "second")
	other.IdempotencyKey = "order-42"
	if id, err := s.Enqueue(ctx, other); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Errorf("another input after reopen: id %q, err %v; want ErrIdempotencyMismatch", id, err)
	}
	if id := enqueue(t, s, it); id != first {
		t.Errorf("the same input after reopen: id %s, want %s", id, first)
	}
}

// TestSQLiteMigratesKeysOfVersion1: a database of schema version 1 (no input hashes) opens at
// the newest version; its keyed items are compared by the hash of their stored input, and
// the depth table counts the items it held.
func TestSQLiteMigratesKeysOfVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	s := openSQLite(t, path, Options{})
	// Roll the file back to version 1 and write an item the way version 1 did.
	for _, q := range []string{
		`DROP INDEX items_due_deliveries`, `ALTER TABLE items DROP COLUMN delivery_state`,
		`ALTER TABLE items DROP COLUMN delivery_attempts`, `ALTER TABLE items DROP COLUMN delivery_last_ns`,
		`ALTER TABLE items DROP COLUMN delivery_last_status`, `ALTER TABLE items DROP COLUMN delivery_last_error`,
		`ALTER TABLE items DROP COLUMN delivery_next_ns`,
		`DROP TRIGGER items_depth_insert`, `DROP TRIGGER items_depth_update`, `DROP TRIGGER items_depth_delete`,
		`DROP TABLE task_depth`, `ALTER TABLE items DROP COLUMN input_hash`, `PRAGMA user_version = 1`,
		`INSERT INTO items (id, task, tenant, idem_key, input, attempts, prompt_versions, status, created_ns)
			VALUES ('rv_old', 'moderation', 'acme', 'order-42', '{"text":"old"}', '[]', '[]', 'pending', 1)`,
		`INSERT INTO items (id, task, tenant, input, attempts, prompt_versions, status, created_ns)
			VALUES ('rv_old2', 'moderation', 'acme', '{"text":"old2"}', '[]', '[]', 'resolved', 2)`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	for range 2 { // the second open finds the schema current
		s = openSQLite(t, path, Options{})
		var version, depth int
		if err := s.db.QueryRowContext(ctx, `SELECT (SELECT unanswered FROM task_depth WHERE task = 'moderation'), user_version FROM pragma_user_version`).Scan(&depth, &version); err != nil {
			t.Fatal(err)
		}
		if version != len(migrations) || depth != 1 {
			t.Errorf("after migration: version %d, depth %d; want %d, 1", version, depth, len(migrations))
		}
		same := &Item{Task: "moderation", Tenant: "acme", IdempotencyKey: "order-42", Input: json.RawMessage(`{ "text": "old" }`)}
		if id, err := s.Enqueue(ctx, same); err != nil || id != "rv_old" {
			t.Errorf("the same input as a version-1 item: %q, %v; want rv_old", id, err)
		}
		other := &Item{Task: "moderation", Tenant: "acme", IdempotencyKey: "order-42", Input: json.RawMessage(`{"text":"new"}`)}
		if id, err := s.Enqueue(ctx, other); !errors.Is(err, ErrIdempotencyMismatch) {
			t.Errorf("another input than a version-1 item: %q, %v; want ErrIdempotencyMismatch", id, err)
		}
		s.Close()
	}
}

// TestStoreQueued: Queued finds the item that holds a key for the same tenant and task, with
// the same input in any spacing; another input is ErrIdempotencyMismatch, and another key,
// tenant or task, or no key at all, is ErrNotFound.
func TestStoreQueued(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		s := o.open(t, Options{})
		ctx := context.Background()
		keyed := func(tenant, key, input string) *Item {
			it := modItem(tenant, "")
			it.Input, it.IdempotencyKey = json.RawMessage(input), key
			return it
		}
		first := enqueue(t, s, keyed("acme", "order-42", `{"text": "hello"}`))
		tests := []struct {
			name string
			item *Item
			want error
		}{
			{"the same input", keyed("acme", "order-42", `{"text":"hello"}`), nil},
			{"another input", keyed("acme", "order-42", `{"text": "goodbye"}`), ErrIdempotencyMismatch},
			{"another key", keyed("acme", "order-43", `{"text": "hello"}`), ErrNotFound},
			{"another tenant", keyed("beta", "order-42", `{"text": "hello"}`), ErrNotFound},
			{"no key", keyed("acme", "", `{"text": "hello"}`), ErrNotFound},
		}
		for _, tc := range tests {
			it, err := s.Queued(ctx, tc.item)
			switch {
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("%s: item %v, err %v; want %v", tc.name, it, err, tc.want)
			case tc.want == nil && (err != nil || it.ID != first || it.Status != StatusPending):
				t.Errorf("%s: item %+v, err %v; want the first item %s, pending", tc.name, it, err, first)
			}
		}
		other := keyed("acme", "order-42", `{"text": "hello"}`)
		other.Task = "triage"
		if _, err := s.Queued(ctx, other); !errors.Is(err, ErrNotFound) {
			t.Errorf("another task: err %v, want ErrNotFound", err)
		}
	})
}
