package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
)

// Config configures a simulated provider. The zero Config answers at once, never fails and
// uses seed 1.
type Config struct {
	// Name is the provider name put in errors. "" means "sim".
	Name string
	// P50 and P95 are the median and 95th percentile of the latency of a call; latencies are
	// drawn from the log-normal distribution with these percentiles. Both 0 means no latency;
	// P95 less than P50, or P50 of 0 with P95 above it, is an error.
	P50, P95 time.Duration
	// ErrorRate is the share of calls, from 0 to 1, that fail with ErrorStatus. 0 means none.
	ErrorRate float64
	// ErrorStatus is the HTTP status of the ErrorRate failures, 400 to 599; it sets their kind
	// as Fault.Status does. 0 means 503.
	ErrorStatus int
	// Seed seeds the random source (math/rand/v2's PCG) behind latencies, failures and
	// answers. 0 means 1.
	Seed uint64
	// Clock is what latencies wait on. nil means real time.
	Clock clockwork.Clock
}

// Provider is a simulated model endpoint; it implements afloat.Provider, afloat.Streamer and
// afloat.Prober. It is safe for concurrent use. Concurrent calls take their turns at the
// random source in the order they start, so only a sequence of calls is reproducible, not a
// race of them. Probes draw from a source of their own, so that they never change the calls'
// sequence.
type Provider struct {
	name        string
	latency     lognormal
	errorRate   float64
	errorStatus int
	clock       clockwork.Clock
	calls       atomic.Int64
	probes      atomic.Int64
	schemas     schemaCache

	mu       sync.Mutex // guards rng, probeRNG and fault
	rng      *rand.Rand
	probeRNG *rand.Rand
	fault    Fault
}

var (
	_ afloat.Provider = (*Provider)(nil)
	_ afloat.Streamer = (*Provider)(nil)
	_ afloat.Prober   = (*Provider)(nil)
)

// New returns a simulated provider, or an error when cfg holds an invalid value.
func New(cfg Config) (*Provider, error) {
	lat, err := fitLognormal(cfg.P50, cfg.P95)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if !(cfg.ErrorRate >= 0 && cfg.ErrorRate <= 1) {
		return nil, fmt.Errorf("sim: error rate %v is outside 0 to 1", cfg.ErrorRate)
	}
	if cfg.ErrorStatus != 0 && !isErrorStatus(cfg.ErrorStatus) {
		return nil, fmt.Errorf("sim: error status %d is not a 4xx or 5xx status", cfg.ErrorStatus)
	}
	p := &Provider{
		name:        cfg.Name,
		latency:     lat,
		errorRate:   cfg.ErrorRate,
		errorStatus: cfg.ErrorStatus,
		clock:       cfg.Clock,
	}
	if p.name == "" {
		p.name = "sim"
	}
	if p.errorStatus == 0 {
		p.errorStatus = defaultFaultStatus
	}
	if p.clock == nil {
		p.clock = clockwork.NewRealClock()
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	p.rng = rand.New(rand.NewPCG(seed, seed))
	p.probeRNG = rand.New(rand.NewPCG(seed, ^seed))
	return p, nil
}

// SetFault sets the fault that calls starting from now play; Fault{} clears it. A call reads
// the fault once, when it starts: calls already waiting keep the fault they started with.
// Check f with Validate first: a call under an invalid fault fails as Unavailable.
func (p *Provider) SetFault(f Fault) {
	p.mu.Lock()
	p.fault = f
	p.mu.Unlock()
}

// Fault returns the fault set now.
func (p *Provider) Fault() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// Calls returns how many calls the provider has received, failed ones included; probes are
// not calls.
func (p *Provider) Calls() int64 { return p.calls.Load() }

// Probes returns how many probes the provider has received.
func (p *Provider) Probes() int64 { return p.probes.Load() }

// Probe answers as a models list would: at once, whatever the latency, and with nil unless
// the fault in force or the error rate says otherwise. Under ModeUnavailable it fails with
// the fault's status, under ModeTimeout it hangs until ctx ends, and a share ErrorRate of
// probes fails with ErrorStatus; ModeSlow and ModeMalformed slow or spoil answers, not the
// list, so their probes pass. Failures are classified as Complete's.
func (p *Provider) Probe(ctx context.Context) error {
	p.probes.Add(1)
	p.mu.Lock()
	f := p.fault
	fail := p.probeRNG.Float64() < p.errorRate
	p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return p.timeout(err)
	}
	if err := f.Validate(); err != nil {
		return &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Err: fmt.Errorf("invalid fault: %w", err)}
	}
	switch {
	case f.Mode == ModeTimeout:
		return p.hang(ctx)
	case f.Mode == ModeUnavailable:
		return p.fail(ctx, 0, f.status())
	case fail:
		return p.fail(ctx, 0, p.errorStatus)
	}
	return nil
}

// Complete answers req after a drawn latency, or fails as the fault or the error rate says.
// With req.Continue the answer is only what the provider adds to the partial answer in the
// last (assistant) message: a partial JSON document completed into a valid one, or a
// closing clause for a text; a last message that is not an assistant's text is Contract.
//
// A failure is a *afloat.ProviderError wrapping ErrSimulated, classified by its status. A call
// whose ctx ends first fails with kind Unavailable and Timeout set, wrapping ctx.Err(). A
// response format whose schema is not JSON, or a tool choice naming no tool of req, fails
// with status 400 and kind Contract, as a real provider would.
func (p *Provider) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	pl := p.start()
	if err := ctx.Err(); err != nil {
		return nil, p.timeout(err)
	}
	if err := pl.fault.Validate(); err != nil {
		return nil, &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Err: fmt.Errorf("invalid fault: %w", err)}
	}
	switch pl.fault.Mode {
	case ModeTimeout:
		return nil, p.hang(ctx)
	case ModeUnavailable:
		return nil, p.fail(ctx, pl.latency, pl.fault.status())
	case ModeSlow:
		pl.latency = addSat(pl.latency, pl.fault.delay())
	}
	if pl.fail {
		return nil, p.fail(ctx, pl.latency, p.errorStatus)
	}
	if err := p.wait(ctx, pl.latency); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(pl.seed1, pl.seed2))
	if pl.fault.Mode == ModeMalformed {
		return malformed(req, r), nil
	}
	var resp *afloat.Response
	var err error
	if req.Continue {
		resp, err = continueAnswer(req, r)
	} else {
		resp, err = answer(req, r, &p.schemas)
	}
	if err != nil {
		return nil, &afloat.ProviderError{Provider: p.name, Status: 400, Kind: afloat.Contract, Err: err}
	}
	return resp, nil
}

// plan is what one call does, drawn when it starts.
type plan struct {
	fault        Fault
	latency      time.Duration
	fail         bool
	seed1, seed2 uint64 // of the call's own random source, for its answer
}

// start counts a call and draws its plan. Every call draws the same four numbers, so the
// sequence does not depend on the modes the calls ran in.
func (p *Provider) start() plan {
	p.calls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return plan{
		fault:   p.fault,
		latency: p.latency.at(p.rng.NormFloat64()),
		fail:    p.rng.Float64() < p.errorRate,
		seed1:   p.rng.Uint64(),
		seed2:   p.rng.Uint64(),
	}
}

// failLatencyDivisor shortens the latency of a failing call: an endpoint that refuses answers
// sooner than one that works.
const failLatencyDivisor = 10

func (p *Provider) fail(ctx context.Context, latency time.Duration, status int) error {
	if err := p.wait(ctx, latency/failLatencyDivisor); err != nil {
		return err
	}
	return &afloat.ProviderError{Provider: p.name, Status: status, Kind: kindOf(status), Err: ErrSimulated}
}

func (p *Provider) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return nil
	case <-ctx.Done():
		return p.timeout(ctx.Err())
	}
}

// hangStep is how long a hanging call waits on the clock at a time. Waiting on the clock, not
// on ctx alone, lets a test's fake clock see that the call is still hanging.
const hangStep = time.Hour

// hang waits until ctx is done, however long that takes.
func (p *Provider) hang(ctx context.Context) error {
	for {
		if err := p.wait(ctx, hangStep); err != nil {
			return err
		}
	}
}

func (p *Provider) timeout(err error) error {
	return &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Timeout: true, Err: err}
}

func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
