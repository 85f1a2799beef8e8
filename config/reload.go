package config

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"sync/atomic"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/provider/fault"
)

// ErrNotInForce is Reload's error on a runtime that a reload replaced already.
var ErrNotInForce = errors.New("config: this runtime was replaced by a reload; reload the one in force")

// Reload reads the config file at path again and puts it in force in rt's place, without a
// restart. rt must be the runtime in force (the one Build returned, or the last Reload).
//
// The file is validated through and through first, exactly as Check validates it (templates
// rendered with sample inputs, schemas compiled, heuristic rules checked), and a file that
// changes a key a reload does not apply (Change.Restart: server, operators, state, review,
// flags, telemetry, alerts, drill) is refused as well: either way the error is Errors,
// every problem at once, and nothing changes. A valid file is built over rt: the state
// backend, review store, metrics registry, trace exporter, alert evaluator, review webhook
// and the flags in force are rt's; each provider whose section (and CA file) is unchanged
// keeps its adapter, fault, breaker, bulkhead, retry budget, background probe and latency
// estimates; one that changed starts afresh, keeping only its fault; each task and route
// keeps its fallback share and spend by name.
//
// serve is called with the new runtime to put it in service (the gateway's swap); when it
// fails, the new runtime is discarded and rt stays in force. Once it returns nil the new
// runtime is in force: rt's engine closes (its probes of providers that left stop; its
// tasks and routes still finish the calls in flight), and rt must not be used again but to
// Close it, which then closes nothing shared. The Diff is what the file changes; it is
// returned also when the file was refused for a key that takes a restart.
func (rt *Runtime) Reload(path string, serve func(next *Runtime) error) (*Runtime, *Diff, error) {
	if !rt.owner {
		return nil, nil, ErrNotInForce
	}
	data, dir, err := read(path)
	if err != nil {
		return nil, nil, err
	}
	if _, err := check(data, dir, os.LookupEnv, false); err != nil {
		return nil, nil, err
	}
	f, err := Parse(data, dir, os.LookupEnv)
	if err != nil {
		return nil, nil, err // check found nothing; the file changed in between
	}
	diff := Compare(rt.File, f)
	if restart := diff.Restart(); len(restart) > 0 {
		var errs Errors
		for _, c := range restart {
			errs = append(errs, &Error{Path: c.Path, Line: f.Line(c.Path),
				Msg: "changed, and a reload does not apply it: restart afloat serve, or put it back"})
		}
		return nil, diff, errs
	}
	opts := rt.opts
	opts.openReview, opts.previous = true, rt
	b := f.build(opts)
	if len(b.errs) > 0 {
		_ = b.rt.Close()
		return nil, diff, b.errs.sorted()
	}
	next := b.rt
	next.retarget()
	if err := serve(next); err != nil {
		rt.retarget()
		_ = next.Close()
		return nil, diff, err
	}
	rt.handOver(next)
	return next, diff, nil
}

// inherit takes from the runtime a reload builds over what is opened once per process.
func (b *builder) inherit() {
	p, rt := b.prev, b.rt
	rt.Registry, rt.Metrics, rt.prompts = p.Registry, p.Metrics, p.prompts
	rt.redis, rt.redisClient = p.redis, p.redisClient
	rt.decisions = p.decisions              // the engine keeps its previous one's: Close waits for its saves
	rt.live, rt.opts.previous = p.live, nil // hold no chain of runtimes
	b.openings = p.openings
	b.diff = Compare(p.File, b.f)
}

// prevEngine is the engine the new one is built over; nil for a first Build.
func (b *builder) prevEngine() *cascade.Engine {
	if b.prev == nil {
		return nil
	}
	return b.prev.Engine
}

// carried returns the previous runtime's ProviderConfig of p, adapter and fault included,
// when the file left p's section (and its CA file) as it was: the engine then carries the
// provider over whole.
func (b *builder) carried(p *Provider) (cascade.ProviderConfig, bool) {
	if b.prev == nil || b.f.invalid["providers."+p.Name] || b.diff.changed("providers."+p.Name) {
		return cascade.ProviderConfig{}, false
	}
	pc, ok := b.prev.providers[p.Name]
	if !ok {
		return cascade.ProviderConfig{}, false
	}
	b.rt.Faults[p.Name] = b.prev.Faults[p.Name]
	b.rt.remember(p.Name, pc)
	return pc, true
}

// remember keeps the ProviderConfig a provider was built with, for a reload to carry over.
func (rt *Runtime) remember(name string, pc cascade.ProviderConfig) {
	if rt.providers == nil {
		rt.providers = map[string]cascade.ProviderConfig{}
	}
	rt.providers[name] = pc
}

// keepFault gives w, the fresh wrapper of a provider whose settings a reload changed, the
// fault in force on the provider before.
func (b *builder) keepFault(name string, w *fault.Provider) {
	if b.prev == nil {
		return
	}
	if old, ok := b.prev.Faults[name]; ok {
		st := old.State()
		_ = w.SetUntil(st.Fault, st.ExpiresAt) // valid: it was in force
	}
}

// retarget points the state backend at rt's flag defaults and faults.
func (rt *Runtime) retarget() {
	if rt.State == nil {
		return
	}
	if err := rt.State.Retarget(context.Background(), rt.FlagDefaults, rt.Faults); err != nil {
		rt.logger().Warn("reload: the state backend did not answer; its flags and faults load on its next change", "err", err)
	}
}

// handOver makes next, now in service, the runtime in force in rt's place.
func (rt *Runtime) handOver(next *Runtime) {
	next.owner, rt.owner = true, false
	next.ownsReview, next.tracer, next.sampler = rt.ownsReview, rt.tracer, rt.sampler
	rt.live.Store(next)
	next.Alerts.Retarget(next.alertTasks(), next.ProviderOrder)
	if next.Review != nil && next.Metrics != nil && !maps.Equal(rt.humanSLAs(), next.humanSLAs()) {
		next.watchSLA(next.clock(), next.logger())
	}
	next.Engine.TakeOver(rt.Engine)
	_ = rt.retire()
}

// retire stops what a runtime holds alone: its engine's probes of providers no runtime in
// force holds, and its OpenFeature source.
func (rt *Runtime) retire() error {
	if rt.Engine != nil {
		_ = rt.Engine.Close()
	}
	_ = rt.closeCaches(rt.live.Load()) // a reload that dropped a task's cache, or failed
	if rt.openFeature != nil {
		rt.openFeature()
		rt.openFeature = nil
	}
	return nil
}

// logger and clock are the runtime's, as Build defaulted them.
func (rt *Runtime) logger() *slog.Logger {
	if rt.opts.Logger != nil {
		return rt.opts.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (rt *Runtime) clock() clockwork.Clock {
	if rt.opts.Clock != nil {
		return rt.opts.Clock
	}
	return clockwork.NewRealClock()
}

// liveBreakers reads the breakers of the runtime in force, for the alert evaluator, which
// outlives reloads.
type liveBreakers struct{ live *atomic.Pointer[Runtime] }

func (l liveBreakers) Breaker(provider string) *breaker.Breaker {
	return l.live.Load().Engine.Breaker(provider)
}
