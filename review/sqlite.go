package review

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// SQLite is the embedded durable Store: one database file in WAL mode, each write one
// transaction synced to disk (synchronous=FULL) before it returns, so that an item Enqueue
// returned survives kill -9 and a power cut. Enqueues that arrive together share one commit
// (sqlite_commit.go). Its schema is migrated when it opens.
//
// It holds a single connection: writes are serialized in the process, and the file stays
// usable even if its folder is removed while it is open. Another process that locks the
// file makes writes wait up to Options.BusyTimeout, then fail; a failed write marks the store
// unhealthy (Health, Ping, afloat_review_store_healthy) until a write succeeds again. It
// runs no goroutine: the retention purge rides on writes and Ping.
//
// It is safe for concurrent use.
type SQLite struct {
	db    *sql.DB
	path  string
	opts  Options
	meter meter

	mu        sync.Mutex // guards what follows
	lastErr   error      // the last write's failure; nil once a write succeeded
	lastPurge time.Time

	// Group commit (sqlite_commit.go): turn is the commit turn, pending the Enqueues
	// waiting for a commit, commits how many commits ran.
	turn     chan struct{}
	pendMu   sync.Mutex
	pending  []*enqueueReq
	commits  atomic.Int64
	testHook func(event string, n int)
}

// migrations are the schema's versions, applied in order from PRAGMA user_version: a
// database at version n runs migrations[n:]. Append only; never edit a released one.
var migrations = []string{
	// 1: the items and a row that Ping rewrites.
	`CREATE TABLE items (
		id               TEXT    PRIMARY KEY,
		task             TEXT    NOT NULL,
		tenant           TEXT    NOT NULL,
		idem_key         TEXT    NOT NULL DEFAULT '',
		input            TEXT    NOT NULL,
		attempts         TEXT    NOT NULL,
		prompt_versions  TEXT    NOT NULL,
		status           TEXT    NOT NULL CHECK (status IN ('pending', 'claimed', 'resolved', 'rejected')),
		created_ns       INTEGER NOT NULL,
		operator         TEXT    NOT NULL DEFAULT '',
		claimed_ns       INTEGER NOT NULL DEFAULT 0,
		claim_expires_ns INTEGER NOT NULL DEFAULT 0,
		resolved_ns      INTEGER NOT NULL DEFAULT 0,
		result           TEXT,
		reason           TEXT    NOT NULL DEFAULT ''
	) STRICT;
	CREATE UNIQUE INDEX items_idempotency ON items (tenant, task, idem_key) WHERE idem_key <> '';
	CREATE INDEX items_order ON items (created_ns, id);
	CREATE INDEX items_status ON items (status, task, created_ns);
	CREATE INDEX items_answered ON items (resolved_ns) WHERE resolved_ns <> 0;
	CREATE TABLE probe (id INTEGER PRIMARY KEY CHECK (id = 1), at_ns INTEGER NOT NULL) STRICT;`,

	// 2: the hash of a keyed item's input (inputHash), so that a key reused with another
	// input is refused whatever the gateway's cache holds. Items from version 1 keep ''
	// and are hashed from their input when their key comes again.
	`ALTER TABLE items ADD COLUMN input_hash TEXT NOT NULL DEFAULT '';`,

	// 3: each task's unanswered items, kept by triggers in the transaction that changes an
	// item, so that the depth metric reads one row instead of counting the queue after each
	// commit. Every store and process that writes the file keeps it, having migrated.
	`CREATE TABLE task_depth (task TEXT PRIMARY KEY, unanswered INTEGER NOT NULL) STRICT;
	INSERT INTO task_depth (task, unanswered)
		SELECT task, COUNT(*) FROM items WHERE status IN ('pending', 'claimed') GROUP BY task;
	CREATE TRIGGER items_depth_insert AFTER INSERT ON items
		WHEN NEW.status IN ('pending', 'claimed')
	BEGIN
		INSERT INTO task_depth (task, unanswered) VALUES (NEW.task, 1)
			ON CONFLICT (task) DO UPDATE SET unanswered = unanswered + 1;
	END;
	CREATE TRIGGER items_depth_update AFTER UPDATE OF status, task ON items
		WHEN OLD.task <> NEW.task OR (OLD.status IN ('pending', 'claimed')) <> (NEW.status IN ('pending', 'claimed'))
	BEGIN
		UPDATE task_depth SET unanswered = unanswered - 1
			WHERE task = OLD.task AND OLD.status IN ('pending', 'claimed');
		INSERT INTO task_depth (task, unanswered) SELECT NEW.task, 1 WHERE NEW.status IN ('pending', 'claimed')
			ON CONFLICT (task) DO UPDATE SET unanswered = unanswered + 1;
	END;
	CREATE TRIGGER items_depth_delete AFTER DELETE ON items
		WHEN OLD.status IN ('pending', 'claimed')
	BEGIN
		UPDATE task_depth SET unanswered = unanswered - 1 WHERE task = OLD.task;
	END;`,

	// 4: the webhook outbox (Options.Outbox): each answered item's Delivery, and the index
	// DueDeliveries reads the pending ones by, oldest due first.
	`ALTER TABLE items ADD COLUMN delivery_state TEXT NOT NULL DEFAULT ''
		CHECK (delivery_state IN ('', 'pending', 'delivered', 'failed'));
	ALTER TABLE items ADD COLUMN delivery_attempts INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE items ADD COLUMN delivery_last_ns INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE items ADD COLUMN delivery_last_status INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE items ADD COLUMN delivery_last_error TEXT NOT NULL DEFAULT '';
	ALTER TABLE items ADD COLUMN delivery_next_ns INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX items_due_deliveries ON items (delivery_next_ns, id) WHERE delivery_state = 'pending';`,
}

// OpenSQLite opens (creating it if needed) the database at path and migrates its schema. It
// fails when the file cannot be opened or written, is not a database, fails its integrity
// check, or was written by a newer afloat. Whether it can write is proved by a commit at
// open, so that read-only storage refuses to start (an error that says the store cannot
// write) whether the database was closed cleanly or a kill -9 left its WAL: a store that
// opens on storage it cannot write would answer 503 to every critical call instead.
func OpenSQLite(ctx context.Context, path string, opts Options) (*SQLite, error) {
	if opts.ClaimTTL < 0 || opts.Retention < 0 || opts.PurgeEvery < 0 || opts.BusyTimeout < 0 {
		return nil, fmt.Errorf("%w: negative duration in %+v", ErrInvalid, durations(opts))
	}
	opts = opts.withDefaults()
	if path == "" {
		return nil, fmt.Errorf("%w: the sqlite path is empty", ErrInvalid)
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("%w: the sqlite path %q holds a '?'", ErrInvalid, path)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	if opts.unsynced {
		q.Add("_pragma", "synchronous(OFF)")
	} else {
		q.Add("_pragma", "synchronous(FULL)")
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("review: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &SQLite{db: db, path: path, opts: opts, meter: newMeter(opts.Metrics, opts.Clock), turn: make(chan struct{}, 1)}
	if err := s.init(ctx); err != nil {
		_ = db.Close()
		if cannotWrite(err) {
			return nil, fmt.Errorf("review: open %s: the store cannot write the database or the WAL beside it (read-only storage or a missing folder): %w", path, err)
		}
		return nil, fmt.Errorf("review: open %s: %w", path, err)
	}
	return s, nil
}

// SQLite's primary result codes (sqlite3.h) of a file the store cannot write.
const (
	sqliteReadOnly = 8  // SQLITE_READONLY: opened, but writes are refused
	sqliteCantOpen = 14 // SQLITE_CANTOPEN: the file or its WAL cannot be opened for writing
)

// cannotWrite reports whether err is SQLite refusing to write the file or create its WAL.
func cannotWrite(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff // the primary code of an extended one
	return code == sqliteReadOnly || code == sqliteCantOpen
}

func (s *SQLite) init(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %s, not WAL", mode)
	}
	var check string
	if err := s.db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if check != "ok" {
		return fmt.Errorf("integrity check: %s", check)
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	// A database whose WAL a kill -9 left on read-only storage opens and reads; only a
	// commit shows that it cannot write.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO probe (id, at_ns) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET at_ns = excluded.at_ns`, s.opts.Clock.Now().UnixNano()); err != nil {
		return fmt.Errorf("commit at open: %w", err)
	}
	if err := s.refreshAll(ctx); err != nil {
		return err
	}
	now := s.opts.Clock.Now()
	s.mu.Lock()
	due := s.purgeDue(now)
	s.mu.Unlock()
	if due {
		if _, err := s.Purge(ctx); err != nil {
			return err
		}
	}
	return nil
}

// migrate brings the schema to the newest version in one transaction.
func (s *SQLite) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("the database is at schema version %d, newer than this build's %d", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
	}
	if version == len(migrations) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(len(migrations))); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	s.opts.Logger.Info("review store migrated", "from", version, "to", len(migrations))
	return nil
}

// Kind names the store in /admin/status.
func (s *SQLite) Kind() string { return "sqlite" }

// Path returns the database file.
func (s *SQLite) Path() string { return s.path }

// Close closes the database; the last connection's close checkpoints the WAL into the file.
func (s *SQLite) Close() error { return s.db.Close() }

// Ping commits a write (the probe row), so that a full disk or a lock another process holds
// shows here and not only on the next item; it runs the retention purge when due.
func (s *SQLite) Ping(ctx context.Context) error {
	now := s.opts.Clock.Now()
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO probe (id, at_ns) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at_ns = excluded.at_ns`, now.UnixNano())
	if err = s.wrote(ctx, err); err != nil {
		return fmt.Errorf("review: the store cannot commit: %w", err)
	}
	s.maybePurge(ctx, now)
	return nil
}

// Health returns the last write's failure, or nil when the last write committed. It does no
// I/O.
func (s *SQLite) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// wrote records the outcome of a write and returns err. The caller's own cancellation is not
// the store's failure.
func (s *SQLite) wrote(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return err
	}
	s.mu.Lock()
	was := s.lastErr
	s.lastErr = err
	s.mu.Unlock()
	s.meter.healthy(err == nil)
	switch {
	case err != nil && was == nil:
		s.opts.Logger.Error("review store cannot commit", "err", err)
	case err == nil && was != nil:
		s.opts.Logger.Info("review store commits again")
	}
	return err
}

// Purge deletes the items answered longer ago than the retention, counts them by task and
// logs how many; with no retention it deletes nothing.
func (s *SQLite) Purge(ctx context.Context) (int, error) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	s.lastPurge = now
	s.mu.Unlock()
	if s.opts.Retention <= 0 {
		return 0, nil
	}
	cutoff := now.Add(-s.opts.Retention).UnixNano()
	rows, err := s.db.QueryContext(ctx,
		`DELETE FROM items WHERE resolved_ns <> 0 AND resolved_ns <= ? AND status IN ('resolved', 'rejected') RETURNING task`, cutoff)
	if err != nil {
		return 0, s.wrote(ctx, fmt.Errorf("review: purge: %w", err))
	}
	byTask := map[string]int{}
	n := 0
	for rows.Next() {
		var task string
		if err := rows.Scan(&task); err != nil {
			rows.Close()
			return 0, s.wrote(ctx, fmt.Errorf("review: purge: %w", err))
		}
		byTask[task]++
		n++
	}
	if err := rows.Close(); err != nil {
		return 0, s.wrote(ctx, fmt.Errorf("review: purge: %w", err))
	}
	if err := rows.Err(); err != nil {
		return 0, s.wrote(ctx, fmt.Errorf("review: purge: %w", err))
	}
	_ = s.wrote(ctx, nil)
	for task, c := range byTask {
		s.meter.purged(task, c)
	}
	if n > 0 {
		s.opts.Logger.Info("review items purged after retention", "items", n, "retention", s.opts.Retention.String())
	}
	return n, nil
}

func (s *SQLite) purgeDue(now time.Time) bool {
	return s.opts.Retention > 0 && now.Sub(s.lastPurge) >= s.opts.PurgeEvery
}

// maybePurge purges when due; a failed purge is logged and retried at the next due time.
func (s *SQLite) maybePurge(ctx context.Context, now time.Time) {
	s.mu.Lock()
	due := s.purgeDue(now)
	s.mu.Unlock()
	if !due {
		return
	}
	if _, err := s.Purge(ctx); err != nil && ctx.Err() == nil {
		s.opts.Logger.Error("review purge failed", "err", err)
	}
}

// isNoRows reports whether err is an empty result.
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// durations are the options that must not be negative, for an error message.
func durations(o Options) map[string]time.Duration {
	return map[string]time.Duration{"claim_ttl": o.ClaimTTL, "retention": o.Retention, "purge_every": o.PurgeEvery, "busy_timeout": o.BusyTimeout}
}
