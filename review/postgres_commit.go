package review

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Group commit, as in SQLite (sqlite_commit.go): the Enqueues that arrive while a commit is
// in flight are committed together in the next transaction, their INSERTs sent in one round
// trip; each returns only once its own item is committed. The first waiting caller to get
// the commit turn commits every pending item; no goroutine runs it.
//
// The commits of every gateway of the database take one advisory lock in turn: MaxPending is
// then exact across the fleet (the count read under the lock is every committed item), and
// two commits never wait on each other's rows (the same idempotency key sent to two
// gateways at once, the depth row of a task), which could deadlock.

// Enqueue commits the item as pending and returns its id; an item whose IdempotencyKey was
// queued before for the same tenant and task returns the first item's id when its input is
// the same (by inputHash), and ErrIdempotencyMismatch when it is not. With
// Options.MaxPending items unanswered already it is ErrFull. When ctx ends before a commit
// took the item, the item is not queued and Enqueue returns ctx's error.
func (p *Postgres) Enqueue(ctx context.Context, item *Item) (string, error) {
	if err := checkItem(item); err != nil {
		return "", err
	}
	for _, f := range [...]struct{ name, s string }{
		{"task", item.Task}, {"tenant", item.Tenant}, {"idempotency key", item.IdempotencyKey}, {"input", string(item.Input)},
	} {
		if err := pgText(f.name, f.s); err != nil {
			return "", err
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	req, err := newEnqueueReq(item, p.opts.Clock.Now())
	if err != nil {
		return "", err
	}
	p.pendMu.Lock()
	p.pending = append(p.pending, req)
	p.pendMu.Unlock()
	p.hook("pending", 1)

	select {
	case p.turn <- struct{}{}:
		for req.state.Load() == reqWaiting {
			p.commitPending()
		}
		<-p.turn
	case <-req.done:
	case <-ctx.Done():
		if req.state.CompareAndSwap(reqWaiting, reqAbandoned) {
			return "", ctx.Err()
		}
	}
	<-req.done
	if req.err != nil {
		return "", fmt.Errorf("review: enqueue: %w", req.err)
	}
	return req.id, nil
}

// commitPending commits the pending requests (up to maxBatch) in one transaction. The caller
// holds the commit turn. The commit does not end with the leader's context (it carries the
// other callers' items too): the busy timeout bounds it.
func (p *Postgres) commitPending() {
	p.pendMu.Lock()
	var batch []*enqueueReq
	n := 0
	for _, r := range p.pending {
		n++
		if r.state.CompareAndSwap(reqWaiting, reqTaken) {
			batch = append(batch, r)
			if len(batch) == maxBatch {
				break
			}
		}
	}
	p.pending = append(p.pending[:0:0], p.pending[n:]...)
	p.pendMu.Unlock()
	if len(batch) == 0 {
		return
	}
	p.hook("batch", len(batch))
	ctx := context.Background()
	wctx, cancel := p.writeCtx(ctx)
	err := p.insertBatch(wctx, batch)
	cancel()
	err = p.wrote(ctx, err)
	p.commits.Add(1)
	tasks := map[string]bool{}
	for _, r := range batch {
		switch {
		case err != nil:
			r.err = err
		case r.mismatch:
			r.err = ErrIdempotencyMismatch
		case r.inserted:
			p.meter.enqueued(r.item.Task)
			tasks[r.item.Task] = true
		}
		close(r.done)
	}
	for task := range tasks {
		p.refreshTask(ctx, task)
	}
	if err == nil {
		p.maybePurge(ctx, p.opts.Clock.Now())
	}
}

const pgInsert = `INSERT INTO afloat_review_items (id, task, tenant, idem_key, input, attempts, prompt_versions, status, created_ns, input_hash)
	VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)
	ON CONFLICT (tenant, task, idem_key) WHERE idem_key <> '' DO NOTHING`

const pgKeyHolder = `SELECT id, input_hash, input FROM afloat_review_items WHERE tenant = $1 AND task = $2 AND idem_key = $3`

// insertBatch inserts the batch in one transaction. Each request's outcome is set on it:
// inserted, the id of the item that holds its key (mismatch when the input differs), or
// ErrFull. An error means nothing was committed.
func (p *Postgres) insertBatch(ctx context.Context, batch []*enqueueReq) error {
	for _, r := range batch {
		r.inserted, r.mismatch, r.err = false, false, nil
	}
	tx, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, p.enqueueLock); err != nil {
		return err
	}
	// A key a committed item holds is answered from that item, without an INSERT: one that
	// met the key would wait for an operator's change in flight on the item (its UPDATE
	// writes the unique index too), and that change waits for the depth row of its task,
	// which this transaction may hold already: a deadlock.
	todo, err := p.unheld(ctx, tx, batch)
	if err != nil {
		return err
	}
	room := len(todo) // without a cap, room for every item
	if p.opts.MaxPending > 0 {
		var unanswered int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(unanswered), 0) FROM afloat_review_depth`).Scan(&unanswered); err != nil {
			return err
		}
		room = int(max(0, int64(p.opts.MaxPending)-unanswered))
	}
	// Insert as many as there is room for; an item whose key an item of this batch took
	// takes none, so the next round tries the items left. With no room the rest are refused.
	for len(todo) > 0 {
		round := todo[:min(len(todo), room)]
		if len(round) == 0 {
			return p.refuseFull(ctx, tx, todo)
		}
		todo = todo[len(round):]
		inserted, err := p.insertRound(ctx, tx, round)
		if err != nil {
			return err
		}
		room -= inserted
	}
	return tx.Commit(ctx)
}

// unheld looks up the keys of the batch's keyed requests in one round trip, sets the outcome
// of those whose key an item holds, and returns the others.
func (p *Postgres) unheld(ctx context.Context, tx pgx.Tx, batch []*enqueueReq) ([]*enqueueReq, error) {
	b := &pgx.Batch{}
	for _, r := range batch {
		if r.item.IdempotencyKey != "" {
			b.Queue(pgKeyHolder, r.item.Tenant, r.item.Task, r.item.IdempotencyKey)
		}
	}
	if b.Len() == 0 {
		return batch, nil
	}
	res := tx.SendBatch(ctx, b)
	var rest []*enqueueReq
	for _, r := range batch {
		if r.item.IdempotencyKey == "" {
			rest = append(rest, r)
			continue
		}
		found, err := r.heldBy(res.QueryRow())
		if err != nil {
			_ = res.Close()
			return nil, err
		}
		if !found {
			rest = append(rest, r)
		}
	}
	return rest, res.Close()
}

// insertRound sends the round's INSERTs in one round trip, then looks up the items that hold
// the keys of those that were not inserted (an earlier request of the batch with the same
// key), and returns how many it inserted.
func (p *Postgres) insertRound(ctx context.Context, tx pgx.Tx, round []*enqueueReq) (int, error) {
	b := &pgx.Batch{}
	for _, r := range round {
		it := r.item
		b.Queue(pgInsert, r.id, it.Task, it.Tenant, it.IdempotencyKey, r.input, r.attempts, r.versions, r.created.UnixNano(), r.hash)
	}
	res := tx.SendBatch(ctx, b)
	inserted := 0
	var held []*enqueueReq
	for _, r := range round {
		tag, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return 0, err
		}
		if r.inserted = tag.RowsAffected() == 1; r.inserted {
			inserted++
		} else {
			held = append(held, r)
		}
	}
	if err := res.Close(); err != nil {
		return 0, err
	}
	for _, r := range held {
		found, err := r.heldBy(tx.QueryRow(ctx, pgKeyHolder, r.item.Tenant, r.item.Task, r.item.IdempotencyKey))
		if err != nil {
			return 0, err
		}
		if !found {
			return 0, fmt.Errorf("item of key %q neither inserted nor found", r.item.IdempotencyKey)
		}
	}
	return inserted, nil
}

// refuseFull refuses the requests that found no room with ErrFull, and commits the others.
func (p *Postgres) refuseFull(ctx context.Context, tx pgx.Tx, reqs []*enqueueReq) error {
	for _, r := range reqs {
		r.err = fmt.Errorf("%w: %d items wait for review, the most it holds", ErrFull, p.opts.MaxPending)
	}
	return tx.Commit(ctx)
}

// heldBy sets r's outcome from the item of its key that row (pgKeyHolder) found: that item's
// id when the inputs match, a mismatch when they do not. It reports whether row found one.
func (r *enqueueReq) heldBy(row pgx.Row) (bool, error) {
	var id, hash, input string
	err := row.Scan(&id, &hash, &input)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	if r.mismatch = storedHash(hash, input) != r.hash; !r.mismatch {
		r.id = id
	}
	return true, nil
}

// hook tells a test where a commit stands; nil outside tests.
func (p *Postgres) hook(event string, n int) {
	if p.testHook != nil {
		p.testHook(event, n)
	}
}
