package review

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// Status is where an item stands.
type Status string

const (
	StatusPending  Status = "pending"
	StatusClaimed  Status = "claimed"
	StatusResolved Status = "resolved"
	StatusRejected Status = "rejected"
)

// Item is one call waiting for, or answered by, an operator.
type Item struct {
	ID     string
	Task   string
	Tenant string
	// IdempotencyKey, when set, makes the item unique per (Tenant, Task, key): enqueueing it
	// again returns the first item's id instead of queueing twice.
	IdempotencyKey string
	Input          json.RawMessage
	// Attempts are the tiers tried, with their outcomes and errors.
	Attempts []afloat.Attempt
	// PromptVersions are the prompt versions tried.
	PromptVersions []string
	Status         Status
	CreatedAt      time.Time
	// Result is the operator's answer once resolved.
	Result json.RawMessage
}

// ErrNotFound: no item has that id (for that tenant).
var ErrNotFound = errors.New("review: no such item")

// Queue takes items for human review.
type Queue interface {
	// Enqueue commits item and returns its id. It returns only once the item is durable in
	// the store's terms; any error means the item was not queued, and the caller must not
	// report it as queued.
	Enqueue(ctx context.Context, item *Item) (string, error)
	// Get returns the item with id as tenant sees it: another tenant's item is ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*Item, error)
}

// Memory is a Queue held in process: nothing survives a restart. It is safe for concurrent
// use.
type Memory struct {
	clock clockwork.Clock
	mu    sync.Mutex
	items map[string]*Item
}

// NewMemory returns an empty Memory; a nil clock uses real time.
func NewMemory(clock clockwork.Clock) *Memory {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Memory{clock: clock, items: map[string]*Item{}}
}

// NewID returns a new item id, "rv_" and 26 characters of time-ordered, random text.
func NewID(now time.Time) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ" // Crockford base32, as ULIDs
	var b [26]byte
	ms := uint64(now.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = alphabet[ms&31]
		ms >>= 5
	}
	var r [16]byte
	_, _ = rand.Read(r[:])
	for i := 10; i < 26; i++ {
		b[i] = alphabet[r[i-10]&31]
	}
	return "rv_" + string(b[:])
}

// Enqueue stores a copy of item as pending.
func (m *Memory) Enqueue(ctx context.Context, item *Item) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	cp := *item
	cp.CreatedAt = m.clock.Now()
	cp.ID = NewID(cp.CreatedAt)
	cp.Status = StatusPending
	m.mu.Lock()
	m.items[cp.ID] = &cp
	m.mu.Unlock()
	return cp.ID, nil
}

// Get returns a copy of the item.
func (m *Memory) Get(_ context.Context, tenant, id string) (*Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[id]
	if !ok || it.Tenant != tenant {
		return nil, ErrNotFound
	}
	cp := *it
	return &cp, nil
}

// Len returns the number of items held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}
