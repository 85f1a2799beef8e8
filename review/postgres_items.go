package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

const pgItemColumns = `id, task, tenant, idem_key, input, attempts, prompt_versions, status, created_ns,
	operator, claimed_ns, claim_expires_ns, resolved_ns, result, reason,
	delivery_state, delivery_attempts, delivery_last_ns, delivery_last_status, delivery_last_error, delivery_next_ns`

func pgScanItem(row pgx.Row) (*Item, error) {
	var (
		it                                    Item
		input, attempts, versions, status     string
		created, claimed, expires, resolvedAt int64
		result                                *string
		dState                                string
		dAttempts, dStatus                    int32
		dLast, dNext                          int64
	)
	err := row.Scan(&it.ID, &it.Task, &it.Tenant, &it.IdempotencyKey, &input, &attempts, &versions, &status,
		&created, &it.Operator, &claimed, &expires, &resolvedAt, &result, &it.Reason,
		&dState, &dAttempts, &dLast, &dStatus, &it.Delivery.LastError, &dNext)
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
	if result != nil {
		it.Result = json.RawMessage(*result)
	}
	it.Delivery.State, it.Delivery.Attempts, it.Delivery.LastStatus = DeliveryState(dState), int(dAttempts), int(dStatus)
	it.Delivery.LastAttempt, it.Delivery.NextAt = timeOf(dLast), timeOf(dNext)
	return &it, nil
}

// Get returns the item as tenant sees it.
func (p *Postgres) Get(ctx context.Context, tenant, id string) (*Item, error) {
	it, err := p.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if it.Tenant != tenant {
		return nil, ErrNotFound
	}
	return it, nil
}

// Queued returns the item that holds item's idempotency key.
func (p *Postgres) Queued(ctx context.Context, item *Item) (*Item, error) {
	if item.IdempotencyKey == "" {
		return nil, ErrNotFound
	}
	var id, hash, input string
	err := p.pool.QueryRow(ctx, pgKeyHolder, item.Tenant, item.Task, item.IdempotencyKey).Scan(&id, &hash, &input)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("review: find key: %w", err)
	}
	if storedHash(hash, input) != inputHash(item.Input) {
		return nil, ErrIdempotencyMismatch
	}
	return p.Get(ctx, item.Tenant, id)
}

// Lookup returns the item, whatever its tenant.
func (p *Postgres) Lookup(ctx context.Context, id string) (*Item, error) {
	it, err := pgScanItem(p.pool.QueryRow(ctx, `SELECT `+pgItemColumns+` FROM afloat_review_items WHERE id = $1`, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("review: read %s: %w", id, err)
	}
	it.settle(p.opts.Clock.Now())
	return it, nil
}

// List returns a page of items, oldest first.
func (p *Postgres) List(ctx context.Context, f Filter) (*Page, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	now := p.opts.Clock.Now()
	switch f.Status {
	case "":
	case StatusPending:
		where = append(where, `(status = 'pending' OR (status = 'claimed' AND claim_expires_ns <> 0 AND claim_expires_ns <= `+arg(now.UnixNano())+`))`)
	case StatusClaimed:
		where = append(where, `status = 'claimed' AND (claim_expires_ns = 0 OR claim_expires_ns > `+arg(now.UnixNano())+`)`)
	default:
		where = append(where, `status = `+arg(string(f.Status)))
	}
	if f.Task != "" {
		where = append(where, `task = `+arg(f.Task))
	}
	if f.Cursor != "" {
		ns, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		where = append(where, `(created_ns, id) > (`+arg(ns)+`, `+arg(id)+`)`)
	}
	q := `SELECT ` + pgItemColumns + ` FROM afloat_review_items`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := f.limit()
	q += ` ORDER BY created_ns, id LIMIT ` + arg(limit+1)
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("review: list: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Item, error) { return pgScanItem(r) })
	if err != nil {
		return nil, fmt.Errorf("review: list: %w", err)
	}
	for _, it := range items {
		it.settle(now)
	}
	page := &Page{Items: items}
	if page.Items == nil {
		page.Items = []*Item{}
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = encodeCursor(page.Items[limit-1])
	}
	return page, nil
}

// Claim gives operator the item.
func (p *Postgres) Claim(ctx context.Context, id, operator string) (*Item, error) {
	if err := pgText("operator", operator); err != nil {
		return nil, err
	}
	return p.change(ctx, id, func(it *Item, now time.Time) error { return it.claim(operator, now, p.opts.ClaimTTL) })
}

// Resolve answers the item with result.
func (p *Postgres) Resolve(ctx context.Context, id, operator string, result json.RawMessage) (*Item, error) {
	if err := pgText("operator", operator); err != nil {
		return nil, err
	}
	if !utf8.Valid(result) {
		return nil, fmt.Errorf("%w: the result is not valid UTF-8", ErrInvalid)
	}
	return p.change(ctx, id, p.opts.answering(func(it *Item, now time.Time) error { return it.resolve(operator, result, now) }))
}

// Reject closes the item for reason.
func (p *Postgres) Reject(ctx context.Context, id, operator, reason string) (*Item, error) {
	if err := pgText("operator", operator); err != nil {
		return nil, err
	}
	if err := pgText("reason", reason); err != nil {
		return nil, err
	}
	return p.change(ctx, id, p.opts.answering(func(it *Item, now time.Time) error { return it.reject(operator, reason, now) }))
}

// Release gives back operator's claim.
func (p *Postgres) Release(ctx context.Context, id, operator string) error {
	if err := pgText("operator", operator); err != nil {
		return err
	}
	_, err := p.change(ctx, id, func(it *Item, now time.Time) error { return it.release(operator, now) })
	return err
}

// change reads the item, applies fn and writes it back in one transaction that holds the
// item's row lock (SELECT … FOR UPDATE) from the read on: two operators, on one gateway or
// two, never both win an item; the second reads the first's change once it committed. With
// an outbox, the answer's delivery is due at once, in the same commit (Options.answering).
func (p *Postgres) change(ctx context.Context, id string, fn func(*Item, time.Time) error) (*Item, error) {
	wctx, cancel := p.writeCtx(ctx)
	defer cancel()
	it, err := p.changeTx(wctx, id, fn)
	switch {
	case err == nil:
	case isRefusal(err):
		return nil, err.(refusal).err
	default:
		return nil, fmt.Errorf("review: update %s: %w", id, p.wrote(ctx, err))
	}
	_ = p.wrote(ctx, nil)
	p.meter.answered(it)
	p.refreshTask(ctx, it.Task)
	p.maybePurge(ctx, p.opts.Clock.Now())
	return it, nil
}

func (p *Postgres) changeTx(ctx context.Context, id string, fn func(*Item, time.Time) error) (*Item, error) {
	tx, err := p.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	it, err := pgScanItem(tx.QueryRow(ctx, `SELECT `+pgItemColumns+` FROM afloat_review_items WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, refusal{ErrNotFound}
	}
	if err != nil {
		return nil, err
	}
	if err := fn(it, p.opts.Clock.Now()); err != nil {
		return nil, refusal{err}
	}
	var result *string
	if it.Result != nil {
		s := string(it.Result)
		result = &s
	}
	d := it.Delivery
	_, err = tx.Exec(ctx, `UPDATE afloat_review_items SET status = $1, operator = $2, claimed_ns = $3, claim_expires_ns = $4,
		resolved_ns = $5, result = $6, reason = $7, delivery_state = $8, delivery_attempts = $9, delivery_last_ns = $10,
		delivery_last_status = $11, delivery_last_error = $12, delivery_next_ns = $13 WHERE id = $14`,
		string(it.Status), it.Operator, nsOf(it.ClaimedAt), nsOf(it.ClaimExpiresAt), nsOf(it.ResolvedAt), result, it.Reason,
		string(d.State), d.Attempts, nsOf(d.LastAttempt), d.LastStatus, d.LastError, nsOf(d.NextAt), id)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return it, nil
}

// Stats counts each task's unanswered items.
func (p *Postgres) Stats(ctx context.Context) (map[string]TaskStats, error) {
	rows, err := p.pool.Query(ctx, `SELECT task,
			count(*) FILTER (WHERE status = 'pending' OR (claim_expires_ns <> 0 AND claim_expires_ns <= $1)),
			count(*), min(created_ns)
		FROM afloat_review_items WHERE status IN ('pending', 'claimed') GROUP BY task`, p.opts.Clock.Now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("review: stats: %w", err)
	}
	defer rows.Close()
	return scanStats(rows)
}

// refreshTask publishes one task's depth after a write, from its afloat_review_depth row
// and the oldest unanswered item found by the status index: a few pages read, however long
// the queue. A failure is logged, as the write itself committed.
func (p *Postgres) refreshTask(ctx context.Context, task string) {
	if p.meter.m == nil {
		return
	}
	var (
		unanswered int64
		oldest     *int64
	)
	err := p.pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(max(unanswered), 0) FROM afloat_review_depth WHERE task = $1),
			(SELECT min(first) FROM (
				SELECT min(created_ns) AS first FROM afloat_review_items WHERE status = 'pending' AND task = $1
				UNION ALL
				SELECT min(created_ns) FROM afloat_review_items WHERE status = 'claimed' AND task = $1) m)`,
		task).Scan(&unanswered, &oldest)
	if err != nil {
		p.opts.Logger.Warn("review metrics not refreshed", "task", task, "err", err)
		return
	}
	var first int64
	if oldest != nil {
		first = *oldest
	}
	// The depth metric does not split pending from claimed: all of it counts as Pending.
	p.meter.depth(task, TaskStats{Pending: int(unanswered), Oldest: timeOf(first)})
}

// refreshAll publishes every task's depth (at open).
func (p *Postgres) refreshAll(ctx context.Context) error {
	if p.meter.m == nil {
		return nil
	}
	all, err := p.Stats(ctx)
	if err != nil {
		return err
	}
	for task, st := range all {
		p.meter.depth(task, st)
	}
	return nil
}

// DueDeliveries returns up to limit answered items whose delivery is pending and due at now,
// the oldest due first. Without an outbox, or with a limit of 0 or less, it returns none.
// Every gateway of the database sees the same deliveries due.
func (p *Postgres) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*Item, error) {
	if !p.opts.Outbox || limit <= 0 {
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, `SELECT `+pgItemColumns+` FROM afloat_review_items
		WHERE delivery_state = 'pending' AND delivery_next_ns <= $1 AND status IN ('resolved', 'rejected')
		ORDER BY delivery_next_ns, id LIMIT $2`, now.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("review: due deliveries: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Item, error) { return pgScanItem(r) })
	if err != nil {
		return nil, fmt.Errorf("review: due deliveries: %w", err)
	}
	return items, nil
}

// RecordDelivery replaces the Delivery of answered item id with d, in one commit.
func (p *Postgres) RecordDelivery(ctx context.Context, id string, d Delivery) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	// The error is what a caller's URL answered: kept as text PostgreSQL can hold.
	d.LastError = strings.ReplaceAll(strings.ToValidUTF8(d.LastError, "\uFFFD"), "\x00", "")
	wctx, cancel := p.writeCtx(ctx)
	tag, err := p.pool.Exec(wctx, `UPDATE afloat_review_items SET delivery_state = $2, delivery_attempts = $3,
			delivery_last_ns = $4, delivery_last_status = $5, delivery_last_error = $6, delivery_next_ns = $7
		WHERE id = $1 AND status IN ('resolved', 'rejected')`,
		id, string(d.State), d.Attempts, nsOf(d.LastAttempt), d.LastStatus, d.LastError, nsOf(d.NextAt))
	cancel()
	if err = p.wrote(ctx, err); err != nil {
		return fmt.Errorf("review: record delivery of %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	it, err := p.Lookup(ctx, id) // settled: a lapsed claim reads as pending
	if err != nil {
		return err
	}
	if it.Answered() { // cannot be: an answer is final
		return fmt.Errorf("review: record delivery of %s: no row updated", id)
	}
	return notAnswered(it)
}
