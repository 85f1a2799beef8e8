package afloattest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/jonboulle/clockwork"
)

// Provider is a provider that plays one failure (or none) on every call, for drills. It
// implements afloat.Provider, afloat.Streamer (an answer comes in one chunk) and
// afloat.Prober (a probe meets the same failure as a call: a hanging provider's probe hangs
// too). It counts the calls it receives, streams included, probes not. It is safe for
// concurrent use.
//
// The failures are provider/fault's, so a drill written with afloattest fails the cascade
// exactly as PUT /admin/faults does in production.
type Provider struct {
	name  string
	calls atomic.Int64
	// pick returns the fault wrapper that serves the call starting now.
	pick func() *fault.Provider
}

var (
	_ afloat.Provider = (*Provider)(nil)
	_ afloat.Streamer = (*Provider)(nil)
	_ afloat.Prober   = (*Provider)(nil)
)

// Answering returns a healthy provider: every call answers answer (the model's text, usually
// the task's JSON) at once, with finish reason "stop".
func Answering(name, answer string) *Provider {
	return fixed(name, answer, fault.Fault{}, nil)
}

// Unavailable returns a provider whose every call fails at once with HTTP status, classified
// as an adapter classifies it: 5xx, 529 and 408 Unavailable (a 502, 503 or 504 is transient,
// so the cascade retries it once), 429 Throttled, 401, 402 and 403 Unusable, other 4xx
// Contract. The error wraps fault.ErrInjected. It panics unless status is 400–599.
func Unavailable(name string, status int) *Provider {
	if status < 400 || status > 599 {
		panic(fmt.Sprintf("afloattest.Unavailable(%q, %d): want an HTTP error status, 400–599", name, status))
	}
	return fixed(name, "", fault.Fault{Mode: fault.ModeUnavailable, Status: status}, nil)
}

// Hanging returns a provider that never answers: every call waits until its context ends,
// then fails as an Unavailable timeout, as a real adapter cut by its read timeout does.
func Hanging(name string) *Provider {
	return fixed(name, "", fault.Fault{Mode: fault.ModeTimeout}, nil)
}

// Slow returns a provider that answers answer once delay has passed on clock, or fails as an
// Unavailable timeout when the call's context ends first. A nil clock is real time (a
// testing/synctest bubble's time inside one). It panics unless delay is positive.
func Slow(name string, delay time.Duration, answer string, clock clockwork.Clock) *Provider {
	if delay <= 0 {
		panic(fmt.Sprintf("afloattest.Slow(%q, %v): want a positive delay", name, delay))
	}
	return fixed(name, answer, fault.Fault{Mode: fault.ModeSlow, Delay: delay}, clock)
}

// Malformed returns a provider that answers at once with prose that holds no JSON, as a model
// that ignores its instructions does: every answer is a contract violation (re-asked, then
// passed to the next tier), which never moves the breaker.
func Malformed(name string) *Provider {
	return fixed(name, "", fault.Fault{Mode: fault.ModeMalformed}, nil)
}

// Flapping returns a provider that is down for down (every call fails with status 503, as
// Unavailable's), then up for up (every call answers answer, as Answering's), then down
// again, and so on, counted on clock from the moment Flapping is called. A call takes the
// phase it starts in. A nil clock is real time. It panics unless down and up are positive.
func Flapping(name string, down, up time.Duration, answer string, clock clockwork.Clock) *Provider {
	if down <= 0 || up <= 0 {
		panic(fmt.Sprintf("afloattest.Flapping(%q, %v, %v): want positive periods", name, down, up))
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	healthy := answering{name: name, text: answer}
	off := fault.Wrap(name, healthy, clock)
	mustSet(off, fault.Fault{Mode: fault.ModeUnavailable, Status: 503})
	on := fault.Wrap(name, healthy, clock)
	start := clock.Now()
	return &Provider{name: name, pick: func() *fault.Provider {
		if clock.Since(start)%(down+up) < down {
			return off
		}
		return on
	}}
}

// fixed returns a provider that plays f over an answer of text on every call.
func fixed(name, text string, f fault.Fault, clock clockwork.Clock) *Provider {
	w := fault.Wrap(name, answering{name: name, text: text}, clock)
	mustSet(w, f)
	return &Provider{name: name, pick: func() *fault.Provider { return w }}
}

func mustSet(w *fault.Provider, f fault.Fault) {
	if err := w.Set(f); err != nil {
		panic("afloattest: " + err.Error()) // the constructors check their arguments first
	}
}

// Name returns the provider's name, the one its errors carry.
func (p *Provider) Name() string { return p.name }

// Calls returns how many calls (Complete and Stream) the provider has received, failed ones
// included; probes are not calls.
func (p *Provider) Calls() int { return int(p.calls.Load()) }

// Complete plays the provider's failure, or answers.
func (p *Provider) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	p.calls.Add(1)
	return p.pick().Complete(ctx, req)
}

// Stream plays the provider's failure before the first chunk, or streams the answer in one
// chunk.
func (p *Provider) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	p.calls.Add(1)
	return p.pick().Stream(ctx, req)
}

// Probe meets the provider's failure as a call does (a malformed provider's probe passes:
// its models list works); a healthy provider's probe passes.
func (p *Provider) Probe(ctx context.Context) error { return p.pick().Probe(ctx) }

// answering is the healthy provider under the fault: it answers text, and its probe passes,
// unless the context has ended already.
type answering struct{ name, text string }

func (a answering) Complete(ctx context.Context, _ *afloat.Request) (*afloat.Response, error) {
	if err := a.ended(ctx); err != nil {
		return nil, err
	}
	return &afloat.Response{Content: a.text, FinishReason: "stop"}, nil
}

func (a answering) Probe(ctx context.Context) error { return a.ended(ctx) }

// ended fails as an adapter does once ctx has ended: Unavailable, a timeout at its deadline.
func (a answering) ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &afloat.ProviderError{Provider: a.name, Kind: afloat.Unavailable, Timeout: afloat.IsTimeout(err), Err: err}
	}
	return nil
}
