// Package state keeps the flags and the injected faults of a gateway beyond its memory: in
// the local SQLite file (state.backend local: one process; a kill switch survives a restart)
// or in Redis (state.backend redis: a fleet, package redisstate, where a change through any
// replica applies on every replica's next call).
//
// The engine reads the flags on every call from a flags.Memory, and the faults from each
// provider's fault.Provider; a State keeps both in step with its Store: it writes through the
// store first and applies what it wrote, and reloads both when the store reports a change
// another replica made. A call never waits on the store.
package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/jonboulle/clockwork"
)

// maxSwaps bounds the compare-and-swap retries of one flag write.
const maxSwaps = 16

// Options configure a State.
type Options struct {
	// Kind names the backend in /admin/status: "local" or "redis".
	Kind string
	// Store is where the flags and faults are kept; required.
	Store Store
	// Flags is the document the engine reads; required. What it holds when New is called
	// (the config's flags) is the default of every task the store's document omits.
	Flags *flags.Memory
	// Faults are the providers' fault injectors, by name.
	Faults map[string]*fault.Provider
	// Clock gives a fault's TTL its absolute expiry. nil means real time.
	Clock clockwork.Clock
	// Logger receives the failures of reloads. nil discards.
	Logger *slog.Logger
}

// State is the flags and faults of a gateway, kept in a Store. It is a flag store for the
// gateway's admin API (Flags, Set, Update) and sets faults (SetFault). It is safe for
// concurrent use.
type State struct {
	kind  string
	store Store
	mem   *flags.Memory
	// defaults and faults are the config's: Retarget replaces them on a config reload.
	defaults atomic.Pointer[flags.Document]
	faults   atomic.Pointer[map[string]*fault.Provider]
	clock    clockwork.Clock
	log      *slog.Logger

	mu   sync.Mutex // serializes loads and writes, so that an older load never lands after a newer one
	seen bool       // the store held a saved document once: losing it is the store's loss

	drills   atomic.Pointer[map[string]Drills] // by scope, as last loaded or saved
	canaries atomic.Pointer[map[string]Canary] // by task, as last loaded or saved

	cancel context.CancelFunc
}

// New returns the State over opts.Store. It loads the saved flags and faults (a store that
// cannot answer leaves the config's flags and no fault in force, and New returns the State
// with the error, which the caller may log or refuse), and, when the store is a Watcher,
// reloads them on every change it reports until Close.
func New(ctx context.Context, opts Options) (*State, error) {
	if opts.Store == nil || opts.Flags == nil {
		return nil, errors.New("state: a store and a flags.Memory are required")
	}
	cur, _ := opts.Flags.Flags(ctx)
	s := &State{kind: opts.Kind, store: opts.Store, mem: opts.Flags, clock: opts.Clock, log: opts.Logger}
	s.defaults.Store(cur)
	s.faults.Store(&opts.Faults)
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	if w, ok := opts.Store.(Watcher); ok {
		w.Watch(wctx, func() {
			if err := s.Reload(wctx); err != nil {
				s.log.Warn("state: reloading flags and faults", "err", err)
			}
		})
	}
	return s, s.Reload(ctx)
}

// Retarget points the State at a reloaded config: defaults become the flags of every task
// the saved document omits (as Options.Flags at New), and faults the providers whose faults
// it keeps. The saved flags and faults are then put in force again, as Reload does; when the
// store has no saved document, defaults are. An error is Reload's: the flags and faults in
// force stay as they were, and the next change the store reports loads them.
func (s *State) Retarget(ctx context.Context, defaults *flags.Document, faults map[string]*fault.Provider) error {
	s.mu.Lock()
	s.defaults.Store(defaults.Clone())
	s.faults.Store(&faults)
	seen := s.seen
	s.mu.Unlock()
	if !seen {
		// Nothing was saved: what is in force is the config's own flags.
		if saved, _, err := s.store.LoadFlags(ctx); err == nil && saved == nil {
			if err := s.mem.Set(ctx, defaults); err != nil {
				return err
			}
		}
	}
	return s.Reload(ctx)
}

// Kind names the backend.
func (s *State) Kind() string { return s.kind }

// Close stops the reloads and closes the store.
func (s *State) Close() error {
	s.cancel()
	return s.store.Close()
}

// Health returns nil when the store answers, or why it does not, for a store that can tell
// (a Health method); a store that cannot tell is healthy.
func (s *State) Health() error {
	if h, ok := s.store.(interface{ Health() error }); ok {
		return h.Health()
	}
	return nil
}

// Flags returns the document in force, from memory.
func (s *State) Flags(ctx context.Context) (*flags.Document, error) { return s.mem.Flags(ctx) }

// Reload reads the flags, the faults, the drills and the canary decisions from the store
// and puts them in force.
func (s *State) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadFlags(ctx); err != nil {
		return err
	}
	saved, err := s.store.LoadFaults(ctx)
	if err != nil {
		return err
	}
	drills, err := s.store.LoadDrills(ctx)
	if err != nil {
		return err
	}
	s.drills.Store(&drills)
	// The canaries' decisions never keep the flags and faults from loading: a record that does
	// not read is logged, and the decisions loaded before stay.
	if canaries, err := s.store.LoadCanaries(ctx); err != nil {
		s.log.Warn("state: canary decisions unreadable; those loaded before stay", "err", err)
	} else {
		s.canaries.Store(&canaries)
	}
	for name, p := range *s.faults.Load() {
		f := saved[name]
		if err := p.SetUntil(f.Fault, f.Expires); err != nil {
			s.log.Warn("state: saved fault ignored", "provider", name, "err", err)
		}
	}
	return nil
}

// reloadFlags puts the saved document in force, whatever its version: a store that lost its
// data (a Redis restarted empty) numbers its versions anew. A store that lost the document
// this State had seen saved gets it back, so that the fleet keeps its kill switches and a
// later write merges into them, not into the config's flags. s.mu is held.
func (s *State) reloadFlags(ctx context.Context) error {
	doc, version, err := s.store.LoadFlags(ctx)
	if err != nil {
		return err
	}
	if doc == nil && s.seen {
		cur, _ := s.mem.Flags(ctx)
		if _, err := s.store.SwapFlags(ctx, 0, cur); err != nil {
			return err
		}
		if doc, version, err = s.store.LoadFlags(ctx); err != nil {
			return err
		}
		s.log.Warn("state: the store had lost the flags; saved again the flags in force", "version", version)
	}
	if doc == nil {
		return nil
	}
	if err := s.mem.Set(ctx, s.withDefaults(doc)); err != nil {
		return fmt.Errorf("state: saved flags: %w", err)
	}
	s.seen = true
	return nil
}

// withDefaults returns doc with the config's flags for every task it omits.
func (s *State) withDefaults(doc *flags.Document) *flags.Document {
	out := &flags.Document{Kill: doc.Kill, Tasks: make(map[string]flags.TaskFlags, len(doc.Tasks))}
	for name, tf := range s.defaults.Load().Tasks {
		out.Tasks[name] = tf
	}
	for name, tf := range doc.Tasks {
		out.Tasks[name] = tf
	}
	return out
}

// Set replaces the whole document, in the store and then in force.
func (s *State) Set(ctx context.Context, doc *flags.Document) error {
	if err := doc.Validate(); err != nil {
		return err
	}
	_, err := s.Update(ctx, func(*flags.Document) (*flags.Document, error) { return doc, nil })
	return err
}

// Update changes the document atomically in the store: fn gets the document in force and
// returns the next one (it may run more than once, when another writer got there first).
// It returns the document now in force.
func (s *State) Update(ctx context.Context, fn func(cur *flags.Document) (*flags.Document, error)) (*flags.Document, error) {
	for range maxSwaps {
		saved, version, err := s.store.LoadFlags(ctx)
		if err != nil {
			return nil, err
		}
		cur := s.defaults.Load()
		if saved != nil {
			cur = s.withDefaults(saved)
		}
		next, err := fn(cur)
		if err != nil {
			return nil, err
		}
		if err := next.Validate(); err != nil {
			return nil, err
		}
		swapped, err := s.store.SwapFlags(ctx, version, next)
		if err != nil {
			return nil, err
		}
		if !swapped {
			continue
		}
		// In force: what the store holds now (this write, or a later one of another
		// replica); this write when the store cannot be read back.
		s.mu.Lock()
		if rerr := s.reloadFlags(ctx); rerr != nil {
			err = s.mem.Set(ctx, s.withDefaults(next))
			s.seen = true
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return s.mem.Flags(ctx)
	}
	return nil, errors.New("state: the flags kept changing under other writers; try again")
}

// SaveDrill records a drill in the store, then here; every replica of a shared store loads
// it on the change it hears of.
func (s *State) SaveDrill(ctx context.Context, d Drill) error {
	if err := s.store.SaveDrill(ctx, d); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]Drills{}
	if cur := s.drills.Load(); cur != nil {
		next = maps.Clone(*cur)
	}
	next[d.Scope] = next[d.Scope].Add(d)
	s.drills.Store(&next)
	return nil
}

// Drills returns the drills by scope ("task:NAME", "route:NAME"), from memory. The map must
// not be modified.
func (s *State) Drills() map[string]Drills {
	if cur := s.drills.Load(); cur != nil {
		return *cur
	}
	return nil
}

// SaveCanary records a canary's decision in the store (where the first decision of a canary
// stands), then here what the store kept; every replica of a shared store loads it on the
// change it hears of.
func (s *State) SaveCanary(ctx context.Context, c Canary) error {
	if err := s.store.SaveCanary(ctx, c); err != nil {
		return err
	}
	kept, err := s.store.LoadCanaries(ctx) // the first decision of a canary stands: read which
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.canaries.Store(&kept)
	return nil
}

// Canaries returns the canary decisions by task, from memory: cheap enough to read on a
// call. The map must not be modified.
func (s *State) Canaries() map[string]Canary {
	if cur := s.canaries.Load(); cur != nil {
		return *cur
	}
	return nil
}

// SetFault injects f into the provider name (the zero Fault clears it): in the store, with
// its TTL made an absolute expiry, then in force here. Every replica of a shared store puts
// it in force on the change it hears of.
func (s *State) SetFault(ctx context.Context, name string, f fault.Fault) error {
	p, ok := (*s.faults.Load())[name]
	if !ok {
		return fmt.Errorf("state: no provider %q", name)
	}
	if err := f.Validate(); err != nil {
		return err
	}
	saved := Fault{Fault: f}
	if f.Mode != fault.ModeNone && f.TTL > 0 {
		saved.Expires = s.clock.Now().Add(f.TTL).Truncate(time.Millisecond)
	}
	if err := s.store.SaveFault(ctx, name, saved); err != nil {
		return err
	}
	return p.SetUntil(f, saved.Expires)
}
