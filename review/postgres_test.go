package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/internal/pgtest"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// openPostgresSchema opens a Postgres store in a schema of the test's own (dropped when it
// ends); it skips when AFLOAT_POSTGRES_URL is unset.
func openPostgresSchema(t *testing.T, opts Options) Store {
	return openPostgres(t, pgtest.Schema(t), opts)
}

func openPostgres(t *testing.T, url string, opts Options) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestPostgresReopen: every item, in every state, reads back the same from another store
// opened on the same schema (another gateway, or this one after a restart).
func TestPostgresReopen(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	clk := clockwork.NewFakeClockAt(t0)
	opts := Options{Clock: clk, ClaimTTL: time.Hour}
	s := openPostgres(t, url, opts)
	keyed := modItem("acme", "keyed")
	keyed.IdempotencyKey = "order-42"
	ids := []string{enqueue(t, s, keyed), enqueue(t, s, modItem("acme", "b")), enqueue(t, s, modItem("globex", "c")), enqueue(t, s, modItem("", "d"))}
	clk.Advance(time.Minute)
	must(t)(s.Claim(ctx, ids[1], "alice"))
	must(t)(s.Resolve(ctx, ids[2], "bob", json.RawMessage(`{"allowed": false, "reason": "insult"}`)))
	must(t)(s.Reject(ctx, ids[3], "bob", "empty text"))
	before := map[string]*Item{}
	for _, id := range ids {
		it, err := s.Lookup(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = it
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openPostgres(t, url, opts)
	for _, id := range ids {
		got, err := s.Lookup(ctx, id)
		if err != nil {
			t.Fatalf("%s after reopen: %v", id, err)
		}
		if !sameItem(got, before[id]) {
			t.Errorf("%s after reopen:\n got %+v\nwant %+v", id, got, before[id])
		}
	}
	if id := enqueue(t, s, keyed); id != ids[0] {
		t.Errorf("repeated key after reopen: %s, want %s", id, ids[0])
	}
	other := modItem("acme", "other")
	other.IdempotencyKey = "order-42"
	if _, err := s.Enqueue(ctx, other); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Errorf("the key with another input after reopen: %v, want ErrIdempotencyMismatch", err)
	}
}

// TestPostgresMigrationsConcurrent: gateways that start at once on a fresh schema both open
// it; the migrations run once (one store logs them, each version is recorded once); a store
// opened later finds the schema current, and a schema of a newer afloat is refused.
func TestPostgresMigrationsConcurrent(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	const n = 4
	var (
		logs  [n]syncBuffer
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  [n]error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := OpenPostgres(ctx, url, Options{Logger: slog.New(slog.NewTextHandler(&logs[i], nil))})
			if err == nil {
				err = s.Ping(ctx)
				s.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	migrated := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("store %d: %v", i, errs[i])
		}
		migrated += strings.Count(logs[i].String(), "review store migrated")
	}
	if migrated != 1 {
		t.Errorf("%d stores migrated the schema, want 1", migrated)
	}
	s := openPostgres(t, url, Options{})
	var versions, distinct int
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM afloat_review_migrations`).Scan(&versions, &distinct); err != nil {
		t.Fatal(err)
	}
	if versions != len(pgMigrations) || distinct != len(pgMigrations) {
		t.Errorf("%d versions recorded (%d distinct), want %d", versions, distinct, len(pgMigrations))
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO afloat_review_migrations (version) VALUES ($1)`, len(pgMigrations)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostgres(ctx, url, Options{}); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Errorf("open on a newer schema: %v, want a refusal", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (a logger's).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPostgresClaimsNeverShared: four operators, two on each of two stores (two pools, as
// two gateways), race to claim the same 100 items, each in its own order: every item goes to
// exactly one of them, and is claimed once.
func TestPostgresClaimsNeverShared(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	opts := Options{ClaimTTL: time.Hour}
	stores := []*Postgres{openPostgres(t, url, opts), openPostgres(t, url, opts)}
	var ids []string
	for i := range 100 {
		ids = append(ids, enqueue(t, stores[i%2], modItem("acme", fmt.Sprint(i))))
	}
	operators := []string{"alice", "bob", "carol", "dave"}
	won := make([][]string, len(operators))
	errs := make(chan error, len(operators))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, op := range operators {
		s := stores[i/2]
		wg.Go(func() {
			order := slices.Clone(ids)
			rand.New(rand.NewPCG(uint64(i), 11)).Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
			<-start
			for _, id := range order {
				it, err := s.Claim(ctx, id, op)
				switch {
				case err == nil:
					if it.Operator != op {
						errs <- fmt.Errorf("%s won %s but it is %s's", op, id, it.Operator)
						return
					}
					won[i] = append(won[i], id)
				case !errors.Is(err, ErrConflict):
					errs <- fmt.Errorf("%s claiming %s: %v", op, id, err)
					return
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	owner := map[string]string{}
	for i, list := range won {
		for _, id := range list {
			if prev, ok := owner[id]; ok {
				t.Fatalf("%s claimed by both %s and %s", id, prev, operators[i])
			}
			owner[id] = operators[i]
		}
	}
	if len(owner) != len(ids) {
		t.Fatalf("%d items claimed, want %d", len(owner), len(ids))
	}
	for _, id := range ids {
		for _, s := range stores {
			it, err := s.Lookup(ctx, id)
			if err != nil || it.Status != StatusClaimed || it.Operator != owner[id] {
				t.Fatalf("%s: %+v, %v; winner %s", id, it, err, owner[id])
			}
		}
	}
	counts := make([]int, len(operators))
	for i := range won {
		counts[i] = len(won[i])
	}
	t.Logf("%d claim attempts in %v (%.0f/s) over two stores; won %v", len(operators)*len(ids), elapsed,
		float64(len(operators)*len(ids))/elapsed.Seconds(), counts)
}

// TestPostgresIdempotencyAcrossStores: the same call, sent with one key to two gateways at
// once many times over, queues one item, and every call gets its id.
func TestPostgresIdempotencyAcrossStores(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	stores := []*Postgres{openPostgres(t, url, Options{}), openPostgres(t, url, Options{})}
	const calls = 40
	ids := make([]string, calls)
	errs := make([]error, calls)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			it := modItem("acme", "same")
			it.IdempotencyKey = "order-42"
			<-start
			ids[i], errs[i] = stores[i%2].Enqueue(ctx, it)
		})
	}
	close(start)
	wg.Wait()
	for i := range calls {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("call %d: %q, %v; want %s", i, ids[i], errs[i], ids[0])
		}
	}
	page, err := stores[0].List(ctx, Filter{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("%v, %v: want one item", page, err)
	}
}

// TestPostgresGroupCommit: the Enqueues that arrive during a commit share the next one, and
// each returns only once its own item is committed.
func TestPostgresGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := openPostgres(t, pgtest.Schema(t), Options{})
	const n = 64
	var (
		mu      sync.Mutex
		pending int
		batches []int
		all     = make(chan struct{})
	)
	s.testHook = func(event string, k int) {
		mu.Lock()
		switch event {
		case "pending":
			if pending++; pending == n {
				close(all)
			}
		case "batch":
			batches = append(batches, k)
		}
		first := event == "batch" && len(batches) == 1
		mu.Unlock()
		if first { // hold the first commit until every Enqueue waits behind it
			<-all
		}
	}
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i], errs[i] = s.Enqueue(ctx, modItem("acme", fmt.Sprint(i))) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
		if _, err := s.Lookup(ctx, ids[i]); err != nil {
			t.Fatalf("item %d after its Enqueue returned: %v", i, err)
		}
	}
	if got := s.commits.Load(); got != 2 || !slices.Equal(batches, []int{1, n - 1}) {
		t.Errorf("%d commits of %v items, want 2 of [1 %d]", got, batches, n-1)
	}
}

// TestPostgresMaxPending: past MaxPending unanswered items (across every store of the
// database) Enqueue refuses with ErrFull and queues nothing; the store stays healthy; a
// repeated key still finds its item; an answer makes room.
func TestPostgresMaxPending(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	m, err := telemetry.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 20
	opts := Options{MaxPending: limit, Metrics: m}
	stores := []*Postgres{openPostgres(t, url, opts), openPostgres(t, url, opts)}
	keyed := modItem("acme", "keyed")
	keyed.IdempotencyKey = "order-42"
	first := enqueue(t, stores[0], keyed)

	const calls = 60
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { _, errs[i] = stores[i%2].Enqueue(ctx, modItem("acme", fmt.Sprint(i))) })
	}
	wg.Wait()
	queued, full := 1, 0
	for i, err := range errs {
		switch {
		case err == nil:
			queued++
		case errors.Is(err, ErrFull):
			full++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if queued != limit || full != calls+1-limit {
		t.Errorf("%d queued, %d refused as full; want %d and %d", queued, full, limit, calls+1-limit)
	}
	page, err := stores[1].List(ctx, Filter{Limit: 500})
	if err != nil || len(page.Items) != limit {
		t.Fatalf("%d items stored (%v), want %d", len(page.Items), err, limit)
	}
	for _, s := range stores {
		if s.Health() != nil {
			t.Errorf("a full queue made the store unhealthy: %v", s.Health())
		}
	}
	if got := testutil.ToFloat64(m.ReviewStoreHealthy); got != 1 {
		t.Errorf("afloat_review_store_healthy %v, want 1", got)
	}
	if id, err := stores[1].Enqueue(ctx, keyed); err != nil || id != first {
		t.Errorf("repeated key on a full queue: %q, %v; want %s", id, err, first)
	}
	other := modItem("acme", "other")
	other.IdempotencyKey = "order-42"
	if _, err := stores[1].Enqueue(ctx, other); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Errorf("reused key on a full queue: %v, want ErrIdempotencyMismatch", err)
	}
	if _, err := stores[0].Enqueue(ctx, modItem("acme", "late")); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "20 items wait") {
		t.Errorf("enqueue on a full queue: %v, want ErrFull", err)
	}
	// A claim keeps the item unanswered; an answer makes room for one.
	must(t)(stores[0].Claim(ctx, page.Items[0].ID, "alice"))
	if _, err := stores[0].Enqueue(ctx, modItem("acme", "late")); !errors.Is(err, ErrFull) {
		t.Errorf("enqueue after a claim: %v, want ErrFull", err)
	}
	must(t)(stores[0].Resolve(ctx, page.Items[0].ID, "alice", json.RawMessage(`{"allowed":true}`)))
	enqueue(t, stores[1], modItem("acme", "late"))
	if _, err := stores[0].Enqueue(ctx, modItem("acme", "later")); !errors.Is(err, ErrFull) {
		t.Errorf("enqueue once full again: %v, want ErrFull", err)
	}
}

// TestPostgresOutboxAcrossStores: an answer committed through one store is due on every
// store of the database, and a delivery recorded through another is what all of them read;
// a delivery error that a text column cannot hold is kept as valid text. (The outbox's
// contract is the conformance suite's TestStoreOutbox*.)
func TestPostgresOutboxAcrossStores(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	clk := clockwork.NewFakeClockAt(t0)
	stores := []*Postgres{openPostgres(t, url, Options{Clock: clk, Outbox: true}), openPostgres(t, url, Options{Clock: clk, Outbox: true})}
	id := enqueue(t, stores[0], modItem("acme", "a"))
	must(t)(stores[0].Resolve(ctx, id, "alice", json.RawMessage(`{"allowed":true}`)))
	for i, s := range stores {
		if got := dueIDs(t, s, t0, 10); !slices.Equal(got, []string{id}) {
			t.Fatalf("store %d: due %v, want [%s]", i, got, id)
		}
	}
	retry := Delivery{State: DeliveryPending, Attempts: 1, LastAttempt: t0, LastStatus: 502, LastError: "bad gateway\x00\xff", NextAt: t0.Add(time.Minute)}
	if err := stores[1].RecordDelivery(ctx, id, retry); err != nil {
		t.Fatal(err)
	}
	retry.LastError = "bad gateway\uFFFD"
	for i, s := range stores {
		if got := dueIDs(t, s, t0, 10); len(got) != 0 {
			t.Errorf("store %d: due %v once the retry is planned, want none", i, got)
		}
		if got, err := s.Lookup(ctx, id); err != nil || !sameDelivery(got.Delivery, retry) {
			t.Errorf("store %d: delivery %+v (%v), want %+v", i, got.Delivery, err, retry)
		}
	}
}

// TestPostgresRefusesText: what a text column cannot hold (a NUL byte, invalid UTF-8) is
// the caller's invalid argument; it queues nothing and leaves the store healthy.
func TestPostgresRefusesText(t *testing.T) {
	ctx := context.Background()
	s := openPostgres(t, pgtest.Schema(t), Options{})
	keyed := modItem("acme", "x")
	keyed.IdempotencyKey = "key\x00"
	latin := modItem("acme", "x")
	latin.Input = json.RawMessage("{\"text\":\"caf\xe9\"}")
	for name, it := range map[string]*Item{"a NUL in the key": keyed, "latin-1 input": latin} {
		if _, err := s.Enqueue(ctx, it); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	id := enqueue(t, s, modItem("acme", "ok"))
	if _, err := s.Reject(ctx, id, "alice", "no\x00"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a NUL in the reason: %v, want ErrInvalid", err)
	}
	if _, err := s.Reject(ctx, id, "alice", "spam \u00e9\u00e8"); err != nil {
		t.Errorf("a reason in UTF-8: %v", err)
	}
	if s.Health() != nil {
		t.Errorf("refused text made the store unhealthy: %v", s.Health())
	}
}

// TestPostgresUnreachable: a database that does not answer refuses the open, quickly and
// saying where; the password stays out of the error.
func TestPostgresUnreachable(t *testing.T) {
	began := time.Now()
	_, err := OpenPostgres(context.Background(), "postgres://afloat:s3cret-pw@127.0.0.1:1/afloat?sslmode=disable", Options{BusyTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("open on 127.0.0.1:1: %v, want an error naming the address and not the password", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	for _, bad := range []string{"", "postgres://[::1", "host=127.0.0.1 port=notaport"} {
		if _, err := OpenPostgres(context.Background(), bad, Options{}); err == nil {
			t.Errorf("open %q: no error", bad)
		}
	}
	if _, err := OpenPostgres(context.Background(), "postgres://127.0.0.1/x", Options{MaxPending: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative MaxPending: %v, want ErrInvalid", err)
	}
}

// TestPostgresDown: when the database goes away under an open store, Enqueue and the
// operators' writes fail (never report success), the store reads unhealthy (Health, Ping,
// afloat_review_store_healthy, one log line) and reads fail; once the database is back, the
// next commit makes it healthy again and nothing was queued while it was down.
func TestPostgresDown(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	proxy := pgtest.NewProxy(t, pgtest.HostPort(t, url))
	m, err := telemetry.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s := openPostgres(t, proxy.URL(url), Options{Metrics: m, Logger: slog.New(slog.NewTextHandler(&logs, nil)), BusyTimeout: 2 * time.Second})
	kept := enqueue(t, s, modItem("acme", "before"))

	proxy.Cut()
	began := time.Now()
	if id, err := s.Enqueue(ctx, modItem("acme", "during")); err == nil || errors.Is(err, ErrFull) {
		t.Fatalf("enqueue with the database down: %q, %v; want a store error", id, err)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("the failed enqueue took %v", d)
	}
	if _, err := s.Claim(ctx, kept, "alice"); err == nil || errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		t.Fatalf("claim with the database down: %v, want a store error", err)
	}
	if s.Health() == nil {
		t.Fatal("Health is nil after a failed commit")
	}
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "cannot commit") {
		t.Fatalf("ping with the database down: %v", err)
	}
	if got := testutil.ToFloat64(m.ReviewStoreHealthy); got != 0 {
		t.Fatalf("afloat_review_store_healthy %v, want 0", got)
	}
	if n := strings.Count(logs.String(), "review store cannot commit"); n != 1 {
		t.Errorf("%d log lines for the failure, want 1: %s", n, logs.String())
	}
	if _, err := s.Lookup(ctx, kept); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("lookup with the database down: %v, want a store error", err)
	}

	proxy.Restore()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping once the database is back: %v", err)
	}
	if s.Health() != nil || testutil.ToFloat64(m.ReviewStoreHealthy) != 1 {
		t.Fatalf("still unhealthy after a commit: %v", s.Health())
	}
	enqueue(t, s, modItem("acme", "after"))
	page, err := s.List(ctx, Filter{})
	if err != nil || len(page.Items) != 2 || page.Items[0].ID != kept {
		t.Fatalf("after the outage: %v, %v; want the item before and the one after", page, err)
	}
}

// TestPostgresKeyRetriedDuringChange: a call retried with its key while an operator's change
// of its item is in flight gets the item at once: the Enqueue never waits for the change.
// (Its INSERT would, on the unique index the change's UPDATE writes too; and an answer waits
// for the depth row of its task, which an Enqueue may hold: PostgreSQL would break that
// deadlock by failing one of them.)
func TestPostgresKeyRetriedDuringChange(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := openPostgres(t, url, Options{BusyTimeout: 2 * time.Second})
	keyed := modItem("acme", "keyed")
	keyed.IdempotencyKey = "order-42"
	id := enqueue(t, s, keyed)

	// Another gateway's claim, in flight: its row version written, not committed.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE afloat_review_items SET status = 'claimed', operator = 'zed', claimed_ns = 1 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if got, err := s.Enqueue(ctx, keyed); err != nil || got != id {
		t.Fatalf("retried key during a change: %q, %v; want %s", got, err, id)
	}
	other := modItem("acme", "other")
	other.IdempotencyKey = "order-42"
	if _, err := s.Enqueue(ctx, other); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Fatalf("reused key during a change: %v, want ErrIdempotencyMismatch", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("the Enqueues took %v: they waited for the change", d)
	}
}
