package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
)

// Fault is one injected fault, in the JSON form of PUT /admin/faults/{provider}.
type Fault struct {
	Mode Mode `json:"mode"`
	// Status is the HTTP status of ModeUnavailable; 0 means 503.
	Status int `json:"status,omitempty"`
	// Delay is the wait of ModeSlow; 0 means 5s.
	Delay time.Duration `json:"delay,omitempty"`
	// TTL is how long the fault holds once Set: then it clears itself, so that a drill
	// nobody ends does not keep a provider down. 0 means until cleared (the admin API gives
	// DefaultTTL to a fault that names none); a negative TTL is invalid.
	TTL time.Duration `json:"ttl,omitempty"`
}

// DefaultTTL is the TTL the admin API gives a fault that names none (shared/DESIGN.md §6).
const DefaultTTL = 15 * time.Minute

// ErrInjected is wrapped by every failure a fault makes, so that logs and tests can tell a
// drill from an outage.
var ErrInjected = errors.New("injected fault")

// Validate reports an unknown mode or an out-of-range value.
func (f Fault) Validate() error {
	switch f.Mode {
	case ModeNone, ModeTimeout, ModeMalformed:
	case ModeUnavailable:
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("fault status %d is not an HTTP error status (400–599)", f.Status)
		}
	case ModeSlow:
		if f.Delay < 0 {
			return fmt.Errorf("fault delay %v is negative", f.Delay)
		}
	default:
		return fmt.Errorf("unknown fault mode %q (want unavailable, timeout, slow or malformed)", f.Mode)
	}
	if f.TTL < 0 {
		return fmt.Errorf("fault ttl %v is negative", f.TTL)
	}
	return nil
}

type faultJSON struct {
	Mode   Mode   `json:"mode"`
	Status int    `json:"status,omitempty"`
	Delay  string `json:"delay,omitempty"`
	TTL    string `json:"ttl,omitempty"`
}

// MarshalJSON writes Delay and TTL as Go durations ("5s", "15m0s").
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Mode: f.Mode, Status: f.Status}
	if f.Delay > 0 {
		j.Delay = f.Delay.String()
	}
	if f.TTL > 0 {
		j.TTL = f.TTL.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads Delay and TTL as Go durations ("5s", "700ms", "15m"). An absent TTL is
// 0; a TTL that is written must be positive: "0s" would read as "never clears", which is
// what the TTL is there to prevent.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a typo ("dealy") must not inject a default fault
	if err := dec.Decode(&j); err != nil {
		return err
	}
	out := Fault{Mode: j.Mode, Status: j.Status}
	if j.Delay != "" {
		d, err := time.ParseDuration(j.Delay)
		if err != nil {
			return fmt.Errorf("delay: %w", err)
		}
		out.Delay = d
	}
	if j.TTL != "" {
		d, err := time.ParseDuration(j.TTL)
		if err != nil {
			return fmt.Errorf("ttl: %w", err)
		}
		if d <= 0 {
			return fmt.Errorf("ttl %s: want a positive duration (DELETE clears a fault)", j.TTL)
		}
		out.TTL = d
	}
	*f = out
	return nil
}

// Provider wraps a provider with an injectable fault. It is safe for concurrent use. It is an
// afloat.Streamer whatever it wraps (a provider that cannot stream answers in one chunk),
// and an afloat.Prober that probes through the fault; CanProbe says whether the wrapped
// provider has a probe to reach.
type Provider struct {
	name  string
	inner afloat.Provider
	clock clockwork.Clock
	fault atomic.Pointer[set]
}

// set is a fault as Set stored it: with the time it clears itself (zero: never).
type set struct {
	f       Fault
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

// Wrap returns p with no fault set. name is the provider's name in the errors it makes; a
// nil clock uses real time.
func Wrap(name string, p afloat.Provider, clock clockwork.Clock) *Provider {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	w := &Provider{name: name, inner: p, clock: clock}
	w.fault.Store(&set{})
	return w
}

// Set replaces the fault; the zero Fault clears it. It takes effect on the next call, and
// clears itself once its TTL has passed at the provider's clock.
func (p *Provider) Set(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s := &set{f: f}
	if f.Mode != ModeNone && f.TTL > 0 {
		s.expires = p.clock.Now().Add(f.TTL)
	}
	p.fault.Store(s)
	return nil
}

// SetUntil replaces the fault with one that clears itself at expires (zero: never), the
// form in which a shared state passes a fault set elsewhere (another replica, before a
// restart). A fault whose expires has passed clears it.
func (p *Provider) SetUntil(f Fault, expires time.Time) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Mode == ModeNone || !expires.IsZero() && !p.clock.Now().Before(expires) {
		p.fault.Store(&set{})
		return nil
	}
	p.fault.Store(&set{f: f, expires: expires})
	return nil
}

// Fault returns the fault in force: the zero Fault once the one set has expired.
func (p *Provider) Fault() Fault { return p.State().Fault }

// State returns the fault in force and when it clears itself. An expired fault is cleared
// here, so that it reads as gone everywhere at once.
func (p *Provider) State() State {
	s := p.fault.Load()
	if s.expires.IsZero() {
		return State{Fault: s.f}
	}
	left := s.expires.Sub(p.clock.Now())
	if left <= 0 {
		p.fault.CompareAndSwap(s, &set{}) // a Set in between wins
		return State{}
	}
	return State{Fault: s.f, ExpiresAt: s.expires, Remaining: left}
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

// Probe applies the fault, then probes the wrapped provider: a provider forced unavailable
// fails its probe too, with the same error as its calls, and a hanging or slow one hangs or
// waits the same. ModeMalformed spoils answers, not the models list: the probe goes through.
// A wrapped provider that is no afloat.Prober fails every probe as Contract, wrapping
// ErrNoProbe (check CanProbe first).
func (p *Provider) Probe(ctx context.Context) error {
	if _, err := p.before(ctx); err != nil {
		return err
	}
	pr, ok := p.inner.(afloat.Prober)
	if !ok {
		return &afloat.ProviderError{Provider: p.name, Kind: afloat.Contract, Err: ErrNoProbe}
	}
	return pr.Probe(ctx)
}

// before applies the fault ahead of a call. It returns a response to answer with, an error
// to fail with, or neither to go on with the call.
func (p *Provider) before(ctx context.Context) (*afloat.Response, error) {
	f := p.Fault()
	switch f.Mode {
	case ModeUnavailable:
		status := f.Status
		if status == 0 {
			status = 503
		}
		return nil, &afloat.ProviderError{Provider: p.name, Status: status, Kind: kindOf(status), Err: ErrInjected}
	case ModeTimeout:
		<-ctx.Done()
		return nil, &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Timeout: true, Err: fmt.Errorf("%w: %w", ErrInjected, ctx.Err())}
	case ModeSlow:
		delay := f.Delay
		if delay == 0 {
			delay = 5 * time.Second
		}
		t := p.clock.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.Chan():
		case <-ctx.Done():
			return nil, &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Timeout: true, Err: fmt.Errorf("%w: %w", ErrInjected, ctx.Err())}
		}
	case ModeMalformed:
		return &afloat.Response{Content: "I'm sorry, I can't produce that right now. Please try again later.", FinishReason: "stop"}, nil
	}
	return nil, nil
}

func kindOf(status int) afloat.Kind {
	switch {
	case status == 429:
		return afloat.Throttled
	case status == 401 || status == 402 || status == 403:
		return afloat.Unusable
	case status >= 500 || status == 408:
		return afloat.Unavailable
	}
	return afloat.Contract
}

// Complete applies the fault, then calls the wrapped provider if the fault lets it.
func (p *Provider) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	if resp, err := p.before(ctx); resp != nil || err != nil {
		return resp, err
	}
	return p.inner.Complete(ctx, req)
}

// Stream applies the fault, then streams from the wrapped provider; a provider that cannot
// stream answers in one chunk.
func (p *Provider) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	resp, err := p.before(ctx)
	if err != nil {
		return nil, err
	}
	if resp == nil {
		if s, ok := p.inner.(afloat.Streamer); ok {
			return s.Stream(ctx, req)
		}
		if resp, err = p.inner.Complete(ctx, req); err != nil {
			return nil, err
		}
	}
	return afloat.StreamOf(resp), nil
}
