package review

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/telemetry"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSQLiteReopen: every item, in every state, reads back the same after the store is
// closed and opened again; a repeated idempotency key still finds the first item.
func TestSQLiteReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	clk := clockwork.NewFakeClockAt(t0)
	opts := Options{Clock: clk, ClaimTTL: time.Hour}
	s, err := OpenSQLite(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	keyed := modItem("acme", "keyed")
	keyed.IdempotencyKey = "order-42"
	ids := []string{enqueue(t, s, keyed), enqueue(t, s, modItem("acme", "b")), enqueue(t, s, modItem("globex", "c")), enqueue(t, s, modItem("", "d"))}
	clk.Advance(time.Minute)
	must(t)(s.Claim(ctx, ids[1], "alice"))
	must(t)(s.Resolve(ctx, ids[2], "bob", json.RawMessage(`{"allowed": false, "reason": "insult"}`)))
	must(t)(s.Reject(ctx, ids[3], "bob", "empty text"))
	before := map[string]*Item{}
	for _, id := range ids {
		before[id], err = s.Lookup(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSQLite(t, path, opts)
	for _, id := range ids {
		got, err := s.Lookup(ctx, id)
		if err != nil {
			t.Fatalf("%s after reopen: %v", id, err)
		}
		if !sameItem(got, before[id]) {
			t.Errorf("%s after reopen:\n got %+v\nwant %+v", id, got, before[id])
		}
	}
	again := modItem("acme", "keyed")
	again.IdempotencyKey = "order-42"
	if id := enqueue(t, s, again); id != ids[0] {
		t.Errorf("repeated key after reopen queued %s, want the first item %s", id, ids[0])
	}
}

func sameItem(a, b *Item) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return bytes.Equal(aj, bj)
}

func TestSQLiteMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	for range 2 { // a second open finds the schema current and changes nothing
		s, err := OpenSQLite(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var version int
		if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
			t.Fatal(err)
		}
		if version != len(migrations) {
			t.Fatalf("schema version %d, want %d", version, len(migrations))
		}
		var mode string
		if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("journal mode %q, %v", mode, err)
		}
		var sync int
		if err := s.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
			t.Fatalf("synchronous %d, %v; want 2 (FULL)", sync, err)
		}
		s.Close()
	}
}

// TestSQLiteRefusesToOpen: a file that is not a database, a newer schema, and bad paths fail
// at open with an error that says why.
func TestSQLiteRefusesToOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	s := openSQLite(t, newer, Options{})
	if _, err := s.db.ExecContext(ctx, "PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tests := []struct {
		name, path string
		opts       Options
		want       string
	}{
		{"not a database", garbage, Options{}, "not a database"},
		{"newer schema", newer, Options{}, "schema version 99, newer than this build's"},
		{"folder missing", filepath.Join(dir, "no", "such", "folder", "afloat.db"), Options{}, "unable to open"},
		{"empty path", "", Options{}, "path is empty"},
		{"question mark", filepath.Join(dir, "a?b.db"), Options{}, "holds a '?'"},
		{"negative claim ttl", filepath.Join(dir, "ok.db"), Options{ClaimTTL: -time.Minute}, "claim_ttl:-1m0s"},
	}
	for _, tc := range tests {
		s, err := OpenSQLite(ctx, tc.path, tc.opts)
		if err == nil {
			s.Close()
			t.Errorf("%s: opened", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// TestSQLiteCannotCommit: a full disk and a lock another process holds make writes fail,
// never report success; the store reads unhealthy (Health, Ping, the metric) until a write
// commits again.
func TestSQLiteCannotCommit(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(t *testing.T, s *SQLite) (restore func())
		want   string
		// others: a claim and Ping fail too. The full disk here is max_page_count, which caps
		// the database file but not its WAL: a write that needs no new page still commits.
		others bool
	}{
		{"disk full", fillDisk, "full", false},
		{"locked by another process", lockFile, "locked", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, err := telemetry.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"), Options{Metrics: m, Logger: log, BusyTimeout: 50 * time.Millisecond})
			kept := enqueue(t, s, modItem("acme", "before"))
			restore := tc.break_(t, s)

			big := modItem("acme", strings.Repeat("x", 256<<10))
			if id, err := s.Enqueue(ctx, big); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("enqueue on a broken store: id %q, err %v; want an error saying %q", id, err, tc.want)
			}
			if tc.others {
				if _, err := s.Claim(ctx, kept, "alice"); err == nil || errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
					t.Fatalf("claim on a broken store: %v, want a store error", err)
				}
			}
			if s.Health() == nil {
				t.Fatal("Health is nil after a failed commit")
			}
			if tc.others {
				if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "cannot commit") {
					t.Fatalf("ping on a broken store: %v", err)
				}
			}
			if got := testutil.ToFloat64(m.ReviewStoreHealthy); got != 0 {
				t.Fatalf("afloat_review_store_healthy %v, want 0", got)
			}
			if !strings.Contains(logs.String(), "review store cannot commit") {
				t.Errorf("no log line for the failure: %s", logs.String())
			}
			if page, err := s.List(ctx, Filter{}); err != nil || len(page.Items) != 1 || page.Items[0].ID != kept {
				t.Fatalf("after the failures: %v, %v; want only the first item", page, err)
			}

			restore()
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("ping after the store recovered: %v", err)
			}
			if s.Health() != nil || testutil.ToFloat64(m.ReviewStoreHealthy) != 1 {
				t.Fatalf("still unhealthy after a commit: %v", s.Health())
			}
			enqueue(t, s, big)
		})
	}
}

// fillDisk caps the database at its current size, as a full disk does.
func fillDisk(t *testing.T, s *SQLite) func() {
	ctx := context.Background()
	var pages int
	if err := s.db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "PRAGMA max_page_count = "+strconv.Itoa(pages)); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := s.db.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
			t.Fatal(err)
		}
	}
}

// lockFile takes the database's write lock from another connection, as another process
// would, and holds it until restore.
func lockFile(t *testing.T, s *SQLite) func() {
	ctx := context.Background()
	other, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		other.Close()
	}
}

// TestSQLiteCancelledIsNotUnhealthy: a caller who gives up is no failure of the store.
func TestSQLiteCancelledIsNotUnhealthy(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Enqueue(ctx, modItem("acme", "x")); err == nil {
		t.Fatal("enqueue on a cancelled context succeeded")
	}
	if err := s.Health(); err != nil {
		t.Fatalf("health after a cancelled call: %v", err)
	}
	if page, _ := s.List(context.Background(), Filter{}); len(page.Items) != 0 {
		t.Fatal("item stored although enqueue failed")
	}
}

// TestSQLiteSurvivesRemovedFolder: the store keeps committing when its folder is removed
// while it is open (the demo removes its temporary folder once built).
func TestSQLiteSurvivesRemovedFolder(t *testing.T) {
	dir, err := os.MkdirTemp("", "afloat-review-")
	if err != nil {
		t.Fatal(err)
	}
	s := openSQLite(t, filepath.Join(dir, "afloat.db"), Options{})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		id := enqueue(t, s, modItem("acme", strings.Repeat("y", 4096)+strconv.Itoa(i)))
		must(t)(s.Resolve(context.Background(), id, "alice", json.RawMessage(`{"allowed":true}`)))
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// events collects a store's commit events for a test to wait on.
type events struct{ pending, batch chan int }

func watch(s *SQLite) *events {
	ev := &events{pending: make(chan int, 1024), batch: make(chan int, 1024)}
	s.testHook = func(event string, n int) {
		switch event {
		case "pending":
			ev.pending <- n
		case "batch":
			ev.batch <- n
		}
	}
	return ev
}

// TestSQLiteGroupCommit: the Enqueues that arrive while a commit waits share the next one;
// every item is committed once, and a key repeated inside one commit queues once.
func TestSQLiteGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"), Options{BusyTimeout: 30 * time.Second})
	ev := watch(s)
	restore := lockFile(t, s) // the first commit waits for the lock; the rest pile up
	const n = 64
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			it := modItem("acme", strconv.Itoa(i))
			if i >= n-4 { // one call retried: the same key and input
				it = modItem("acme", "same")
				it.IdempotencyKey = "same"
			}
			id, err := s.Enqueue(ctx, it)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	for range n {
		<-ev.pending
	}
	restore()
	wg.Wait()
	if got := s.commits.Load(); got > 2 {
		t.Errorf("%d commits for %d items queued together, want at most 2", got, n)
	}
	page, err := s.List(ctx, Filter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != n-3 {
		t.Fatalf("%d items stored, want %d", len(page.Items), n-3)
	}
	seen := map[string]bool{}
	for _, id := range ids[:n-4] {
		if seen[id] {
			t.Fatalf("id %s given twice", id)
		}
		seen[id] = true
	}
	for _, id := range ids[n-4:] {
		if id != ids[n-1] || seen[id] {
			t.Fatalf("the repeated key got ids %v", ids[n-4:])
		}
	}
}

// TestSQLiteAbandonedEnqueue: a caller who gives up before a commit took its item gets an
// error, and its item is not queued.
func TestSQLiteAbandonedEnqueue(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"), Options{BusyTimeout: 30 * time.Second})
	ev := watch(s)
	restore := lockFile(t, s)
	first := make(chan error, 1)
	go func() {
		_, err := s.Enqueue(ctx, modItem("acme", "first"))
		first <- err
	}()
	<-ev.pending
	if got := <-ev.batch; got != 1 { // the first caller leads, blocked on the lock
		t.Fatalf("first batch of %d", got)
	}
	gaveUp, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, err := s.Enqueue(gaveUp, modItem("acme", "second"))
		second <- err
	}()
	<-ev.pending
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned enqueue: %v, want context.Canceled", err)
	}
	restore()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, modItem("acme", "third")) // a later commit skips the abandoned item
	page, err := s.List(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, it := range page.Items {
		texts = append(texts, string(it.Input))
	}
	if strings.Join(texts, " ") != `{"text":"first"} {"text":"third"}` {
		t.Fatalf("stored %v, want first and third only", texts)
	}
}

// TestLeaderBeyondOneBatchCommitsItsOwnItem: a commit takes at most maxBatch items; a leader
// whose own item lies beyond them commits again instead of waiting for a commit nobody would
// make.
func TestLeaderBeyondOneBatchCommitsItsOwnItem(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"), Options{})
	var reqs []*enqueueReq
	for i := range maxBatch + 5 {
		r, err := newEnqueueReq(modItem("acme", strconv.Itoa(i)), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	s.pendMu.Lock()
	s.pending = append(s.pending, reqs...)
	s.pendMu.Unlock()
	leader := reqs[len(reqs)-1]
	s.turn <- struct{}{}
	s.commitUntilTaken(leader)
	<-s.turn
	select {
	case <-leader.done:
	default:
		t.Fatalf("the leader's item (%d of %d) was left pending", len(reqs), maxBatch)
	}
	for _, r := range reqs {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if _, err := s.Get(ctx, "acme", r.id); err != nil {
			t.Fatalf("item %s not stored: %v", r.id, err)
		}
	}
}
