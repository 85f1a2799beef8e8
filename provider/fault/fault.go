package fault

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// Mode is the kind of fault.
type Mode string

const (
	// ModeNone: no fault; calls go through.
	ModeNone Mode = ""
	// ModeUnavailable: every call fails at once with Status, classified as the provider's
	// adapter would (5xx, 529 and 408 unavailable, 429 throttled, 401/402/403 unusable,
	// other 4xx contract).
	ModeUnavailable Mode = "unavailable"
	// ModeTimeout: every call hangs until its context ends.
	ModeTimeout Mode = "timeout"
	// ModeSlow: every call waits Delay before it is made.
	ModeSlow Mode = "slow"
	// ModeMalformed: every call answers at once with prose that holds no JSON.
	ModeMalformed Mode = "malformed"
	// ModeReset: every call fails at once as a connection reset before any header: an
	// Unavailable error of status 0 wrapping syscall.ECONNRESET, which
	// afloat.ProviderError.Transient allows one retry.
	ModeReset Mode = "reset"
	// ModeRateLimited: every call fails at once with a 429, Throttled, whose RetryAfter is
	// RetryAfter.
	ModeRateLimited Mode = "rate_limited"
	// ModeStreamCut: a stream passes AfterChunks chunks, then fails with an Unavailable error
	// of status 200 wrapping io.ErrUnexpectedEOF, as a stream whose connection drops before
	// its end marker does. A call that is not streamed is made and its answer lost: it fails
	// as a body cut short (Unavailable, status 0, io.ErrUnexpectedEOF).
	ModeStreamCut Mode = "stream_cut"
	// ModeStreamStall: a stream opens at once and sends nothing until its context ends, then
	// fails as an Unavailable timeout; a call that is not streamed hangs as ModeTimeout's.
	ModeStreamStall Mode = "stream_stall"
	// ModeFirstTokenSlow: a stream opens at once and its first chunk waits Delay, then the
	// rest flows; a call that is not streamed waits Delay as ModeSlow's.
	ModeFirstTokenSlow Mode = "first_token_slow"
	// ModeFlap: calls fail as ModeUnavailable's with Status for Down, then go through for Up,
	// and so on from the moment the fault was set, on the provider's clock.
	ModeFlap Mode = "flap"
	// ModeErrorRate: a share Rate of calls, drawn at random, fail as ModeUnavailable's with
	// Status; the others go through.
	ModeErrorRate Mode = "error_rate"
)

// Modes returns every mode a fault can have, ModeNone aside, in the order the errors list
// them.
func Modes() []Mode {
	return []Mode{ModeUnavailable, ModeTimeout, ModeSlow, ModeMalformed, ModeReset, ModeRateLimited,
		ModeStreamCut, ModeStreamStall, ModeFirstTokenSlow, ModeFlap, ModeErrorRate}
}

// Fault is one injected fault, in the JSON form of PUT /admin/faults/{provider}. A field
// that its mode does not take (see Validate) is an error, so that a drill runs the fault
// that was asked for.
type Fault struct {
	Mode Mode `json:"mode"`
	// Status is the HTTP status of ModeUnavailable, ModeFlap and ModeErrorRate; 0 means 503.
	Status int `json:"status,omitempty"`
	// Delay is the wait of ModeSlow and ModeFirstTokenSlow; 0 means 5s.
	Delay time.Duration `json:"delay,omitempty"`
	// RetryAfter is the wait a ModeRateLimited 429 asks for; 0 means 30s. (A 429 that names
	// no wait is ModeUnavailable with Status 429.)
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// AfterChunks is how many chunks a ModeStreamCut stream passes before it is cut; 0 means 3.
	AfterChunks int `json:"after_chunks,omitempty"`
	// Down and Up are ModeFlap's phases, down first; 0 means 10s each.
	Down time.Duration `json:"down,omitempty"`
	Up   time.Duration `json:"up,omitempty"`
	// Rate is the share of calls that ModeErrorRate fails, 0 < Rate ≤ 1; required there.
	Rate float64 `json:"rate,omitempty"`
	// TTL is how long the fault holds once Set: then it clears itself, so that a drill
	// nobody ends does not keep a provider down. 0 means until cleared (the admin API gives
	// DefaultTTL to a fault that names none); a negative TTL is invalid. Every mode takes it.
	TTL time.Duration `json:"ttl,omitempty"`
}

// DefaultTTL is the TTL the admin API gives a fault that names none (shared/DESIGN.md §6).
const DefaultTTL = 15 * time.Minute

// The defaults of Fault's zero fields.
const (
	defaultStatus      = 503
	defaultDelay       = 5 * time.Second
	defaultRetryAfter  = 30 * time.Second
	defaultAfterChunks = 3
	defaultDown        = 10 * time.Second
	defaultUp          = 10 * time.Second
)

// Effective returns f with the defaults filled in of the fields its mode takes (a status of
// 503, a delay of 5s…): the fault as it runs, which the admin API shows.
func (f Fault) Effective() Fault {
	for _, field := range takes(f.Mode) {
		switch field {
		case "status":
			f.Status = cmp.Or(f.Status, defaultStatus)
		case "delay":
			f.Delay = cmp.Or(f.Delay, defaultDelay)
		case "retry_after":
			f.RetryAfter = cmp.Or(f.RetryAfter, defaultRetryAfter)
		case "after_chunks":
			f.AfterChunks = cmp.Or(f.AfterChunks, defaultAfterChunks)
		case "down":
			f.Down = cmp.Or(f.Down, defaultDown)
		case "up":
			f.Up = cmp.Or(f.Up, defaultUp)
		}
	}
	return f
}

// ErrInjected is wrapped by every failure a fault makes, so that logs and tests can tell a
// drill from an outage.
var ErrInjected = errors.New("injected fault")

// takes returns the fields, by their JSON names, that mode m takes besides ttl.
func takes(m Mode) []string {
	switch m {
	case ModeUnavailable:
		return []string{"status"}
	case ModeSlow, ModeFirstTokenSlow:
		return []string{"delay"}
	case ModeRateLimited:
		return []string{"retry_after"}
	case ModeStreamCut:
		return []string{"after_chunks"}
	case ModeFlap:
		return []string{"status", "down", "up"}
	case ModeErrorRate:
		return []string{"status", "rate"}
	}
	return nil
}

func known(m Mode) bool {
	for _, k := range Modes() {
		if m == k {
			return true
		}
	}
	return false
}

// checkField reports a field that mode m does not take.
func checkField(m Mode, field string) error {
	ts := takes(m)
	for _, t := range ts {
		if t == field {
			return nil
		}
	}
	if m == ModeNone {
		return fmt.Errorf("fault field %s needs a mode (want one of %s)", field, modeList())
	}
	if len(ts) == 0 {
		return fmt.Errorf("fault field %s does not apply to mode %s (it takes only ttl)", field, m)
	}
	return fmt.Errorf("fault field %s does not apply to mode %s (it takes %s and ttl)", field, m, strings.Join(ts, ", "))
}

// modeList is every mode as the errors name them: "unavailable, timeout, … or error_rate".
func modeList() string {
	ms := Modes()
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = string(m)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Validate reports an unknown mode, a field the mode does not take, or an out-of-range
// value. A mode takes, besides ttl: unavailable status; slow and first_token_slow delay;
// rate_limited retry_after; stream_cut after_chunks; flap status, down and up; error_rate
// status and rate (required); timeout, malformed, reset and stream_stall nothing else.
func (f Fault) Validate() error {
	if f.Mode != ModeNone && !known(f.Mode) {
		return fmt.Errorf("unknown fault mode %q (want %s)", f.Mode, modeList())
	}
	fields := []struct {
		name string
		set  bool
	}{
		{"status", f.Status != 0}, {"delay", f.Delay != 0}, {"retry_after", f.RetryAfter != 0},
		{"after_chunks", f.AfterChunks != 0}, {"down", f.Down != 0}, {"up", f.Up != 0}, {"rate", f.Rate != 0},
	}
	for _, fl := range fields {
		if fl.set {
			if err := checkField(f.Mode, fl.name); err != nil {
				return err
			}
		}
	}
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		return fmt.Errorf("fault status %d is not an HTTP error status (want 400–599; 0 means 503)", f.Status)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
		zero string
	}{
		{"delay", f.Delay, "5s"}, {"retry_after", f.RetryAfter, "30s"}, {"down", f.Down, "10s"}, {"up", f.Up, "10s"},
		{"ttl", f.TTL, "until cleared"},
	} {
		if d.d < 0 {
			return fmt.Errorf("fault %s %v is negative (want a positive duration; 0 means %s)", d.name, d.d, d.zero)
		}
	}
	if f.AfterChunks < 0 {
		return fmt.Errorf("fault after_chunks %d is negative (want a chunk count ≥ 1; 0 means %d)", f.AfterChunks, defaultAfterChunks)
	}
	if f.Mode == ModeErrorRate && f.Rate == 0 {
		return errors.New("fault rate is required by mode error_rate (want 0 < rate ≤ 1: the share of calls that fail)")
	}
	if f.Rate != 0 && !(f.Rate > 0 && f.Rate <= 1) { // NaN too
		return fmt.Errorf("fault rate %v is out of range (want 0 < rate ≤ 1: the share of calls that fail)", f.Rate)
	}
	return nil
}

func (f Fault) status() int                      { return or(f.Status, defaultStatus) }
func (f Fault) delay() time.Duration             { return or(f.Delay, defaultDelay) }
func (f Fault) retryAfter() time.Duration        { return or(f.RetryAfter, defaultRetryAfter) }
func (f Fault) afterChunks() int                 { return or(f.AfterChunks, defaultAfterChunks) }
func (f Fault) phases() (down, up time.Duration) { return or(f.Down, defaultDown), or(f.Up, defaultUp) }

// or returns v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// faultJSON is Fault's JSON form. Every field but mode is a pointer, so that a field that is
// written is told from one left out: one the mode does not take is an error even when zero.
type faultJSON struct {
	Mode        Mode     `json:"mode"`
	Status      *int     `json:"status,omitempty"`
	Delay       *string  `json:"delay,omitempty"`
	RetryAfter  *string  `json:"retry_after,omitempty"`
	AfterChunks *int     `json:"after_chunks,omitempty"`
	Down        *string  `json:"down,omitempty"`
	Up          *string  `json:"up,omitempty"`
	Rate        *float64 `json:"rate,omitempty"`
	TTL         *string  `json:"ttl,omitempty"`
}

// MarshalJSON writes the fields that are set, durations as Go durations ("5s", "15m0s").
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Mode: f.Mode}
	if f.Status != 0 {
		j.Status = &f.Status
	}
	j.Delay = durationJSON(f.Delay)
	j.RetryAfter = durationJSON(f.RetryAfter)
	if f.AfterChunks != 0 {
		j.AfterChunks = &f.AfterChunks
	}
	j.Down = durationJSON(f.Down)
	j.Up = durationJSON(f.Up)
	if f.Rate != 0 {
		j.Rate = &f.Rate
	}
	j.TTL = durationJSON(f.TTL)
	return json.Marshal(j)
}

func durationJSON(d time.Duration) *string {
	if d <= 0 {
		return nil
	}
	s := d.String()
	return &s
}

// UnmarshalJSON reads the durations (delay, retry_after, down, up, ttl) as Go durations
// ("5s", "700ms", "15m"). A field that is left out is zero, which means its default; a field
// that is written must be one the mode takes, and a duration or after_chunks that is written
// must be positive: "0s" would silently read as the default (or, for ttl, as "never
// clears", which is what the TTL is there to prevent). Validate checks the rest.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a typo ("dealy") must not inject a default fault
	if err := dec.Decode(&j); err != nil {
		return err
	}
	if known(j.Mode) || j.Mode == ModeNone { // an unknown mode is Validate's to report
		for _, w := range []struct {
			name    string
			written bool
		}{
			{"status", j.Status != nil}, {"delay", j.Delay != nil}, {"retry_after", j.RetryAfter != nil},
			{"after_chunks", j.AfterChunks != nil}, {"down", j.Down != nil}, {"up", j.Up != nil}, {"rate", j.Rate != nil},
		} {
			if w.written {
				if err := checkField(j.Mode, w.name); err != nil {
					return err
				}
			}
		}
	}
	out := Fault{Mode: j.Mode}
	if j.Status != nil {
		out.Status = *j.Status
	}
	if j.AfterChunks != nil {
		if *j.AfterChunks <= 0 {
			return fmt.Errorf("after_chunks %d: want a chunk count ≥ 1 (leave it out for %d)", *j.AfterChunks, defaultAfterChunks)
		}
		out.AfterChunks = *j.AfterChunks
	}
	if j.Rate != nil {
		out.Rate = *j.Rate
	}
	for _, d := range []struct {
		name string
		in   *string
		out  *time.Duration
		zero string
	}{
		{"delay", j.Delay, &out.Delay, "leave it out for 5s"},
		{"retry_after", j.RetryAfter, &out.RetryAfter, "leave it out for 30s"},
		{"down", j.Down, &out.Down, "leave it out for 10s"},
		{"up", j.Up, &out.Up, "leave it out for 10s"},
		{"ttl", j.TTL, &out.TTL, "DELETE clears a fault"},
	} {
		if d.in == nil {
			continue
		}
		v, err := time.ParseDuration(*d.in)
		if err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
		if v <= 0 {
			return fmt.Errorf("%s %s: want a positive duration (%s)", d.name, *d.in, d.zero)
		}
		*d.out = v
	}
	*f = out
	return nil
}

// Provider wraps a provider with an injectable fault. It is safe for concurrent use. It is an
// afloat.Streamer whatever it wraps (a provider that cannot stream is called as Complete
// is, fault and all, and answers in one chunk), and an afloat.Prober that probes through the
// fault; CanProbe says whether the wrapped provider has a probe to reach.
type Provider struct {
	name  string
	inner afloat.Provider
	clock clockwork.Clock
	rand  func() float64 // ModeErrorRate's draw, in [0, 1)
	fault atomic.Pointer[set]
}

// set is a fault as Set stored it: with the time it was set, which ModeFlap's phases count
// from, and the time it clears itself (zero: never).
type set struct {
	f       Fault
	since   time.Time
	expires time.Time
}

// State is the fault in force and when it clears itself.
type State struct {
	Fault Fault
	// ExpiresAt is when the fault clears itself; zero when it holds until cleared.
	ExpiresAt time.Time
	// Remaining is the time left until ExpiresAt at the provider's clock; 0 without one.
	Remaining time.Duration
}

var (
	_ afloat.Provider = (*Provider)(nil)
	_ afloat.Streamer = (*Provider)(nil)
	_ afloat.Prober   = (*Provider)(nil)
)

// ErrNoProbe is the cause of Probe's error when the wrapped provider is no afloat.Prober.
var ErrNoProbe = errors.New("provider has no probe")

// Option changes a Provider that Wrap makes.
type Option func(*Provider)

// WithRand sets the source of ModeErrorRate's draws: a function returning a number in
// [0, 1), as math/rand/v2's Float64 (the source without this option). The Provider calls it
// under a lock of its own, so r need not be safe for concurrent use: a seeded
// rand.New(…).Float64 makes the draws of a test deterministic.
func WithRand(r func() float64) Option {
	var mu sync.Mutex
	return func(p *Provider) {
		p.rand = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return r()
		}
	}
}

// Wrap returns p with no fault set. name is the provider's name in the errors it makes; a
// nil clock uses real time.
func Wrap(name string, p afloat.Provider, clock clockwork.Clock, opts ...Option) *Provider {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	w := &Provider{name: name, inner: p, clock: clock, rand: rand.Float64}
	for _, o := range opts {
		o(w)
	}
	w.fault.Store(&set{})
	return w
}

// Set replaces the fault; the zero Fault clears it. It takes effect on the next call, and
// clears itself once its TTL has passed at the provider's clock. ModeFlap's phases count
// from now, also when the same fault was in force already.
func (p *Provider) Set(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Mode == ModeNone {
		p.fault.Store(&set{})
		return nil
	}
	s := &set{f: f, since: p.clock.Now()}
	if f.TTL > 0 {
		s.expires = s.since.Add(f.TTL)
	}
	p.fault.Store(s)
	return nil
}

// SetUntil replaces the fault with one that clears itself at expires (zero: never), the
// form in which a shared state passes a fault set elsewhere (another replica, before a
// restart). A fault whose expires has passed clears it. The same fault with the same
// expires changes nothing, so that passing it again keeps ModeFlap's phases; a new one's
// phases count from expires less its TTL, the moment it was set where it was set (every
// replica then flaps in step), or from now without a TTL.
func (p *Provider) SetUntil(f Fault, expires time.Time) error {
	if err := f.Validate(); err != nil {
		return err
	}
	now := p.clock.Now()
	if f.Mode == ModeNone || !expires.IsZero() && !now.Before(expires) {
		p.fault.Store(&set{})
		return nil
	}
	if cur := p.fault.Load(); cur.f == f && cur.expires.Equal(expires) {
		return nil
	}
	s := &set{f: f, since: now, expires: expires}
	if !expires.IsZero() && f.TTL > 0 {
		s.since = expires.Add(-f.TTL)
	}
	p.fault.Store(s)
	return nil
}

// Fault returns the fault in force: the zero Fault once the one set has expired.
func (p *Provider) Fault() Fault { return p.State().Fault }

// State returns the fault in force and when it clears itself. An expired fault is cleared
// here, so that it reads as gone everywhere at once.
func (p *Provider) State() State {
	now := p.clock.Now()
	s := p.live(now)
	if s.expires.IsZero() {
		return State{Fault: s.f}
	}
	return State{Fault: s.f, ExpiresAt: s.expires, Remaining: s.expires.Sub(now)}
}

// live returns the fault in force at now, clearing one that has expired.
func (p *Provider) live(now time.Time) *set {
	s := p.fault.Load()
	if !s.expires.IsZero() && !now.Before(s.expires) {
		p.fault.CompareAndSwap(s, &set{}) // a Set in between wins
		return &set{}
	}
	return s
}

// Inner returns the wrapped provider.
func (p *Provider) Inner() afloat.Provider { return p.inner }

// CanProbe reports whether the wrapped provider is an afloat.Prober, for the config layer:
// Probe reaches it only then.
func (p *Provider) CanProbe() bool {
	_, ok := p.inner.(afloat.Prober)
	return ok
}

// Continuation returns the wrapped provider's Continuation() ("prefill" or "none"), or
// "none" when it has no such method.
func (p *Provider) Continuation() string {
	if c, ok := p.inner.(interface{ Continuation() string }); ok {
		return c.Continuation()
	}
	return "none"
}
