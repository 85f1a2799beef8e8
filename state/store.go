package state

import (
	"context"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
)

// Store keeps the flag document and the injected faults beyond one process's memory: in the
// local SQLite file (one process; a kill switch survives a restart) or in Redis (a fleet;
// every replica sees the same). The engine never reads a Store on a call: State keeps the
// document and the faults in process and a Store only on writes, at start and when it
// reports a change.
//
// Every method returns a non-nil error only when the store could not answer. Implementations
// are safe for concurrent use.
type Store interface {
	// LoadFlags returns the saved document and its version; a store that never saved one
	// returns nil and version 0.
	LoadFlags(ctx context.Context) (doc *flags.Document, version uint64, err error)
	// SwapFlags saves doc if the saved version is still version (0: none saved), making it
	// version+1; it reports false, changing nothing, when another writer got there first.
	SwapFlags(ctx context.Context, version uint64, doc *flags.Document) (swapped bool, err error)
	// LoadFaults returns the faults saved by provider name. A fault whose Expires has passed
	// may be returned; State drops it.
	LoadFaults(ctx context.Context) (map[string]Fault, error)
	// SaveFault saves the fault of provider; the zero Fault (mode none) removes it.
	SaveFault(ctx context.Context, provider string, f Fault) error
	// SaveDrill records a drill: it becomes its scope's last drill, and its last passing one
	// when it passed.
	SaveDrill(ctx context.Context, d Drill) error
	// LoadDrills returns the drills kept, by scope.
	LoadDrills(ctx context.Context) (map[string]Drills, error)
	// SaveCanary records a canary's decision: it becomes its task's, unless the task's kept
	// decision has the same fingerprint already, which stands: the first decision of a
	// canary is the fleet's, even when two replicas decide at once. A decision of another
	// fingerprint (a new canary) replaces it.
	SaveCanary(ctx context.Context, c Canary) error
	// LoadCanaries returns the decisions kept, by task.
	LoadCanaries(ctx context.Context) (map[string]Canary, error)
	// Close releases the store's connections.
	Close() error
}

// Fault is an injected fault as saved: with the absolute time it clears itself, so that
// every replica and a restarted process clear it at the same moment.
type Fault struct {
	Fault fault.Fault
	// Expires is when the fault clears itself; zero means until cleared.
	Expires time.Time
}

// Watcher is a Store that tells of changes made by others (another replica's write): Watch
// calls changed, from its own goroutine, after each change it hears of and after every
// (re)connection, when changes may have been missed, until ctx ends. A Store without it
// (the local file) has no other writer.
type Watcher interface {
	Watch(ctx context.Context, changed func())
}
