package review

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the Store of a fleet: every gateway of the fleet opens the same PostgreSQL
// database, and an operator's claim holds across all of them. Each write is one transaction,
// committed (so on disk, with the server's synchronous_commit) before it returns; Enqueues
// that arrive together in one process share a commit, as in SQLite (postgres_commit.go).
// Its tables (afloat_review_*) live in the first schema of the connection's search_path
// and are migrated when it opens, under an advisory lock, so that gateways that start
// together migrate once.
//
// Times are the Options.Clock's, never the server's now(). A failed write marks the store
// unhealthy (Health, Ping, afloat_review_store_healthy) until a write succeeds again. It runs
// no goroutine of its own (the pool's health check aside): the retention purge rides on
// writes and Ping.
//
// It is safe for concurrent use.
type Postgres struct {
	pool  *pgxpool.Pool
	name  string // user@host:port/database, for logs and errors
	opts  Options
	meter meter
	// enqueueLock is the advisory lock that the Enqueue commits of this schema's tables take
	// in turn (postgres_commit.go); purgeLock the one a purge holds, so that gateways that
	// purge at once do not delete the same rows.
	enqueueLock, purgeLock int64

	mu        sync.Mutex // guards what follows
	lastErr   error      // the last write's failure; nil once a write succeeded
	lastPurge time.Time

	// Group commit (postgres_commit.go), as in SQLite.
	turn     chan struct{}
	pendMu   sync.Mutex
	pending  []*enqueueReq
	commits  atomic.Int64
	testHook func(event string, n int)
}

// pgMigrations are the schema's versions, applied in order: a database whose
// afloat_review_migrations table holds versions 1..n runs pgMigrations[n:], each recorded
// there in the transaction that applies it. Append only; never edit a released one.
var pgMigrations = []string{
	// 1: the items (times in nanoseconds of the store's clock, the JSON as sent), the
	// unanswered items of each task kept by a trigger in the transaction that changes an item
	// (the depth metric and MaxPending read it instead of counting the queue), and the row
	// that Ping rewrites.
	`CREATE TABLE afloat_review_items (
		id                   text COLLATE "C" PRIMARY KEY,
		task                 text    NOT NULL,
		tenant               text    NOT NULL,
		idem_key             text    NOT NULL DEFAULT '',
		input_hash           text    NOT NULL DEFAULT '',
		input                text    NOT NULL,
		attempts             text    NOT NULL,
		prompt_versions      text    NOT NULL,
		status               text    NOT NULL CHECK (status IN ('pending', 'claimed', 'resolved', 'rejected')),
		created_ns           bigint  NOT NULL,
		operator             text    NOT NULL DEFAULT '',
		claimed_ns           bigint  NOT NULL DEFAULT 0,
		claim_expires_ns     bigint  NOT NULL DEFAULT 0,
		resolved_ns          bigint  NOT NULL DEFAULT 0,
		result               text,
		reason               text    NOT NULL DEFAULT '',
		delivery_state       text    NOT NULL DEFAULT '' CHECK (delivery_state IN ('', 'pending', 'delivered', 'failed')),
		delivery_attempts    integer NOT NULL DEFAULT 0,
		delivery_last_ns     bigint  NOT NULL DEFAULT 0,
		delivery_last_status integer NOT NULL DEFAULT 0,
		delivery_last_error  text    NOT NULL DEFAULT '',
		delivery_next_ns     bigint  NOT NULL DEFAULT 0
	);
	CREATE UNIQUE INDEX afloat_review_items_idempotency ON afloat_review_items (tenant, task, idem_key) WHERE idem_key <> '';
	CREATE INDEX afloat_review_items_order ON afloat_review_items (created_ns, id);
	CREATE INDEX afloat_review_items_status ON afloat_review_items (status, task, created_ns);
	CREATE INDEX afloat_review_items_answered ON afloat_review_items (resolved_ns) WHERE resolved_ns <> 0;
	CREATE INDEX afloat_review_items_due ON afloat_review_items (delivery_next_ns, id) WHERE delivery_state = 'pending';

	CREATE TABLE afloat_review_depth (task text PRIMARY KEY, unanswered bigint NOT NULL);
	CREATE FUNCTION afloat_review_depth_track() RETURNS trigger LANGUAGE plpgsql
		SET search_path FROM CURRENT AS $$
	BEGIN
		IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status IN ('pending', 'claimed') THEN
			UPDATE afloat_review_depth SET unanswered = unanswered - 1 WHERE task = OLD.task;
		END IF;
		IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status IN ('pending', 'claimed') THEN
			INSERT INTO afloat_review_depth AS d (task, unanswered) VALUES (NEW.task, 1)
				ON CONFLICT (task) DO UPDATE SET unanswered = d.unanswered + 1;
		END IF;
		RETURN NULL;
	END $$;
	CREATE TRIGGER afloat_review_depth_insert AFTER INSERT ON afloat_review_items FOR EACH ROW
		WHEN (NEW.status IN ('pending', 'claimed')) EXECUTE FUNCTION afloat_review_depth_track();
	CREATE TRIGGER afloat_review_depth_update AFTER UPDATE OF status, task ON afloat_review_items FOR EACH ROW
		WHEN (OLD.task <> NEW.task OR (OLD.status IN ('pending', 'claimed')) <> (NEW.status IN ('pending', 'claimed')))
		EXECUTE FUNCTION afloat_review_depth_track();
	CREATE TRIGGER afloat_review_depth_delete AFTER DELETE ON afloat_review_items FOR EACH ROW
		WHEN (OLD.status IN ('pending', 'claimed')) EXECUTE FUNCTION afloat_review_depth_track();

	CREATE TABLE afloat_review_probe (id integer PRIMARY KEY CHECK (id = 1), at_ns bigint NOT NULL);`,
}

// OpenPostgres connects to the database at url (a postgres:// URL or a key=value DSN, as
// libpq takes; pgxpool's pool_* settings included) and migrates its schema. The tables are
// created in the first schema of the search_path ("?search_path=afloat" puts them in schema
// afloat, which must exist). It fails when the database cannot be reached, refuses a commit,
// or was migrated by a newer afloat: a store that opens must commit, or every critical call
// would answer 503.
func OpenPostgres(ctx context.Context, url string, opts Options) (*Postgres, error) {
	if opts.ClaimTTL < 0 || opts.Retention < 0 || opts.PurgeEvery < 0 || opts.BusyTimeout < 0 {
		return nil, fmt.Errorf("%w: negative duration in %+v", ErrInvalid, durations(opts))
	}
	if opts.MaxPending < 0 {
		return nil, fmt.Errorf("%w: max pending %d is negative", ErrInvalid, opts.MaxPending)
	}
	opts = opts.withDefaults()
	if url == "" {
		return nil, fmt.Errorf("%w: the postgres url is empty", ErrInvalid)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("review: postgres: %w", err) // pgx masks the password
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = opts.BusyTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("review: postgres: %w", err)
	}
	c := cfg.ConnConfig
	name := fmt.Sprintf("%s@%s/%s", c.User, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.Database)
	p := &Postgres{pool: pool, name: name, opts: opts, meter: newMeter(opts.Metrics, opts.Clock), turn: make(chan struct{}, 1)}
	if err := p.init(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("review: open postgres %s: %w", name, err)
	}
	return p, nil
}

// CheckPostgresURL reports whether OpenPostgres can parse url, without connecting.
func CheckPostgresURL(url string) error {
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return fmt.Errorf("review: postgres: %w", err) // pgx masks the password
	}
	return nil
}

// Database names the database the store uses (user@host:port/database), without the
// password.
func (p *Postgres) Database() string { return p.name }

func (p *Postgres) init(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*p.opts.BusyTimeout) // a migration waits for another's
	defer cancel()
	var schema *string
	var encoding string
	if err := p.pool.QueryRow(ctx, `SELECT current_schema(), current_setting('server_encoding')`).Scan(&schema, &encoding); err != nil {
		return err
	}
	if schema == nil {
		return errors.New("no schema to create the tables in: the search_path names none that exists")
	}
	if encoding != "UTF8" && encoding != "SQL_ASCII" {
		return fmt.Errorf("the database's encoding is %s: the store needs UTF8", encoding)
	}
	if err := p.pool.QueryRow(ctx, `SELECT hashtextextended('afloat_review_enqueue:' || $1, 0), hashtextextended('afloat_review_purge:' || $1, 0)`,
		*schema).Scan(&p.enqueueLock, &p.purgeLock); err != nil {
		return err
	}
	if err := p.migrate(ctx, *schema); err != nil {
		return err
	}
	if _, err := p.pool.Exec(ctx, pgProbe, p.opts.Clock.Now().UnixNano()); err != nil {
		return fmt.Errorf("commit at open: %w", err)
	}
	if err := p.refreshAll(ctx); err != nil {
		return err
	}
	now := p.opts.Clock.Now()
	p.mu.Lock()
	due := p.purgeDue(now)
	p.mu.Unlock()
	if due {
		if _, err := p.Purge(ctx); err != nil {
			return err
		}
	}
	return nil
}

// migrate brings the schema to the newest version in one transaction, holding an advisory
// lock of the schema: a gateway that starts while another migrates waits for it, then finds
// the schema current.
func (p *Postgres) migrate(ctx context.Context, schema string) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('afloat_review_migrate:' || $1, 0))`, schema); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS afloat_review_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM afloat_review_migrations`).Scan(&version); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if version > len(pgMigrations) {
		return fmt.Errorf("the database is at schema version %d, newer than this build's %d", version, len(pgMigrations))
	}
	if version == len(pgMigrations) {
		return nil
	}
	for v := version; v < len(pgMigrations); v++ {
		if _, err := tx.Exec(ctx, pgMigrations[v]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO afloat_review_migrations (version) VALUES ($1)`, v+1); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p.opts.Logger.Info("review store migrated", "store", "postgres", "schema", schema, "from", version, "to", len(pgMigrations))
	return nil
}

const pgProbe = `INSERT INTO afloat_review_probe (id, at_ns) VALUES (1, $1)
	ON CONFLICT (id) DO UPDATE SET at_ns = excluded.at_ns`

// Kind names the store in /admin/status.
func (p *Postgres) Kind() string { return "postgres" }

// Close closes the pool's connections, waiting for those in use to be given back.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

// Ping commits a write (the probe row), so that a database that is down, read-only (a
// standby after a failover) or out of disk shows here and not only on the next item; it runs
// the retention purge when due.
func (p *Postgres) Ping(ctx context.Context) error {
	now := p.opts.Clock.Now()
	wctx, cancel := p.writeCtx(ctx)
	_, err := p.pool.Exec(wctx, pgProbe, now.UnixNano())
	cancel()
	if err = p.wrote(ctx, err); err != nil {
		return fmt.Errorf("review: the store cannot commit: %w", err)
	}
	p.maybePurge(ctx, now)
	return nil
}

// Health returns the last write's failure, or nil when the last write committed. It does no
// I/O.
func (p *Postgres) Health() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// writeCtx bounds a write by the busy timeout: a database that does not answer fails the
// write instead of holding the caller.
func (p *Postgres) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.opts.BusyTimeout)
}

// wrote records the outcome of a write and returns err. The caller's own cancellation is not
// the store's failure.
func (p *Postgres) wrote(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return err
	}
	p.mu.Lock()
	was := p.lastErr
	p.lastErr = err
	p.mu.Unlock()
	p.meter.healthy(err == nil)
	switch {
	case err != nil && was == nil:
		p.opts.Logger.Error("review store cannot commit", "store", "postgres", "err", err)
	case err == nil && was != nil:
		p.opts.Logger.Info("review store commits again", "store", "postgres")
	}
	return err
}

// Purge deletes the items answered longer ago than the retention, counts them by task and
// logs how many; with no retention it deletes nothing. While another gateway purges, it
// leaves the purge to that one and returns 0.
func (p *Postgres) Purge(ctx context.Context) (int, error) {
	now := p.opts.Clock.Now()
	p.mu.Lock()
	p.lastPurge = now
	p.mu.Unlock()
	if p.opts.Retention <= 0 {
		return 0, nil
	}
	wctx, cancel := p.writeCtx(ctx)
	defer cancel()
	tasks, err := p.purgeTx(wctx, now.Add(-p.opts.Retention).UnixNano())
	if err != nil {
		return 0, p.wrote(ctx, fmt.Errorf("review: purge: %w", err))
	}
	_ = p.wrote(ctx, nil)
	byTask := map[string]int{}
	for _, task := range tasks {
		byTask[task]++
	}
	for task, c := range byTask {
		p.meter.purged(task, c)
	}
	if n := len(tasks); n > 0 {
		p.opts.Logger.Info("review items purged after retention", "items", n, "retention", p.opts.Retention.String())
	}
	return len(tasks), nil
}

// purgeTx deletes the answered items older than cutoff (nanoseconds) and returns their tasks.
func (p *Postgres) purgeTx(ctx context.Context, cutoff int64) ([]string, error) {
	tx, err := p.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, p.purgeLock).Scan(&mine); err != nil || !mine {
		return nil, err
	}
	rows, err := tx.Query(ctx,
		`DELETE FROM afloat_review_items WHERE resolved_ns <> 0 AND resolved_ns <= $1 AND status IN ('resolved', 'rejected') RETURNING task`, cutoff)
	if err != nil {
		return nil, err
	}
	tasks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return tasks, tx.Commit(ctx)
}

func (p *Postgres) purgeDue(now time.Time) bool {
	return p.opts.Retention > 0 && now.Sub(p.lastPurge) >= p.opts.PurgeEvery
}

// maybePurge purges when due; a failed purge is logged and retried at the next due time.
func (p *Postgres) maybePurge(ctx context.Context, now time.Time) {
	p.mu.Lock()
	due := p.purgeDue(now)
	p.mu.Unlock()
	if !due {
		return
	}
	if _, err := p.Purge(ctx); err != nil && ctx.Err() == nil {
		p.opts.Logger.Error("review purge failed", "err", err)
	}
}

// pgText refuses what a PostgreSQL text column cannot hold (a NUL byte, invalid UTF-8), so
// that such a value is the caller's invalid argument and not a failed commit: in a group
// commit, one bad item would fail every item of its batch.
func pgText(name, s string) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: the %s is not valid UTF-8 text", ErrInvalid, name)
	}
	return nil
}

// begin starts a transaction, once more when the first BEGIN never reached the server (a
// pooled connection the server had closed, after a restart): nothing was sent, so nothing
// can be applied twice.
func (p *Postgres) begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil && pgconn.SafeToRetry(err) && ctx.Err() == nil {
		tx, err = p.pool.Begin(ctx)
	}
	return tx, err
}
