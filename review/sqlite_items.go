package review

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

const itemColumns = `id, task, tenant, idem_key, input, attempts, prompt_versions, status, created_ns,
	operator, claimed_ns, claim_expires_ns, resolved_ns, result, reason,
	delivery_state, delivery_attempts, delivery_last_ns, delivery_last_status, delivery_last_error, delivery_next_ns`

type scanner interface{ Scan(dest ...any) error }

func scanItem(sc scanner) (*Item, error) {
	var (
		it                                    Item
		input, attempts, versions             string
		created, claimed, expires, resolvedAt int64
		result                                sql.NullString
		status, delivery                      string
		lastAttempt, nextAt                   int64
	)
	err := sc.Scan(&it.ID, &it.Task, &it.Tenant, &it.IdempotencyKey, &input, &attempts, &versions, &status,
		&created, &it.Operator, &claimed, &expires, &resolvedAt, &result, &it.Reason,
		&delivery, &it.Delivery.Attempts, &lastAttempt, &it.Delivery.LastStatus, &it.Delivery.LastError, &nextAt)
	if err != nil {
		return nil, err
	}
	it.Status = Status(status)
	it.Input = json.RawMessage(input)
	if err := json.Unmarshal([]byte(attempts), &it.Attempts); err != nil {
		return nil, fmt.Errorf("item %s: attempts: %w", it.ID, err)
	}
	if err := json.Unmarshal([]byte(versions), &it.PromptVersions); err != nil {
		return nil, fmt.Errorf("item %s: prompt versions: %w", it.ID, err)
	}
	it.CreatedAt, it.ClaimedAt, it.ClaimExpiresAt, it.ResolvedAt = timeOf(created), timeOf(claimed), timeOf(expires), timeOf(resolvedAt)
	if result.Valid {
		it.Result = json.RawMessage(result.String)
	}
	it.Delivery.State, it.Delivery.LastAttempt, it.Delivery.NextAt = DeliveryState(delivery), timeOf(lastAttempt), timeOf(nextAt)
	return &it, nil
}

// Get returns the item as tenant sees it.
func (s *SQLite) Get(ctx context.Context, tenant, id string) (*Item, error) {
	it, err := s.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if it.Tenant != tenant {
		return nil, ErrNotFound
	}
	return it, nil
}

// Queued returns the item that holds item's idempotency key.
func (s *SQLite) Queued(ctx context.Context, item *Item) (*Item, error) {
	if item.IdempotencyKey == "" {
		return nil, ErrNotFound
	}
	var id, hash, input string
	err := s.db.QueryRowContext(ctx, `SELECT id, input_hash, input FROM items WHERE tenant = ? AND task = ? AND idem_key = ?`,
		item.Tenant, item.Task, item.IdempotencyKey).Scan(&id, &hash, &input)
	switch {
	case isNoRows(err):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("review: find key: %w", err)
	}
	if storedHash(hash, input) != inputHash(item.Input) {
		return nil, ErrIdempotencyMismatch
	}
	return s.Get(ctx, item.Tenant, id)
}

// Lookup returns the item, whatever its tenant.
func (s *SQLite) Lookup(ctx context.Context, id string) (*Item, error) {
	it, err := scanItem(s.db.QueryRowContext(ctx, `SELECT `+itemColumns+` FROM items WHERE id = ?`, id))
	switch {
	case isNoRows(err):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("review: read %s: %w", id, err)
	}
	it.settle(s.opts.Clock.Now())
	return it, nil
}

// List returns a page of items, oldest first.
func (s *SQLite) List(ctx context.Context, f Filter) (*Page, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	now := s.opts.Clock.Now().UnixNano()
	var (
		where []string
		args  []any
	)
	switch f.Status {
	case "":
	case StatusPending:
		where = append(where, `(status = 'pending' OR (status = 'claimed' AND claim_expires_ns <> 0 AND claim_expires_ns <= ?))`)
		args = append(args, now)
	case StatusClaimed:
		where = append(where, `status = 'claimed' AND (claim_expires_ns = 0 OR claim_expires_ns > ?)`)
		args = append(args, now)
	default:
		where = append(where, `status = ?`)
		args = append(args, string(f.Status))
	}
	if f.Task != "" {
		where = append(where, `task = ?`)
		args = append(args, f.Task)
	}
	if f.Cursor != "" {
		ns, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		where = append(where, `(created_ns, id) > (?, ?)`)
		args = append(args, ns, id)
	}
	q := `SELECT ` + itemColumns + ` FROM items`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := f.limit()
	q += ` ORDER BY created_ns, id LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("review: list: %w", err)
	}
	defer rows.Close()
	page := &Page{Items: []*Item{}}
	clock := s.opts.Clock.Now()
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("review: list: %w", err)
		}
		it.settle(clock)
		page.Items = append(page.Items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("review: list: %w", err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = encodeCursor(page.Items[limit-1])
	}
	return page, nil
}

// Claim gives operator the item.
func (s *SQLite) Claim(ctx context.Context, id, operator string) (*Item, error) {
	return s.change(ctx, id, func(it *Item, now time.Time) error { return it.claim(operator, now, s.opts.ClaimTTL) })
}

// Resolve answers the item with result.
func (s *SQLite) Resolve(ctx context.Context, id, operator string, result json.RawMessage) (*Item, error) {
	return s.change(ctx, id, s.opts.answering(func(it *Item, now time.Time) error { return it.resolve(operator, result, now) }))
}

// Reject closes the item for reason.
func (s *SQLite) Reject(ctx context.Context, id, operator, reason string) (*Item, error) {
	return s.change(ctx, id, s.opts.answering(func(it *Item, now time.Time) error { return it.reject(operator, reason, now) }))
}

// Release gives back operator's claim.
func (s *SQLite) Release(ctx context.Context, id, operator string) error {
	_, err := s.change(ctx, id, func(it *Item, now time.Time) error { return it.release(operator, now) })
	return err
}

// change reads the item, applies fn and writes it back, in one transaction that holds the
// write lock from its start (BEGIN IMMEDIATE): two operators never both win an item.
func (s *SQLite) change(ctx context.Context, id string, fn func(*Item, time.Time) error) (*Item, error) {
	it, err := s.changeTx(ctx, id, fn)
	switch {
	case err == nil:
	case isRefusal(err):
		return nil, err.(refusal).err
	default:
		return nil, fmt.Errorf("review: update %s: %w", id, s.wrote(ctx, err))
	}
	_ = s.wrote(ctx, nil)
	s.meter.answered(it)
	s.refreshTask(ctx, it.Task)
	s.maybePurge(ctx, s.opts.Clock.Now())
	return it, nil
}

// refusal marks the item's own refusal, which is no failure of the store.
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }
func (r refusal) Unwrap() error { return r.err }

func isRefusal(err error) bool {
	_, ok := err.(refusal)
	return ok
}

func (s *SQLite) changeTx(ctx context.Context, id string, fn func(*Item, time.Time) error) (*Item, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	it, err := scanItem(tx.QueryRowContext(ctx, `SELECT `+itemColumns+` FROM items WHERE id = ?`, id))
	if isNoRows(err) {
		return nil, refusal{ErrNotFound}
	}
	if err != nil {
		return nil, err
	}
	if err := fn(it, s.opts.Clock.Now()); err != nil {
		return nil, refusal{err}
	}
	var result any
	if it.Result != nil {
		result = string(it.Result)
	}
	d := it.Delivery
	_, err = tx.ExecContext(ctx, `UPDATE items SET status = ?, operator = ?, claimed_ns = ?, claim_expires_ns = ?,
		resolved_ns = ?, result = ?, reason = ?, delivery_state = ?, delivery_attempts = ?, delivery_last_ns = ?,
		delivery_last_status = ?, delivery_last_error = ?, delivery_next_ns = ? WHERE id = ?`,
		string(it.Status), it.Operator, nsOf(it.ClaimedAt), nsOf(it.ClaimExpiresAt), nsOf(it.ResolvedAt), result, it.Reason,
		string(d.State), d.Attempts, nsOf(d.LastAttempt), d.LastStatus, d.LastError, nsOf(d.NextAt), id)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return it, nil
}

// Stats counts each task's unanswered items.
func (s *SQLite) Stats(ctx context.Context) (map[string]TaskStats, error) {
	return s.stats(ctx, "")
}

func (s *SQLite) stats(ctx context.Context, task string) (map[string]TaskStats, error) {
	now := s.opts.Clock.Now().UnixNano()
	q := `SELECT task,
			SUM(CASE WHEN status = 'pending' OR (claim_expires_ns <> 0 AND claim_expires_ns <= ?) THEN 1 ELSE 0 END),
			COUNT(*), MIN(created_ns)
		FROM items WHERE status IN ('pending', 'claimed')`
	args := []any{now}
	if task != "" {
		q += ` AND task = ?`
		args = append(args, task)
	}
	rows, err := s.db.QueryContext(ctx, q+` GROUP BY task`, args...)
	if err != nil {
		return nil, fmt.Errorf("review: stats: %w", err)
	}
	defer rows.Close()
	return scanStats(rows)
}

// refreshTask publishes one task's depth after a write, from the task_depth row and the
// oldest unanswered item found by the items_status index: a few pages read, however long the
// queue (counting the queue here made each commit wait for a scan of it). A failure is
// logged, as the write itself committed.
func (s *SQLite) refreshTask(ctx context.Context, task string) {
	if s.meter.m == nil {
		return
	}
	var (
		unanswered int64
		oldest     sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, `SELECT
			(SELECT IFNULL(MAX(unanswered), 0) FROM task_depth WHERE task = ?1),
			(SELECT MIN(first) FROM (
				SELECT MIN(created_ns) AS first FROM items WHERE status = 'pending' AND task = ?1
				UNION ALL
				SELECT MIN(created_ns) FROM items WHERE status = 'claimed' AND task = ?1))`,
		task).Scan(&unanswered, &oldest)
	if err != nil {
		s.opts.Logger.Warn("review metrics not refreshed", "task", task, "err", err)
		return
	}
	// The depth metric does not split pending from claimed: all of it counts as Pending.
	s.meter.depth(task, TaskStats{Pending: int(unanswered), Oldest: timeOf(oldest.Int64)})
}

// refreshAll publishes every task's depth (at open).
func (s *SQLite) refreshAll(ctx context.Context) error {
	if s.meter.m == nil {
		return nil
	}
	all, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	for task, st := range all {
		s.meter.depth(task, st)
	}
	return nil
}

// statRows are the rows of a stats query, as database/sql and pgx give them: task, pending
// count, unanswered count and the oldest creation time in Unix nanoseconds.
type statRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanStats reads the rows of a stats query, for SQLite and PostgreSQL alike.
func scanStats(rows statRows) (map[string]TaskStats, error) {
	out := map[string]TaskStats{}
	for rows.Next() {
		var (
			name                  string
			pending, total, first int64
		)
		if err := rows.Scan(&name, &pending, &total, &first); err != nil {
			return nil, fmt.Errorf("review: stats: %w", err)
		}
		out[name] = TaskStats{Pending: int(pending), Claimed: int(total - pending), Oldest: timeOf(first)}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("review: stats: %w", err)
	}
	return out, nil
}
