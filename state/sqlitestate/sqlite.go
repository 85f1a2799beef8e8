// Package sqlitestate keeps the flags, faults, drills and canary decisions of one process (state.backend
// local) in the SQLite file of its review queue, so that a kill switch survives a restart.
package sqlitestate

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/state"
	"modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// SQLite is the state.Store of one process: tables in a local database file in WAL mode, each
// write one transaction synced to disk (synchronous=FULL) before it returns, so that a kill
// switch SwapFlags saved survives kill -9 and a power cut.
//
// It shares its file with the review queue (review.OpenSQLite on the same path), in either
// order of opening: its tables are named state_*, and it keeps its schema's version in a
// table of its own (state_schema), leaving PRAGMA user_version to the review queue. It holds
// a single connection; another connection that locks the file (the review queue's, another
// process's) makes a write wait up to 5s, then fail.
//
// It is safe for concurrent use.
type SQLite struct {
	db   *sql.DB
	path string
}

var _ state.Store = (*SQLite)(nil)

// busyTimeout is how long a write waits for a lock another connection holds.
const busyTimeout = "5000" // milliseconds

// migrations are the schema's versions, applied in order from state_schema's version: a
// database at version n runs migrations[n:]. Append only; never edit a released one.
var migrations = []string{
	// 1: the flag document (one row, with the version SwapFlags compares) and the faults by
	// provider, each with when it clears itself (0: never).
	`CREATE TABLE IF NOT EXISTS state_flags (
		id      INTEGER PRIMARY KEY CHECK (id = 1),
		version INTEGER NOT NULL CHECK (version > 0),
		doc     TEXT    NOT NULL
	) STRICT;
	CREATE TABLE IF NOT EXISTS state_faults (
		provider        TEXT    PRIMARY KEY,
		fault           TEXT    NOT NULL,
		expires_unix_ms INTEGER NOT NULL
	) STRICT;`,
	// 2: the drills by scope: the last one and the last that passed, as JSON.
	`CREATE TABLE IF NOT EXISTS state_drills (
		scope       TEXT PRIMARY KEY,
		drills      TEXT NOT NULL
	) STRICT;`,
	// 3: the canary decisions by task: the last one, as JSON.
	`CREATE TABLE IF NOT EXISTS state_canaries (
		task   TEXT PRIMARY KEY,
		canary TEXT NOT NULL
	) STRICT;`,
}

// OpenSQLite opens (creating it if needed) the database at path and migrates this store's
// tables. It fails when the file cannot be opened or written, is not a database, or was
// written by a newer afloat. Whether it can write is proved by a commit at open, so that
// read-only storage refuses to start instead of losing the first kill switch saved.
func OpenSQLite(path string) (*SQLite, error) {
	if path == "" {
		return nil, errors.New("state sqlite: the path is empty")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("state sqlite %s: the path holds a '?'", path)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+busyTimeout+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	// BEGIN IMMEDIATE: the transaction at open takes the write lock when it starts, waiting
	// for it, instead of failing at its first write when another connection (the review
	// queue's) wrote meanwhile. The other writes are single statements.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("state sqlite %s: open: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &SQLite{db: db, path: path}
	if err := s.init(context.Background()); err != nil {
		_ = db.Close()
		if cannotWrite(err) {
			if _, serr := os.Stat(filepath.Dir(path)); errors.Is(serr, os.ErrNotExist) {
				return nil, fmt.Errorf("state sqlite %s: open: the folder %s does not exist: %w", path, filepath.Dir(path), err)
			}
			return nil, fmt.Errorf("state sqlite %s: open: the store cannot write the database or the WAL beside it (read-only storage?): %w", path, err)
		}
		return nil, fmt.Errorf("state sqlite %s: open: %w", path, err)
	}
	return s, nil
}

// SQLite's primary result codes (sqlite3.h) of a file the store cannot write.
const (
	sqliteReadOnly = 8  // SQLITE_READONLY: opened, but writes are refused
	sqliteCantOpen = 14 // SQLITE_CANTOPEN: the file or its WAL cannot be opened for writing
)

// cannotWrite reports whether err is SQLite refusing to write the file or create it or its WAL.
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
	return s.migrate(ctx)
}

// migrate brings this store's tables to the newest version in one transaction, which it
// commits even when there is nothing to migrate: on read-only storage a database (and a WAL
// a kill -9 left) opens and reads, and only a commit shows that it cannot write.
func (s *SQLite) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS state_schema (
		id      INTEGER PRIMARY KEY CHECK (id = 1),
		version INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	err = tx.QueryRowContext(ctx, "SELECT version FROM state_schema WHERE id = 1").Scan(&version)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("migrate: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("the state tables are at schema version %d, newer than this build's %d", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO state_schema (id, version) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`, len(migrations)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit at open: %w", err)
	}
	return nil
}

// LoadFlags returns the saved document and its version; nil and 0 when none was saved.
func (s *SQLite) LoadFlags(ctx context.Context) (*flags.Document, uint64, error) {
	var (
		version int64
		raw     string
	)
	err := s.db.QueryRowContext(ctx, "SELECT version, doc FROM state_flags WHERE id = 1").Scan(&version, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("state sqlite %s: load flags: %w", s.path, err)
	}
	doc := &flags.Document{}
	if err := json.Unmarshal([]byte(raw), doc); err != nil {
		return nil, 0, fmt.Errorf("state sqlite %s: load flags at version %d: %w", s.path, version, err)
	}
	return doc, uint64(version), nil
}

// SwapFlags saves doc as version+1 if the saved version is still version (0: none saved),
// in one statement, so that of writers that read the same version exactly one wins. A nil
// doc is an error: the document is replaced, never removed.
func (s *SQLite) SwapFlags(ctx context.Context, version uint64, doc *flags.Document) (bool, error) {
	if doc == nil {
		return false, fmt.Errorf("state sqlite %s: swap flags: the document is nil", s.path)
	}
	if version >= math.MaxInt64 { // SQLite's integers are int64, and version+1 must be one
		return false, fmt.Errorf("state sqlite %s: swap flags: version %d is out of range", s.path, version)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return false, fmt.Errorf("state sqlite %s: swap flags: %w", s.path, err)
	}
	var res sql.Result
	if version == 0 {
		res, err = s.db.ExecContext(ctx,
			"INSERT INTO state_flags (id, version, doc) VALUES (1, 1, ?) ON CONFLICT (id) DO NOTHING", string(raw))
	} else {
		res, err = s.db.ExecContext(ctx,
			"UPDATE state_flags SET version = version + 1, doc = ? WHERE id = 1 AND version = ?", string(raw), int64(version))
	}
	if err != nil {
		return false, fmt.Errorf("state sqlite %s: swap flags from version %d: %w", s.path, version, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("state sqlite %s: swap flags from version %d: %w", s.path, version, err)
	}
	return n == 1, nil
}

// LoadFaults returns every fault saved, by provider, including those whose Expires has
// passed: the store has no clock, and State drops them.
func (s *SQLite) LoadFaults(ctx context.Context) (map[string]state.Fault, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT provider, fault, expires_unix_ms FROM state_faults")
	if err != nil {
		return nil, fmt.Errorf("state sqlite %s: load faults: %w", s.path, err)
	}
	defer rows.Close()
	out := map[string]state.Fault{}
	for rows.Next() {
		var (
			provider, raw string
			expires       int64
		)
		if err := rows.Scan(&provider, &raw, &expires); err != nil {
			return nil, fmt.Errorf("state sqlite %s: load faults: %w", s.path, err)
		}
		var f state.Fault
		if err := json.Unmarshal([]byte(raw), &f.Fault); err != nil {
			return nil, fmt.Errorf("state sqlite %s: load fault of %s: %w", s.path, provider, err)
		}
		if expires != 0 {
			f.Expires = time.UnixMilli(expires)
		}
		out[provider] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state sqlite %s: load faults: %w", s.path, err)
	}
	return out, nil
}

// SaveFault saves the fault of provider, its Expires to the millisecond; a fault of mode
// none removes it.
func (s *SQLite) SaveFault(ctx context.Context, provider string, f state.Fault) error {
	if f.Fault.Mode == fault.ModeNone {
		if _, err := s.db.ExecContext(ctx, "DELETE FROM state_faults WHERE provider = ?", provider); err != nil {
			return fmt.Errorf("state sqlite %s: clear fault of %s: %w", s.path, provider, err)
		}
		return nil
	}
	raw, err := json.Marshal(f.Fault)
	if err != nil {
		return fmt.Errorf("state sqlite %s: save fault of %s: %w", s.path, provider, err)
	}
	var expires int64
	if !f.Expires.IsZero() {
		expires = f.Expires.UnixMilli()
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO state_faults (provider, fault, expires_unix_ms) VALUES (?, ?, ?)
		ON CONFLICT (provider) DO UPDATE SET fault = excluded.fault, expires_unix_ms = excluded.expires_unix_ms`,
		provider, string(raw), expires); err != nil {
		return fmt.Errorf("state sqlite %s: save fault of %s: %w", s.path, provider, err)
	}
	return nil
}

// SaveDrill implements Store: one transaction reads the scope's drills and writes them back
// with d, synced before it returns.
func (s *SQLite) SaveDrill(ctx context.Context, d state.Drill) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state sqlite %s: save drill: %w", s.path, err)
	}
	defer tx.Rollback()
	var ds state.Drills
	var raw string
	switch err := tx.QueryRowContext(ctx, "SELECT drills FROM state_drills WHERE scope = ?", d.Scope).Scan(&raw); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("state sqlite %s: save drill: %w", s.path, err)
	default:
		if err := json.Unmarshal([]byte(raw), &ds); err != nil {
			return fmt.Errorf("state sqlite %s: drills of %s: %w", s.path, d.Scope, err)
		}
	}
	out, err := json.Marshal(ds.Add(d))
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO state_drills (scope, drills) VALUES (?, ?)
		ON CONFLICT (scope) DO UPDATE SET drills = excluded.drills`, d.Scope, string(out)); err != nil {
		return fmt.Errorf("state sqlite %s: save drill: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state sqlite %s: save drill: %w", s.path, err)
	}
	return nil
}

// LoadDrills implements Store.
func (s *SQLite) LoadDrills(ctx context.Context) (map[string]state.Drills, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT scope, drills FROM state_drills")
	if err != nil {
		return nil, fmt.Errorf("state sqlite %s: load drills: %w", s.path, err)
	}
	defer rows.Close()
	out := map[string]state.Drills{}
	for rows.Next() {
		var scope, raw string
		if err := rows.Scan(&scope, &raw); err != nil {
			return nil, fmt.Errorf("state sqlite %s: load drills: %w", s.path, err)
		}
		var ds state.Drills
		if err := json.Unmarshal([]byte(raw), &ds); err != nil {
			return nil, fmt.Errorf("state sqlite %s: drills of %s: %w", s.path, scope, err)
		}
		out[scope] = ds
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state sqlite %s: load drills: %w", s.path, err)
	}
	return out, nil
}

// SaveCanary implements Store: c replaces its task's decision, synced before it returns.
func (s *SQLite) SaveCanary(ctx context.Context, c state.Canary) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("state sqlite %s: save canary of %s: %w", s.path, c.Task, err)
	}
	// A decision kept for the same fingerprint stands: the first decision of a canary.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO state_canaries (task, canary) VALUES (?, ?)
		ON CONFLICT (task) DO UPDATE SET canary = excluded.canary
		WHERE json_extract(state_canaries.canary, '$.fingerprint') IS NOT json_extract(excluded.canary, '$.fingerprint')`,
		c.Task, string(raw)); err != nil {
		return fmt.Errorf("state sqlite %s: save canary of %s: %w", s.path, c.Task, err)
	}
	return nil
}

// LoadCanaries implements Store.
func (s *SQLite) LoadCanaries(ctx context.Context) (map[string]state.Canary, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT task, canary FROM state_canaries")
	if err != nil {
		return nil, fmt.Errorf("state sqlite %s: load canaries: %w", s.path, err)
	}
	defer rows.Close()
	out := map[string]state.Canary{}
	for rows.Next() {
		var task, raw string
		if err := rows.Scan(&task, &raw); err != nil {
			return nil, fmt.Errorf("state sqlite %s: load canaries: %w", s.path, err)
		}
		var c state.Canary
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return nil, fmt.Errorf("state sqlite %s: canary of %s: %w", s.path, task, err)
		}
		out[task] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state sqlite %s: load canaries: %w", s.path, err)
	}
	return out, nil
}

// Close closes the database; the last connection's close checkpoints the WAL into the file.
func (s *SQLite) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("state sqlite %s: close: %w", s.path, err)
	}
	return nil
}
