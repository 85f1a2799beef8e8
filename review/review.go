package review

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/telemetry"
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

// ParseStatus returns the Status named s.
func ParseStatus(s string) (Status, error) {
	switch st := Status(s); st {
	case StatusPending, StatusClaimed, StatusResolved, StatusRejected:
		return st, nil
	}
	return "", fmt.Errorf("%w: status %q (want pending, claimed, resolved or rejected)", ErrInvalid, s)
}

// Item is one call waiting for, or answered by, an operator. The zero times mean "not yet".
type Item struct {
	ID     string
	Task   string
	Tenant string
	// IdempotencyKey, when set, makes the item unique per (Tenant, Task, key): enqueueing it
	// again with the same Input (compared as canonical JSON) returns the first item's id
	// instead of queueing twice; with another Input it is ErrIdempotencyMismatch.
	IdempotencyKey string
	Input          json.RawMessage
	// Attempts are the tiers tried, with their outcomes and errors.
	Attempts []afloat.Attempt
	// PromptVersions are the prompt versions tried.
	PromptVersions []string
	Status         Status
	CreatedAt      time.Time
	// Operator holds the claim while the item is claimed, and is who answered it once
	// resolved or rejected; "" while pending.
	Operator string
	// ClaimedAt is when Operator claimed the item.
	ClaimedAt time.Time
	// ClaimExpiresAt is when the claim lapses and the item is pending again; zero when the
	// claim does not lapse (no claim TTL) or the item is not claimed.
	ClaimExpiresAt time.Time
	// ResolvedAt is when the item was resolved or rejected.
	ResolvedAt time.Time
	// Result is the operator's answer once resolved.
	Result json.RawMessage
	// Reason is the operator's reason once rejected.
	Reason string
	// Delivery is the state of the caller's webhook for this item's answer (review.webhook);
	// the zero Delivery when the store has no outbox (Options.Outbox) or the item is not
	// answered yet.
	Delivery Delivery
}

// DeliveryState is where the webhook of an answered item stands.
type DeliveryState string

const (
	// DeliveryNone: no webhook is due (no outbox, or not answered yet).
	DeliveryNone DeliveryState = ""
	// DeliveryPending: the answer waits to be delivered, at NextAt.
	DeliveryPending DeliveryState = "pending"
	// DeliveryDelivered: the caller's URL took it (2xx).
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryFailed: every attempt failed; no more are made.
	DeliveryFailed DeliveryState = "failed"
)

// Delivery is the webhook outbox's record of one answered item. With Options.Outbox, Resolve
// and Reject set it to pending, due at once, in the same commit as the answer: a delivery
// survives a restart.
type Delivery struct {
	State DeliveryState
	// Attempts counts the POSTs made; LastAttempt is when the last was made, LastStatus its
	// HTTP status (0: no answer) and LastError what went wrong ("" after a success).
	Attempts    int
	LastAttempt time.Time
	LastStatus  int
	LastError   string
	// NextAt is when a pending delivery is due.
	NextAt time.Time
}

// Answered reports whether the item is resolved or rejected: nothing changes it any more.
func (it *Item) Answered() bool {
	return it.Status == StatusResolved || it.Status == StatusRejected
}

var (
	// ErrNotFound: no item has that id (for that tenant).
	ErrNotFound = errors.New("review: no such item")
	// ErrConflict: the item's state refuses the change (claimed by another operator, already
	// answered). The error is a *ConflictError that says why.
	ErrConflict = errors.New("review: conflict")
	// ErrInvalid: an argument is malformed (an empty operator or reason, a bad cursor).
	ErrInvalid = errors.New("review: invalid argument")
	// ErrIdempotencyMismatch: Enqueue got an IdempotencyKey that an item of the same tenant
	// and task holds already, with another input. Nothing was queued. The store keeps the
	// key's input hash, so this holds across restarts; the caller answers it as a reused key
	// (HTTP 422), never as a store failure.
	ErrIdempotencyMismatch = errors.New("review: idempotency key reused with another input")
	// ErrFull: Enqueue found Options.MaxPending items waiting already (PostgreSQL). Nothing
	// was queued; the store is healthy. A critical call answers it as the queue being
	// unavailable (HTTP 503), never with a default.
	ErrFull = errors.New("review: the queue is full")
)

// ConflictError says why an item refused a change. errors.Is(err, ErrConflict) holds.
type ConflictError struct {
	ID string
	// Status, Operator and Until are the item's state: who claimed or answered it, and when
	// a claim lapses (zero when it does not).
	Status   Status
	Operator string
	Until    time.Time
}

func (e *ConflictError) Error() string {
	if e.Status == StatusClaimed {
		msg := fmt.Sprintf("review %s is claimed by %s", e.ID, e.Operator)
		if !e.Until.IsZero() {
			msg += " until " + e.Until.UTC().Format(time.RFC3339)
		}
		return msg
	}
	if e.Status == StatusPending { // RecordDelivery: nothing to deliver yet
		return fmt.Sprintf("review %s is pending: not answered yet", e.ID)
	}
	return fmt.Sprintf("review %s is already %s by %s", e.ID, e.Status, e.Operator)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Queue takes items for human review: what the cascade needs.
type Queue interface {
	// Enqueue commits item and returns its id. It returns only once the item is durable in
	// the store's terms; any error means the item was not queued, and the caller must not
	// report it as queued. An item whose IdempotencyKey an earlier item of its tenant and
	// task holds returns that item's id when the inputs match, and ErrIdempotencyMismatch
	// when they differ.
	Enqueue(ctx context.Context, item *Item) (string, error)
	// Get returns the item with id as tenant sees it: another tenant's item is ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*Item, error)
	// Queued returns the item of item's tenant and task that holds item's IdempotencyKey:
	// ErrNotFound when none does (or item has no key), ErrIdempotencyMismatch when that
	// item's input is not item's. A retried call finds its first call's item with it before
	// it asks a model, across restarts too.
	Queued(ctx context.Context, item *Item) (*Item, error)
}

// Store is a Queue that operators work: list, claim, resolve, reject. Every method returns
// the item as it stands at the store's clock: a claim older than the claim TTL reads as
// pending. A change the item's state refuses is a *ConflictError; an unknown id is
// ErrNotFound; any other error means the store could not answer, and changed nothing.
// Implementations are safe for concurrent use.
type Store interface {
	Queue
	// Lookup returns the item with id, whatever its tenant (for operators).
	Lookup(ctx context.Context, id string) (*Item, error)
	// List returns a page of items in the order they were queued, oldest first.
	List(ctx context.Context, f Filter) (*Page, error)
	// Claim gives operator the item: a pending item, or one operator holds already (which
	// renews the claim). Another operator's live claim and an answered item are conflicts.
	Claim(ctx context.Context, id, operator string) (*Item, error)
	// Resolve answers the item with result, which the caller has validated against the
	// task's schema. A pending item is claimed in the same step.
	Resolve(ctx context.Context, id, operator string, result json.RawMessage) (*Item, error)
	// Reject closes the item without an answer, for reason. A pending item is claimed in the
	// same step.
	Reject(ctx context.Context, id, operator, reason string) (*Item, error)
	// Release gives back operator's claim: the item is pending again, for any operator. A
	// pending item (a lapsed claim included) is left as it is, without error. Another
	// operator's live claim and an answered item are conflicts; an empty operator is
	// ErrInvalid.
	Release(ctx context.Context, id, operator string) error
	// Stats returns, per task, the items not answered yet.
	Stats(ctx context.Context) (map[string]TaskStats, error)
	// DueDeliveries returns up to limit answered items whose delivery is pending and due at
	// now, the oldest due first. Without an outbox it returns none.
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*Item, error)
	// RecordDelivery records the outcome of a delivery attempt of item id: d replaces the
	// item's Delivery (pending with a later NextAt to retry, delivered, or failed). An item
	// not answered is ErrConflict; an unknown id ErrNotFound.
	RecordDelivery(ctx context.Context, id string, d Delivery) error
	// Ping checks that the store can commit now.
	Ping(ctx context.Context) error
	// Close releases the store; nothing may be called after.
	Close() error
}

// Filter selects the items List returns. The zero Filter selects every item, 50 a page.
type Filter struct {
	// Status keeps the items in that status; "" keeps every status. Pending includes the
	// items whose claim lapsed.
	Status Status
	// Task keeps the items of that task; "" keeps every task.
	Task string
	// Limit is the page size: 0 means 50, at most 500.
	Limit int
	// Cursor continues after the page that returned it as Next; "" starts at the oldest.
	Cursor string
}

// Page is one page of List.
type Page struct {
	Items []*Item
	// Next is the cursor of the next page; "" when this page is the last.
	Next string
}

// TaskStats counts one task's items not answered yet.
type TaskStats struct {
	// Pending counts pending items (lapsed claims included), Claimed the items claimed now.
	Pending, Claimed int
	// Oldest is when the oldest of them was queued; zero when there is none.
	Oldest time.Time
}

// Options configure a store. The zero Options are real time, claims that never lapse, items
// kept forever, no metrics and no logs. A negative duration is an error of OpenSQLite and
// OpenPostgres (and counts as 0 in a Memory).
type Options struct {
	// Clock drives creation times, claim expiry and retention. nil means real time.
	Clock clockwork.Clock
	// ClaimTTL is how long a claim holds: then the item is pending again (an operator who
	// walks away releases it). 0 means claims never lapse.
	ClaimTTL time.Duration
	// Retention is how long resolved and rejected items are kept after their answer. Older
	// ones are purged (counted in afloat_review_purged_total and logged), at most every
	// PurgeEvery. Pending and claimed items are never purged. 0 keeps every item.
	Retention time.Duration
	// PurgeEvery is how often the purge runs, piggybacked on writes and Ping (the store runs
	// no goroutine of its own). 0 means 10 minutes.
	PurgeEvery time.Duration
	// Metrics receives the queue's metrics. nil means none.
	Metrics *telemetry.Metrics
	// Logger receives purges and store failures. nil discards.
	Logger *slog.Logger
	// Outbox keeps a webhook delivery for every answered item (review.webhook is set):
	// Resolve and Reject mark it pending, DueDeliveries and RecordDelivery work it.
	Outbox bool
	// BusyTimeout (SQLite) is how long a write waits for a lock another process holds before
	// it fails; (PostgreSQL) how long a write may take, a connection to open included, before
	// it fails. 0 means 5s.
	BusyTimeout time.Duration
	// MaxPending (PostgreSQL) caps the items not answered yet (pending or claimed), across
	// every gateway of the database: an Enqueue beyond it is ErrFull. 0 means no cap.
	MaxPending int

	// unsynced (SQLite, tests of behaviour only) skips the disk flush of each commit.
	unsynced bool
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PurgeEvery <= 0 {
		o.PurgeEvery = 10 * time.Minute
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	return o
}

const (
	defaultLimit = 50
	maxLimit     = 500
)

func (f Filter) limit() int {
	switch {
	case f.Limit <= 0:
		return defaultLimit
	case f.Limit > maxLimit:
		return maxLimit
	}
	return f.Limit
}

func (f Filter) check() error {
	if f.Status != "" {
		if _, err := ParseStatus(string(f.Status)); err != nil {
			return err
		}
	}
	return nil
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

// storedHash is the input hash of a stored item: its column, or the hash of its input when
// it was queued before the column (schema version 2).
func storedHash(hash, input string) string {
	if hash == "" {
		return inputHash(json.RawMessage(input))
	}
	return hash
}

// inputHash is the hash an idempotency key's input is compared by: SHA-256 of the input as
// canonical JSON (no insignificant space, object keys sorted, numbers as written), so that
// the same input sent with other spacing or key order is the same input. No input hashes as
// null.
func inputHash(input json.RawMessage) string {
	canon := []byte("null")
	if len(input) > 0 {
		d := json.NewDecoder(bytes.NewReader(input))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err == nil {
			if b, err := json.Marshal(v); err == nil {
				canon = b
			}
		} else {
			canon = input // checkItem refused invalid JSON; hash the bytes all the same
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// checkItem refuses an item that cannot be queued.
func checkItem(item *Item) error {
	if item == nil || item.Task == "" {
		return fmt.Errorf("%w: an item needs a task", ErrInvalid)
	}
	if len(item.Input) > 0 && !json.Valid(item.Input) {
		return fmt.Errorf("%w: the input is not valid JSON", ErrInvalid)
	}
	return nil
}
