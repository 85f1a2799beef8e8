package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// ErrOpen is returned by Allow when the call must be skipped: the breaker is open, half-open
// with its probe already taken, or closed by a good probe and still ramping up (see
// Config.RampUp) with the call outside the provider's share.
var ErrOpen = errors.New("breaker: circuit open")

// maxSwaps bounds the compare-and-swap retries of one operation. Each retry means another
// writer moved the record, so a few are enough for the record to settle.
const maxSwaps = 8

// Breaker is the circuit breaker of one provider. Its state lives in its Store; when the
// store fails, the breaker serves from a local MemoryStore of its own (which starts closed),
// counts the failure in StoreErrors, and goes back to the store on the next operation.
// A Breaker is safe for concurrent use.
type Breaker struct {
	name     string
	s        settings
	clock    clockwork.Clock
	store    Store
	local    *MemoryStore
	onChange func(Event)

	storeErrors atomic.Uint64

	mu          sync.Mutex // guards the event queue below, and nothing else
	queue       []*pending
	dispatching bool
}

// New returns the breaker of the provider name. Invalid values in cfg (negative counts or
// durations, a FailureRate outside (0, 1], a Growth below 1, a Jitter outside [0, 1),
// MaxRecovery shorter than Recovery) are errors.
func New(name string, cfg Config) (*Breaker, error) {
	if name == "" {
		return nil, errors.New("breaker: empty name")
	}
	s, err := cfg.settings()
	if err != nil {
		return nil, fmt.Errorf("breaker %q: %w", name, err)
	}
	b := &Breaker{
		name:     name,
		s:        s,
		clock:    cfg.Clock,
		store:    cfg.Store,
		local:    NewMemoryStore(),
		onChange: cfg.OnStateChange,
	}
	if b.clock == nil {
		b.clock = clockwork.NewRealClock()
	}
	if b.store == nil {
		b.store = b.local
	}
	return b, nil
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// StoreErrors returns how many operations the store failed since the breaker was made; each
// was served from the local state instead (or, for an outcome of a call admitted by the
// store, dropped).
func (b *Breaker) StoreErrors() uint64 { return b.storeErrors.Load() }

// Permit is the admission of one call by Allow. Exactly one of Done or Cancel should be
// called on it; a probe that is never reported holds the probe slot for Config.ProbeTimeout.
// The zero Permit, and the permits of a disabled breaker, do nothing.
type Permit struct {
	b     *Breaker
	epoch uint64
	token uint64 // probe slot token; 0 when the permit is not a probe
	flags permitFlags
}

type permitFlags uint8

const (
	// viaLocal: admitted by the local store while the shared one failed.
	viaLocal permitFlags = 1 << iota
	// elevated: admitted while Recovery was above Config.Recovery, which a success resets.
	elevated
)

// Allow decides whether a call to the provider may be made now. It returns ErrOpen when the
// call must be skipped (during a ramp-up, the calls outside the provider's share are), and
// no other error: when the store fails, the local state decides.
// Allow never waits on the clock.
func (b *Breaker) Allow(ctx context.Context) (Permit, error) {
	if b.s.disabled {
		return Permit{}, nil
	}
	p, err := b.allow(ctx, b.store, 0)
	if err != nil && err != ErrOpen {
		b.storeErrors.Add(1)
		if p, err = b.allow(ctx, b.local, viaLocal); err != nil {
			return Permit{}, ErrOpen // the local store never fails; skipping is the safe answer
		}
	}
	return p, err
}

func (b *Breaker) allow(ctx context.Context, st Store, via permitFlags) (Permit, error) {
	now := b.clock.Now()
	rec, err := st.Load(ctx, b.name)
	if err != nil {
		return Permit{}, err
	}
	for range maxSwaps {
		switch rec.State {
		case StateClosed:
			if b.rampedOut(rec, now) {
				return Permit{}, ErrOpen
			}
			p := Permit{b: b, epoch: rec.Epoch, flags: via}
			if rec.Recovery != 0 {
				p.flags |= elevated
			}
			return p, nil
		case StateOpen:
			if now.Before(rec.Until) {
				return Permit{}, ErrOpen
			}
			next := Record{State: StateHalfOpen, Epoch: rec.Epoch + 1, Since: now, Recovery: rec.Recovery, Kind: rec.Kind}
			cur, _, err := b.swap(ctx, st, rec, next, false)
			if err != nil {
				return Permit{}, err
			}
			rec = cur
		case StateHalfOpen:
			token, ok, err := st.AcquireProbe(ctx, b.name, rec.Epoch, now, b.s.probeTimeout)
			if err != nil {
				return Permit{}, err
			}
			if !ok {
				return Permit{}, ErrOpen
			}
			return Permit{b: b, epoch: rec.Epoch, token: token, flags: via}, nil
		default:
			return Permit{}, fmt.Errorf("breaker %q: stored state %v is unknown", b.name, rec.State)
		}
	}
	return Permit{}, ErrOpen // other writers kept moving the record; skipping is the safe answer
}

// Done reports the outcome of the call: nil err is a success. The error's afloat.KindOf
// decides: Unavailable and Throttled are failures; Contract and Refused are successes for availability
// (the provider answered); Unusable opens the breaker at once for UnusableCooldown. A
// Throttled *afloat.ProviderError whose RetryAfter is longer than the open period that its
// failure starts extends that period to it. An outcome reported after the breaker changed
// state since Allow (the call was admitted before an opening) moves nothing.
//
// Done records the outcome even when ctx is already done (it was the call's context and the
// call timed out); ctx's values still reach the store.
func (p Permit) Done(ctx context.Context, err error) {
	b := p.b
	if b == nil {
		return
	}
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	if serr := b.done(ctx, b.storeFor(p), p, err); serr != nil {
		b.storeErrors.Add(1)
	}
}

// Probe reports whether the permit is the one probe of a half-open breaker: its outcome
// closes or reopens the circuit.
func (p Permit) Probe() bool { return p.token != 0 }

// Cancel reports that the call was not made (a later gate skipped it): it frees the probe
// slot of a probe and records nothing.
func (p Permit) Cancel(ctx context.Context) {
	b := p.b
	if b == nil || p.token == 0 {
		return
	}
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	if err := b.storeFor(p).ReleaseProbe(ctx, b.name, p.epoch, p.token); err != nil {
		b.storeErrors.Add(1)
	}
}

func (b *Breaker) storeFor(p Permit) Store {
	if p.flags&viaLocal != 0 {
		return b.local
	}
	return b.store
}

// done records the outcome callErr of the call admitted by p, and returns the store's error.
func (b *Breaker) done(ctx context.Context, st Store, p Permit, callErr error) error {
	now := b.clock.Now()
	kind := afloat.Contract // a success, for availability
	if callErr != nil {
		kind = afloat.KindOf(callErr)
	}
	if kind == afloat.Refused {
		kind = afloat.Contract // the provider answered, declining the content: it is up
	}
	probe := p.token != 0
	switch {
	case probe && kind == afloat.Contract:
		return b.update(ctx, st, p.epoch, func(rec Record) (Record, bool) {
			return Record{State: StateClosed, Epoch: rec.Epoch + 1, Since: now, Recovery: rec.Recovery, RampUp: true}, true
		})
	case probe && kind != afloat.Unusable:
		return b.update(ctx, st, p.epoch, func(rec Record) (Record, bool) {
			rec.Recovery = b.grown(b.recovery(rec))
			return b.opened(rec, now, kind, b.jittered(rec.Recovery), callErr), true
		})
	}
	switch kind {
	case afloat.Unusable: // in the closed state or on a probe alike
		return b.update(ctx, st, p.epoch, func(rec Record) (Record, bool) {
			return b.opened(rec, now, kind, b.s.unusableCooldown, callErr), true
		})
	case afloat.Contract:
		c, err := st.Count(ctx, b.name, p.epoch, false, now, b.s.window)
		if err != nil || !c.Current || p.flags&elevated == 0 {
			return err
		}
		// The first success after a failed probe ends the growth.
		return b.update(ctx, st, p.epoch, func(rec Record) (Record, bool) {
			if rec.Recovery == 0 {
				return rec, false
			}
			rec.Recovery = 0
			return rec, true
		})
	default: // Unavailable, Throttled
		c, err := st.Count(ctx, b.name, p.epoch, true, now, b.s.window)
		if err != nil || !c.Current || !b.trips(c) {
			return err
		}
		return b.update(ctx, st, p.epoch, func(rec Record) (Record, bool) {
			return b.opened(rec, now, kind, b.jittered(b.recovery(rec)), callErr), true
		})
	}
}

// rampedOut reports whether the ramp-up of rec, a closed record, turns away a call at now:
// until Config.RampUp has passed since a close by a good probe, a call is admitted with the
// probability of the time since the close over RampUp. The draw is per call, so replicas that
// share the record give the provider the same share together as each does alone.
func (b *Breaker) rampedOut(rec Record, now time.Time) bool {
	if !rec.RampUp || b.s.rampUp == 0 {
		return false
	}
	since := now.Sub(rec.Since)
	if since >= b.s.rampUp {
		return false
	}
	return b.s.rand() >= float64(since)/float64(b.s.rampUp)
}

// rampUntil returns the end of the ramp-up of rec, or the zero time when rec does not ramp up.
func (b *Breaker) rampUntil(rec Record) time.Time {
	if rec.State != StateClosed || !rec.RampUp || b.s.rampUp == 0 {
		return time.Time{}
	}
	return rec.Since.Add(b.s.rampUp)
}

func (b *Breaker) trips(c Counts) bool {
	return c.Consecutive >= b.s.consecutive ||
		c.Calls >= b.s.minCalls && float64(c.Failures) >= b.s.rate*float64(c.Calls)
}

// recovery returns the open period of the next opening by failures of rec.
func (b *Breaker) recovery(rec Record) time.Duration {
	if rec.Recovery == 0 {
		return b.s.recovery
	}
	return rec.Recovery
}

// grown returns the recovery that follows a failed probe after one of d: d × Growth, capped
// by MaxRecovery. It is the schedule before jitter, which is what the record keeps, so that
// the jitter of one period does not compound into the next.
func (b *Breaker) grown(d time.Duration) time.Duration {
	next := float64(d) * b.s.growth
	if next >= float64(b.s.maxRecovery) {
		return b.s.maxRecovery
	}
	return time.Duration(next)
}

// jittered returns the open period for the recovery d: d spread over ±Jitter, capped by
// MaxRecovery.
func (b *Breaker) jittered(d time.Duration) time.Duration {
	f := 1 + b.s.jitter*(2*b.s.rand()-1)
	return min(time.Duration(float64(d)*f), b.s.maxRecovery)
}

// opened returns rec opened at now for period, or for longer when callErr asked to wait.
func (b *Breaker) opened(rec Record, now time.Time, kind afloat.Kind, period time.Duration, callErr error) Record {
	var pe *afloat.ProviderError
	if kind == afloat.Throttled && errors.As(callErr, &pe) {
		period = max(period, pe.RetryAfter)
	}
	return Record{State: StateOpen, Epoch: rec.Epoch + 1, Since: now, Until: now.Add(period), Recovery: rec.Recovery, Kind: kind}
}

// update swaps change(rec) in for the record rec of epoch, reloading and retrying when
// another writer got there first, and emits the change of state. It does nothing once the
// record has left epoch (the outcome belongs to a state that is over) or when change declines.
func (b *Breaker) update(ctx context.Context, st Store, epoch uint64, change func(Record) (Record, bool)) error {
	rec, err := st.Load(ctx, b.name)
	if err != nil {
		return err
	}
	for range maxSwaps {
		if rec.Epoch != epoch {
			return nil
		}
		next, ok := change(rec)
		if !ok {
			return nil
		}
		cur, swapped, err := b.swap(ctx, st, rec, next, false)
		if err != nil || swapped {
			return err
		}
		rec = cur
	}
	return nil // the record kept moving under other writers, whose outcomes are as recent
}

// State returns the breaker's state. A breaker open past the end of its open period reads
// half-open: the next call will be its probe.
func (b *Breaker) State(ctx context.Context) State { return b.Snapshot(ctx).State }

// Snapshot returns the breaker's state with its times. When the store fails, it describes
// the local state.
func (b *Breaker) Snapshot(ctx context.Context) Snapshot {
	if b.s.disabled {
		return Snapshot{State: StateClosed, Recovery: b.s.recovery}
	}
	rec, err := b.store.Load(ctx, b.name)
	if err != nil {
		b.storeErrors.Add(1)
		rec, _ = b.local.Load(ctx, b.name)
	}
	snap := Snapshot{State: rec.State, Since: rec.Since, Recovery: b.recovery(rec)}
	now := b.clock.Now()
	switch {
	case rec.State == StateClosed:
		if until := b.rampUntil(rec); now.Before(until) {
			snap.RampUntil = until
		}
	case rec.State != StateOpen:
	case now.Before(rec.Until):
		snap.Until = rec.Until
	default:
		snap.State, snap.Since = StateHalfOpen, rec.Until
	}
	return snap
}

// Force sets the breaker's state, for administrators: StateOpen opens it for Config.Recovery
// (it then probes as after any opening), StateHalfOpen makes the next call a probe, and
// StateClosed closes it with empty counts, Recovery back to Config.Recovery and no ramp-up
// (the administrator vouches for the provider). The change is made even when the breaker is
// already in s, and emits an Event with Forced set when the state changes. When the store
// fails, Force sets the local state and returns the error. A disabled breaker cannot be
// forced.
func (b *Breaker) Force(ctx context.Context, s State) error {
	if b.s.disabled {
		return fmt.Errorf("breaker %q: disabled, cannot be forced %v", b.name, s)
	}
	if !s.valid() {
		return fmt.Errorf("breaker %q: cannot force unknown %v", b.name, s)
	}
	return b.forceFor(ctx, s, b.s.recovery)
}

// ForceOpen opens the breaker for d instead of Config.Recovery, for an administrator who
// takes the provider out for a known time (a vendor's maintenance window): once d has passed
// it probes as after any opening. Otherwise it is Force(ctx, StateOpen).
func (b *Breaker) ForceOpen(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("breaker %q: cannot be forced open for %v", b.name, d)
	}
	if b.s.disabled {
		return fmt.Errorf("breaker %q: disabled, cannot be forced %v", b.name, StateOpen)
	}
	return b.forceFor(ctx, StateOpen, d)
}

// forceFor is Force with the open period d.
func (b *Breaker) forceFor(ctx context.Context, s State, d time.Duration) error {
	err := b.force(ctx, b.store, s, d)
	if err != nil && b.store != b.local {
		b.storeErrors.Add(1)
		_ = b.force(ctx, b.local, s, d) // the local store never fails
	}
	if err != nil {
		return fmt.Errorf("breaker %q: force %v: %w", b.name, s, err)
	}
	return nil
}

func (b *Breaker) force(ctx context.Context, st Store, s State, open time.Duration) error {
	rec, err := st.Load(ctx, b.name)
	if err != nil {
		return err
	}
	for range maxSwaps {
		now := b.clock.Now()
		next := Record{State: s, Epoch: rec.Epoch + 1, Since: now, Recovery: rec.Recovery, Kind: rec.Kind}
		switch s {
		case StateClosed:
			next.Recovery, next.Kind = 0, 0
		case StateOpen:
			next.Until = now.Add(open)
		}
		cur, swapped, err := b.swap(ctx, st, rec, next, true)
		if err != nil || swapped {
			return err
		}
		rec = cur
	}
	return errors.New("concurrent updates kept moving the state")
}

// Recover closes the breaker as a good probe does, its provider's share then ramping up over
// Config.RampUp: for a probe made outside Allow (the engine's background probe, which may
// end an open period early). It does nothing to a closed breaker. When the store fails, it
// closes the local state and returns the error.
func (b *Breaker) Recover(ctx context.Context) error {
	if b.s.disabled {
		return nil
	}
	recover := func(st Store) error {
		rec, err := st.Load(ctx, b.name)
		if err != nil || rec.State == StateClosed {
			return err
		}
		now := b.clock.Now()
		return b.update(ctx, st, rec.Epoch, func(rec Record) (Record, bool) {
			return Record{State: StateClosed, Epoch: rec.Epoch + 1, Since: now, Recovery: rec.Recovery, RampUp: true}, true
		})
	}
	err := recover(b.store)
	if err != nil && b.store != b.local {
		b.storeErrors.Add(1)
		_ = recover(b.local) // the local store never fails
	}
	if err != nil {
		return fmt.Errorf("breaker %q: recover: %w", b.name, err)
	}
	return nil
}
