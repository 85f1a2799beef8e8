package review

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Memory is a Store held in process: nothing survives a restart (tests, demos, a library
// user who wants no file). It is safe for concurrent use; its zero value is not usable: use
// NewMemory or NewMemoryWith.
type Memory struct {
	opts  Options
	meter meter

	mu        sync.Mutex
	items     map[string]*Item
	idem      map[idemKey]idemEntry
	lastPurge time.Time
}

type idemKey struct{ tenant, task, key string }

// idemEntry is the item that holds a key, and the hash of its input.
type idemEntry struct{ id, hash string }

// NewMemory returns an empty Memory on clock (nil: real time) whose claims never lapse.
func NewMemory(clock clockwork.Clock) *Memory {
	return NewMemoryWith(Options{Clock: clock})
}

// NewMemoryWith returns an empty Memory with opts.
func NewMemoryWith(opts Options) *Memory {
	opts = opts.withDefaults()
	return &Memory{opts: opts, meter: newMeter(opts.Metrics, opts.Clock), items: map[string]*Item{}, idem: map[idemKey]idemEntry{}}
}

// Kind names the store in /admin/status.
func (m *Memory) Kind() string { return "memory" }

// Enqueue stores a copy of item as pending; an item whose IdempotencyKey was queued before
// for the same tenant and task returns the first item's id, or ErrIdempotencyMismatch when
// its input differs.
func (m *Memory) Enqueue(ctx context.Context, item *Item) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := checkItem(item); err != nil {
		return "", err
	}
	cp := item.clone()
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := idemKey{cp.Tenant, cp.Task, cp.IdempotencyKey}
	var hash string
	if cp.IdempotencyKey != "" {
		hash = inputHash(cp.Input)
		if e, ok := m.idem[k]; ok {
			if e.hash != hash {
				return "", ErrIdempotencyMismatch
			}
			return e.id, nil
		}
	}
	cp.ID, cp.Status, cp.CreatedAt = NewID(now), StatusPending, now
	cp.Operator, cp.ClaimedAt, cp.ClaimExpiresAt, cp.ResolvedAt, cp.Result, cp.Reason = "", time.Time{}, time.Time{}, time.Time{}, nil, ""
	cp.Delivery = Delivery{}
	if len(cp.Input) == 0 {
		cp.Input = json.RawMessage("null")
	}
	m.items[cp.ID] = cp
	if cp.IdempotencyKey != "" {
		m.idem[k] = idemEntry{id: cp.ID, hash: hash}
	}
	m.meter.enqueued(cp.Task)
	m.wroteLocked(cp.Task, now)
	return cp.ID, nil
}

// Queued returns a copy of the item that holds item's idempotency key.
func (m *Memory) Queued(ctx context.Context, item *Item) (*Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if item.IdempotencyKey == "" {
		return nil, ErrNotFound
	}
	hash := inputHash(item.Input)
	m.mu.Lock()
	e, ok := m.idem[idemKey{item.Tenant, item.Task, item.IdempotencyKey}]
	m.mu.Unlock()
	switch {
	case !ok:
		return nil, ErrNotFound
	case e.hash != hash:
		return nil, ErrIdempotencyMismatch
	}
	return m.Get(ctx, item.Tenant, e.id)
}

// Get returns a copy of the item as tenant sees it.
func (m *Memory) Get(_ context.Context, tenant, id string) (*Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[id]
	if !ok || it.Tenant != tenant {
		return nil, ErrNotFound
	}
	return m.settled(it), nil
}

// Lookup returns a copy of the item, whatever its tenant.
func (m *Memory) Lookup(_ context.Context, id string) (*Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[id]
	if !ok {
		return nil, ErrNotFound
	}
	return m.settled(it), nil
}

func (m *Memory) settled(it *Item) *Item {
	cp := it.clone()
	cp.settle(m.opts.Clock.Now())
	return cp
}

// List returns a page of items, oldest first.
func (m *Memory) List(_ context.Context, f Filter) (*Page, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	var (
		curNS int64
		curID string
	)
	if f.Cursor != "" {
		var err error
		if curNS, curID, err = decodeCursor(f.Cursor); err != nil {
			return nil, err
		}
	}
	now := m.opts.Clock.Now()
	m.mu.Lock()
	var sel []*Item
	for _, it := range m.items {
		cp := it.clone()
		cp.settle(now)
		if (f.Status == "" || cp.Status == f.Status) && (f.Task == "" || cp.Task == f.Task) &&
			(f.Cursor == "" || after(cp, curNS, curID)) {
			sel = append(sel, cp)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(sel, func(a, b *Item) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	page := &Page{Items: sel}
	if n := f.limit(); len(sel) > n {
		page.Items = sel[:n]
		page.Next = encodeCursor(sel[n-1])
	}
	return page, nil
}

// Claim gives operator the item.
func (m *Memory) Claim(_ context.Context, id, operator string) (*Item, error) {
	return m.change(id, func(it *Item, now time.Time) error { return it.claim(operator, now, m.opts.ClaimTTL) })
}

// Resolve answers the item with result.
func (m *Memory) Resolve(_ context.Context, id, operator string, result json.RawMessage) (*Item, error) {
	return m.change(id, m.opts.answering(func(it *Item, now time.Time) error { return it.resolve(operator, result, now) }))
}

// Reject closes the item for reason.
func (m *Memory) Reject(_ context.Context, id, operator, reason string) (*Item, error) {
	return m.change(id, m.opts.answering(func(it *Item, now time.Time) error { return it.reject(operator, reason, now) }))
}

// Release gives back operator's claim.
func (m *Memory) Release(_ context.Context, id, operator string) error {
	_, err := m.change(id, func(it *Item, now time.Time) error { return it.release(operator, now) })
	return err
}

// change applies fn to a copy of the item and stores the copy only when fn accepts.
func (m *Memory) change(id string, fn func(*Item, time.Time) error) (*Item, error) {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[id]
	if !ok {
		return nil, ErrNotFound
	}
	cp := it.clone()
	if err := fn(cp, now); err != nil {
		return nil, err
	}
	m.items[id] = cp
	m.meter.answered(cp)
	m.wroteLocked(cp.Task, now)
	return cp.clone(), nil
}

// Stats counts each task's unanswered items.
func (m *Memory) Stats(context.Context) (map[string]TaskStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statsLocked(m.opts.Clock.Now(), ""), nil
}

func (m *Memory) statsLocked(now time.Time, task string) map[string]TaskStats {
	out := map[string]TaskStats{}
	for _, it := range m.items {
		if it.Answered() || (task != "" && it.Task != task) {
			continue
		}
		cp := *it
		cp.settle(now)
		st := out[it.Task]
		if cp.Status == StatusPending {
			st.Pending++
		} else {
			st.Claimed++
		}
		if st.Oldest.IsZero() || it.CreatedAt.Before(st.Oldest) {
			st.Oldest = it.CreatedAt
		}
		out[it.Task] = st
	}
	return out
}

// wroteLocked publishes the task's depth after a write and purges when due.
func (m *Memory) wroteLocked(task string, now time.Time) {
	if m.meter.m != nil {
		m.meter.depth(task, m.statsLocked(now, task)[task])
	}
	if m.opts.Retention > 0 && now.Sub(m.lastPurge) >= m.opts.PurgeEvery {
		m.purgeLocked(now)
	}
}

// Purge deletes the items answered longer ago than the retention and returns how many; with
// no retention it deletes nothing.
func (m *Memory) Purge(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.purgeLocked(m.opts.Clock.Now()), nil
}

func (m *Memory) purgeLocked(now time.Time) int {
	m.lastPurge = now
	if m.opts.Retention <= 0 {
		return 0
	}
	byTask := map[string]int{}
	for id, it := range m.items {
		if it.Answered() && now.Sub(it.ResolvedAt) >= m.opts.Retention {
			delete(m.items, id)
			if it.IdempotencyKey != "" {
				delete(m.idem, idemKey{it.Tenant, it.Task, it.IdempotencyKey})
			}
			byTask[it.Task]++
		}
	}
	n := 0
	for task, c := range byTask {
		m.meter.purged(task, c)
		n += c
	}
	if n > 0 {
		m.opts.Logger.Info("review items purged after retention", "items", n, "retention", m.opts.Retention.String())
	}
	return n
}

// Ping always succeeds: memory always commits.
func (m *Memory) Ping(context.Context) error { return nil }

// Close does nothing; the items stay readable.
func (m *Memory) Close() error { return nil }

// Len returns the number of items held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}
