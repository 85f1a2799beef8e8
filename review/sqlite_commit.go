package review

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
)

// Group commit. A synced commit costs a disk flush (a few milliseconds), and in an outage
// every critical call queues an item at once. So the Enqueues that arrive while a commit is
// in flight are committed together in the next transaction, one flush for all of them; each
// still returns only once its own item is on disk. No goroutine runs it: the first waiting
// caller to get the commit turn commits every pending item (its leader), the others wait for
// theirs to be done.

// maxBatch caps the items of one commit.
const maxBatch = 256

// enqueueReq is one Enqueue waiting for a commit.
type enqueueReq struct {
	item                      *Item
	input, attempts, versions string
	hash                      string // inputHash of a keyed item's input; "" without a key
	id                        string
	created                   time.Time

	// state is reqWaiting until a leader takes the request (reqTaken) or its caller gives
	// up first (reqAbandoned): a request is committed only if taken, and its caller then
	// always waits for the outcome, so an item is never committed behind a caller's back.
	state    atomic.Int32
	done     chan struct{}
	inserted bool
	mismatch bool // the key is another input's: nothing was inserted
	err      error
}

const (
	reqWaiting int32 = iota
	reqTaken
	reqAbandoned
)

// Enqueue commits the item as pending, synced to disk, and returns its id; an item whose
// IdempotencyKey was queued before for the same tenant and task returns the first item's id
// when its input is the same (by inputHash), and ErrIdempotencyMismatch when it is not.
// When ctx ends before a commit took the item, the item is not queued and Enqueue returns
// ctx's error.
func (s *SQLite) Enqueue(ctx context.Context, item *Item) (string, error) {
	if err := checkItem(item); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	req, err := newEnqueueReq(item, s.opts.Clock.Now())
	if err != nil {
		return "", err
	}
	s.pendMu.Lock()
	s.pending = append(s.pending, req)
	s.pendMu.Unlock()
	s.hook("pending", 1)

	select {
	case s.turn <- struct{}{}:
		s.commitUntilTaken(req)
		<-s.turn
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

func newEnqueueReq(item *Item, now time.Time) (*enqueueReq, error) {
	r := &enqueueReq{item: item, input: string(item.Input), id: NewID(now), created: now, done: make(chan struct{})}
	if r.input == "" {
		r.input = "null"
	}
	attempts := item.Attempts
	if attempts == nil {
		attempts = []afloat.Attempt{}
	}
	aj, err := json.Marshal(attempts)
	if err != nil {
		return nil, fmt.Errorf("review: attempts: %w", err)
	}
	versions := item.PromptVersions
	if versions == nil {
		versions = []string{}
	}
	vj, _ := json.Marshal(versions)
	r.attempts, r.versions = string(aj), string(vj)
	if item.IdempotencyKey != "" {
		r.hash = inputHash(item.Input)
	}
	return r, nil
}

// commitUntilTaken commits batches until req is taken. One commit takes at most maxBatch
// items: a leader whose own item lies further back must commit again, since nobody else
// would (the callers ahead of it were answered by its first commit). The caller holds the
// commit turn.
func (s *SQLite) commitUntilTaken(req *enqueueReq) {
	for req.state.Load() == reqWaiting {
		s.commitPending()
	}
}

// commitPending commits the pending requests (up to maxBatch) in one transaction. The caller
// holds the commit turn. The commit does not end with the leader's context: it carries the
// other callers' items too, and is bounded by the busy timeout.
func (s *SQLite) commitPending() {
	s.pendMu.Lock()
	var batch []*enqueueReq
	n := 0
	for _, r := range s.pending {
		n++
		if r.state.CompareAndSwap(reqWaiting, reqTaken) {
			batch = append(batch, r)
			if len(batch) == maxBatch {
				break
			}
		}
	}
	s.pending = append(s.pending[:0:0], s.pending[n:]...)
	s.pendMu.Unlock()
	if len(batch) == 0 {
		return
	}
	s.hook("batch", len(batch))
	ctx := context.Background()
	err := s.wrote(ctx, s.insertBatch(ctx, batch))
	s.commits.Add(1)
	tasks := map[string]bool{}
	for _, r := range batch {
		r.err = err
		if err == nil && r.mismatch {
			r.err = ErrIdempotencyMismatch
		}
		if err == nil && r.inserted {
			s.meter.enqueued(r.item.Task)
			tasks[r.item.Task] = true
		}
		close(r.done)
	}
	for task := range tasks {
		s.refreshTask(ctx, task)
	}
	if err == nil {
		s.maybePurge(ctx, s.opts.Clock.Now())
	}
}

func (s *SQLite) insertBatch(ctx context.Context, batch []*enqueueReq) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range batch {
		it := r.item
		res, err := tx.ExecContext(ctx, `INSERT INTO items (id, task, tenant, idem_key, input, attempts, prompt_versions, status, created_ns, input_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)
			ON CONFLICT (tenant, task, idem_key) WHERE idem_key <> '' DO NOTHING`,
			r.id, it.Task, it.Tenant, it.IdempotencyKey, r.input, r.attempts, r.versions, r.created.UnixNano(), r.hash)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if r.inserted = n == 1; !r.inserted {
			var id, hash, input string
			err = tx.QueryRowContext(ctx, `SELECT id, input_hash, input FROM items WHERE tenant = ? AND task = ? AND idem_key = ?`,
				it.Tenant, it.Task, it.IdempotencyKey).Scan(&id, &hash, &input)
			if err != nil {
				return err
			}
			if r.mismatch = storedHash(hash, input) != r.hash; !r.mismatch {
				r.id = id
			}
		}
	}
	return tx.Commit()
}

// hook tells a test where a commit stands; nil outside tests.
func (s *SQLite) hook(event string, n int) {
	if s.testHook != nil {
		s.testHook(event, n)
	}
}
