package cascade

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/latency"
	"github.com/jonboulle/clockwork"
)

// maxProbeTimeout caps the time a background probe may take: the provider's longest read
// timeout (latency.Config.Max, 10s by default), but never more. A probe that has not answered
// by then has failed.
const maxProbeTimeout = 10 * time.Second

// maxProbeGap is the longest an open breaker goes without a background probe. Its open period
// grows with each failed probe up to max_recovery (5m), which after a long outage would leave a
// recovered provider unused for minutes; a background probe costs no user request, so one is
// made at least this often, and a good one ends the open period early.
const maxProbeGap = 30 * time.Second

// probeRequest returns the fixed request of ProbeCompletion: one short user message, and an
// answer of one token, so that the probe costs next to nothing.
func probeRequest() *afloat.Request {
	return &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "ping"}}, MaxTokens: 1}
}

// prober probes a provider's open breaker in the background, so that its recovery is noticed
// without spending a user request on a provider that may still be down. Each opening of the
// breaker (each Event to StateOpen, a failed probe's included) arms one timer for the end of
// the open period; when it fires, the prober asks the breaker for its probe permit and, when
// it gets it, makes the provider's cheapest call and reports the outcome, which closes the
// breaker or reopens it (and that arms the next timer). When a user request took the probe
// first, the prober leaves it to it and only looks again one Recovery later, in case that
// probe was cancelled (a later gate skipped the call) and nobody probes any more.
//
// It only sees the changes its own breaker makes: an opening made by another replica in a
// shared store is probed by that replica. At most one timer and one probe run at a time; no
// lock is held across the probe. It is safe for concurrent use; the nil prober (probing off)
// does nothing.
type prober struct {
	name    string
	mode    ProbeMode
	call    func(ctx context.Context) error
	timeout time.Duration
	clock   clockwork.Clock
	log     *slog.Logger
	br      *breaker.Breaker // set by attach, before the breaker can change state

	// wg counts the timer callbacks from their arming to their return, so that stop and
	// wait leave nothing behind.
	wg sync.WaitGroup

	mu        sync.Mutex
	timer     clockwork.Timer    // armed for the end of the open period; nil when none
	gen       uint64             // numbers the timers: a callback of a replaced timer does nothing
	running   bool               // a callback is probing
	again     bool               // the current timer fired while running: probe once more after
	cancelRun context.CancelFunc // ends the running probe
	stopped   bool
}

// newProber returns the prober of pc's provider, or nil when pc does not probe in the
// background. ProbeModels needs an adapter that implements afloat.Prober.
func (e *Engine) newProber(pc ProviderConfig) (*prober, error) {
	var call func(context.Context) error
	switch pc.Probe {
	case "", ProbeOff:
		return nil, nil
	case ProbeModels:
		pr, ok := pc.Provider.(afloat.Prober)
		if !ok {
			return nil, fmt.Errorf("probe %q: the adapter %T has no models probe (afloat.Prober)", pc.Probe, pc.Provider)
		}
		call = pr.Probe
	case ProbeCompletion:
		p := pc.Provider
		call = func(ctx context.Context) error {
			_, err := p.Complete(ctx, probeRequest())
			return err
		}
	default:
		return nil, fmt.Errorf("unknown probe %q (want models, completion or off)", pc.Probe)
	}
	if pc.Breaker.Disabled {
		return nil, nil // a disabled breaker never opens
	}
	est, err := latency.NewEstimator(pc.Timeouts)
	if err != nil {
		return nil, err
	}
	return &prober{
		name: pc.Name, mode: pc.Probe, call: call, timeout: min(est.Config().Max, maxProbeTimeout),
		clock: e.clock, log: e.log,
	}, nil
}

// attach gives the prober the breaker it probes.
func (p *prober) attach(br *breaker.Breaker) {
	if p != nil {
		p.br = br
	}
}

// notify follows a change of the breaker's state: an opening arms the timer for its end, a
// closing disarms it. It is called from the breaker's OnStateChange and returns at once.
func (p *prober) notify(ev breaker.Event) {
	if p == nil {
		return
	}
	switch {
	case ev.To == breaker.StateOpen && ev.Forced:
		p.arm(ev.Until) // an administrator's opening holds its whole period: no probe ends it early
	case ev.To == breaker.StateOpen:
		p.arm(p.next(ev.Until))
	case ev.To == breaker.StateClosed:
		p.mu.Lock()
		p.disarm()
		p.mu.Unlock()
	}
}

// next is when to probe an open breaker whose period ends at until: then, or after
// maxProbeGap when that comes first.
func (p *prober) next(until time.Time) time.Time {
	if gap := p.clock.Now().Add(maxProbeGap); gap.Before(until) {
		return gap
	}
	return until
}

// arm sets the timer for at, replacing the one set before.
func (p *prober) arm(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.disarm()
	p.gen++
	gen := p.gen
	p.wg.Add(1)
	p.timer = p.clock.AfterFunc(max(0, at.Sub(p.clock.Now())), func() { p.fire(gen) })
}

// disarm stops the timer. Callers hold mu.
func (p *prober) disarm() {
	if p.timer != nil && p.timer.Stop() {
		p.wg.Done() // its callback will never run
	}
	p.timer = nil
}

// fire is the callback of the timer number gen, on a goroutine of its own.
func (p *prober) fire(gen uint64) {
	defer p.wg.Done()
	p.mu.Lock()
	if p.stopped || gen != p.gen {
		p.mu.Unlock()
		return
	}
	p.timer = nil
	if p.running {
		p.again = true
		p.mu.Unlock()
		return
	}
	p.running = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.cancelRun = cancel
	p.mu.Unlock()
	for {
		p.probeSafely(ctx)
		p.mu.Lock()
		if !p.again || p.stopped {
			p.running, p.again, p.cancelRun = false, false, nil
			p.mu.Unlock()
			return
		}
		p.again = false
		p.mu.Unlock()
	}
}

// probeSafely runs one probe; a panic past the provider's call (in a state change callback
// of the breaker) is logged rather than allowed to end the process from a goroutine that no
// caller watches.
func (p *prober) probeSafely(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("background probe panicked", "provider", p.name, "panic", fmt.Sprint(r))
		}
	}()
	p.probe(ctx)
}

// probe takes the breaker's probe permit, if it is still there to take, and settles it with
// the outcome of the provider's probe call.
func (p *prober) probe(ctx context.Context) {
	if snap := p.br.Snapshot(ctx); snap.State == breaker.StateOpen {
		p.early(ctx, snap.Until)
		return
	}
	permit, err := p.br.Allow(ctx)
	if err != nil {
		p.recheck(ctx)
		return
	}
	if !permit.Probe() {
		permit.Cancel(ctx) // the breaker closed in the meantime: nothing to probe
		return
	}
	began := p.clock.Now()
	err = p.run(ctx)
	if ctx.Err() != nil {
		// Cut by stop: that says nothing about the provider. Free the slot for the next caller.
		permit.Cancel(context.WithoutCancel(ctx))
		return
	}
	if err == nil && p.mode == ProbeModels {
		// The models list answering proves the provider is up, not that it answers chats:
		// a hung GPU behind a live front end still lists its models. Leave the breaker
		// half-open, so that the next call decides (a failure then reopens it with a grown
		// period), rather than close it and let five calls fail before it opens again.
		permit.Cancel(ctx)
		p.recheck(ctx)
	} else {
		permit.Done(ctx, err)
	}
	attrs := []any{"provider", p.name, "mode", string(p.mode), "ok", err == nil, "latency", p.clock.Since(began)}
	if err != nil {
		attrs = append(attrs, "err", err.Error())
	}
	p.log.Info("background probe", attrs...)
}

// early probes a breaker whose open period (grown long by an outage) has not ended yet,
// without its permit: a good probe ends the period (half-open, so that the next call decides;
// closed after a good completion, a real answer), a failed one leaves the breaker's own
// schedule as it is and comes back after maxProbeGap.
func (p *prober) early(ctx context.Context, until time.Time) {
	began := p.clock.Now()
	err := p.run(ctx)
	if ctx.Err() != nil {
		return // cut by stop
	}
	p.log.Info("background probe", "provider", p.name, "mode", string(p.mode), "ok", err == nil, "latency", p.clock.Since(began), "early", true)
	if err != nil {
		p.arm(p.next(until))
		return
	}
	if p.mode == ProbeCompletion {
		// A real answer: close as a good probe does, the provider's share ramping up.
		if ferr := p.br.Recover(ctx); ferr != nil {
			p.log.Warn("background probe could not end the open period", "provider", p.name, "err", ferr)
		}
		return
	}
	if ferr := p.br.Force(ctx, breaker.StateHalfOpen); ferr != nil {
		p.log.Warn("background probe could not end the open period", "provider", p.name, "err", ferr)
	}
	p.recheck(ctx)
}

// run makes the probe call within the probe timeout. A panic of the adapter is its failure.
func (p *prober) run(ctx context.Context) (err error) {
	ctx, cancel := latency.WithBudget(ctx, p.clock, p.timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Err: fmt.Errorf("probe panicked: %v", r)}
		}
	}()
	return p.call(ctx)
}

// recheck follows a probe permit refused: the breaker is open again (a user request's probe
// failed, and its opening armed the timer already; arming it again is harmless), or its
// probe is out with a user request, which usually settles it. In case that request cancels
// its permit instead, and nothing would probe any more, look again one Recovery later.
func (p *prober) recheck(ctx context.Context) {
	snap := p.br.Snapshot(ctx)
	switch snap.State {
	case breaker.StateOpen:
		p.arm(p.next(snap.Until))
	case breaker.StateHalfOpen:
		p.arm(p.clock.Now().Add(snap.Recovery))
	}
}

// stop disarms the timer, cancels the running probe and makes the prober ignore what
// follows. It does not wait: wait does.
func (p *prober) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.disarm()
	if p.cancelRun != nil {
		p.cancelRun()
	}
}

// wait returns once no timer callback of the prober runs or can run. Call it after stop.
func (p *prober) wait() {
	if p != nil {
		p.wg.Wait()
	}
}
