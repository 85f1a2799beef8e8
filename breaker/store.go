package breaker

import (
	"context"
	"time"

	"github.com/afloat-dev/afloat"
)

// Store holds the shared state of breakers, one Record per breaker name, with the counts of
// its failure window and its probe slot. Every method is one atomic operation on one
// breaker's state; the breaker never holds a lock, in the process or in the store, across a
// call to a provider. Counts and the probe slot belong to one epoch of the record: a record
// swapped in with a new Epoch starts with empty counts and a free slot.
//
// Every method returns a non-nil error only when the store could not answer (unreachable,
// timed out, corrupt data); the breaker then counts the error and serves from a local
// MemoryStore. Decisions ("the revision moved", "the slot is taken") are results, never
// errors. Implementations must be safe for concurrent use.
//
// A Redis store implements each method with one round trip, keeping a breaker's keys in one
// hash slot ({prefix}{name} as the hash tag): Load is HMGET of the record hash; Swap,
// Count, AcquireProbe and ReleaseProbe are Lua scripts, which Redis runs atomically. Times in
// the record are the replicas' clocks; the probe slot's expiry is Redis's own (PX).
type Store interface {
	// Load returns the record of the breaker name. A name never written reads as the zero
	// Record: closed, epoch 0, revision 0.
	//
	// Redis: HMGET of the record hash's fields; an empty hash is the zero Record. A Redis store may
	// cache a record for a short time (well under Config.Recovery) to spare round trips.
	Load(ctx context.Context, name string) (Record, error)

	// Swap replaces the record of name with next if the stored revision is still revision,
	// setting next.Revision to revision+1. It returns the record stored after the operation
	// (next when it swapped, the newer record that won otherwise) and whether it swapped.
	// When next.Epoch differs from the stored epoch, the window counts and the probe slot are
	// cleared.
	//
	// Redis: a script that compares the hash's "revision" field with ARGV and, when equal,
	// HSETs every field of next; counts and the probe slot need no clearing, as their keys
	// carry the epoch and expire (PEXPIRE) on their own.
	Swap(ctx context.Context, name string, revision uint64, next Record) (Record, bool, error)

	// Count adds one call of the given epoch, failed or not, to the sliding window of width
	// window (10 buckets of window/10 each) and to the run of consecutive failures, and
	// returns the totals. If the record is no longer in that epoch, it records nothing and returns
	// Counts{Current: false}: the call belongs to a state that is over.
	//
	// Redis: a script that compares the record's "epoch" field, then HINCRBY on the bucket
	// fields of the counts hash {prefix}{name}:{epoch} (bucket index = now / (window/10)),
	// INCR or resets its run of failures, PEXPIREs the hash after 2×window (at least 1s), and
	// sums the last 10 buckets of one HGETALL.
	Count(ctx context.Context, name string, epoch uint64, failed bool, now time.Time, window time.Duration) (Counts, error)

	// AcquireProbe takes the probe slot of the given epoch for ttl and returns a non-zero
	// token that names the holder. It returns ok false when the slot is held and its ttl has not passed,
	// or when the record is no longer in that epoch.
	//
	// Redis: a script that compares the record's "epoch" field, then SET
	// {prefix}{name}:probe:{epoch} token NX PX ttl, the token from INCR on a counter key.
	AcquireProbe(ctx context.Context, name string, epoch uint64, now time.Time, ttl time.Duration) (token uint64, ok bool, err error)

	// ReleaseProbe frees the probe slot of the given epoch if token still holds it; it does
	// nothing otherwise (the slot expired and another probe took it, or the epoch is over).
	//
	// Redis: a compare-and-delete script: DEL the probe key if GET returns token.
	ReleaseProbe(ctx context.Context, name string, epoch, token uint64) error
}

// Record is the shared state of one breaker. The zero Record is a closed breaker that never
// changed state.
type Record struct {
	State State
	// Epoch numbers the states the breaker went through: every change of state (and a
	// forced reset) gives it a new epoch. A call reports its outcome against the epoch in
	// which it was admitted, so an outcome that arrives after the state changed moves nothing.
	Epoch uint64
	// Revision numbers the writes of the record; Swap compares it.
	Revision uint64
	// Since is when the breaker entered State.
	Since time.Time
	// Until is the end of the open period in StateOpen.
	Until time.Time
	// Recovery is the open period of the next opening by failures, doubled by each failed
	// probe; 0 means the breaker's Config.Recovery.
	Recovery time.Duration
	// Kind is the kind of the failure that opened the breaker.
	Kind afloat.Kind
	// RampUp is set on a closed breaker that a good probe closed: from Since, for
	// Config.RampUp, the provider's share of calls rises from none to all.
	RampUp bool
}

// Counts are the totals of a breaker's failure window after one Count.
type Counts struct {
	// Current is false when the record had left the epoch that was counted: nothing was
	// recorded and the other fields are zero.
	Current bool
	// Calls and Failures are the totals of the sliding window.
	Calls, Failures int
	// Consecutive is the number of failures since the last success of the epoch.
	Consecutive int
}
