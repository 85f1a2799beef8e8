package config

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/flags/openfeature"
	"github.com/afloat-dev/afloat/internal/httpx"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/provider/anthropic"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/provider/gigachat"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/afloat-dev/afloat/provider/sim"
	"github.com/afloat-dev/afloat/provider/yandex"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/review/webhook"
	"github.com/afloat-dev/afloat/shed"
	"github.com/afloat-dev/afloat/state"
	"github.com/afloat-dev/afloat/state/redisstate"
	"github.com/afloat-dev/afloat/state/sqlitestate"
	"github.com/afloat-dev/afloat/telemetry"
)

// BuildOptions are what a Runtime takes from its host rather than from the file.
type BuildOptions struct {
	// Clock drives every timer, deadline and simulated latency. nil means real time.
	Clock clockwork.Clock
	// Logger receives the runtime's logs. nil discards them.
	Logger *slog.Logger
	// Registerer takes the metrics. nil means a new registry, returned in Runtime.Registry,
	// which also holds the Go runtime's and the process's collectors (go_*, process_*); a
	// Registerer of the host's own gets afloat's metrics only.
	Registerer prometheus.Registerer
	// Rand returns the random numbers in [0, 1) behind every jitter: the breakers' open
	// periods and the waits before a retry. It must be safe for concurrent use. nil means
	// math/rand/v2's global source; the demo passes a seeded one so that --seed reproduces.
	Rand func() float64
	// Review is the review store to use instead of the file's (tests, the demo); its host
	// closes it. nil makes Build open the file's store: SQLite at review.sqlite.path or
	// PostgreSQL at review.postgres.url (review.store), with review.claim_ttl and
	// review.retention, closed by Runtime.Close.
	Review review.Store
	// TracerProvider takes the engine's spans instead of the file's telemetry.otlp (tests,
	// a host with its own tracing); its host shuts it down. nil makes Build export to
	// telemetry.otlp when it names an endpoint (flushed by Runtime.Close), else trace nothing.
	TracerProvider trace.TracerProvider

	// openReview is set by Build: open the file's store when Review is nil. Check builds
	// without it, so that checking a config never creates a database.
	openReview bool
	// previous is the runtime a reload builds over (reload.go); nil for a first Build.
	previous *Runtime
}

// Runtime is a File made live: the engine with every provider, task and route, and what the
// gateway serves beside them. Its parts are safe for concurrent use; its maps and slices are
// not to be modified.
type Runtime struct {
	File   *File
	Engine *cascade.Engine
	Tasks  map[string]*cascade.Task
	Routes map[string]*cascade.Route
	// Models maps each alias of a route (routes.<name>.models) to the route's name.
	Models map[string]string
	// TaskOrder, RouteOrder and ProviderOrder are the names in the file's order.
	TaskOrder, RouteOrder, ProviderOrder []string
	// Faults holds every provider, wrapped so that drills inject faults into the real
	// adapter.
	Faults map[string]*fault.Provider
	// Flags is the document the engine reads: every task and route on at its rollout_pct,
	// unless State loaded a saved one.
	Flags *flags.Memory
	// FlagDefaults is the file's own flag document: every task and route on at its
	// rollout_pct. A task that the flags saved through the admin API omit takes its entry.
	FlagDefaults *flags.Document
	// State keeps Flags and the Faults in the state backend (shared/DESIGN.md §4): the
	// admin API writes flags and faults through it.
	State *state.State
	// Review is the review queue: BuildOptions.Review, or the file's store (SQLite or
	// PostgreSQL) that Build opened and Close closes.
	Review review.Store
	// Registry is the registry the metrics went to when BuildOptions.Registerer was nil;
	// nil otherwise.
	Registry *prometheus.Registry
	Metrics  *telemetry.Metrics
	// ReviewSLA is each task's review SLA in force.
	ReviewSLA map[string]time.Duration
	// Alerts evaluates the alerts the file turns on (alerts:); nil when it turns none on.
	// Build starts it and Close stops it.
	Alerts *alerts.Evaluator
	// Webhook delivers the review answers to review.webhook.url; nil without one. Build
	// starts it (not Check) and Close stops it. Wake it after an answer to deliver at once.
	Webhook *webhook.Sender

	// ownsReview: Build opened Review, and Close closes it.
	ownsReview bool
	// redis is the redis state backend and its client, when state.backend is redis.
	redis       *redisstate.Backend
	redisClient io.Closer
	// openFeature stops the OpenFeature flag source, when flags.openfeature is set.
	openFeature func()
	// tracer is the OTLP exporting provider Build made for telemetry.otlp; Close flushes it.
	tracer *sdktrace.TracerProvider
	// decisions keeps the canaries' decisions in State; a reload's engine takes its
	// previous one's.
	decisions *canaryDecisions
	// caches are the tasks' answer caches, by name; Close closes those the runtime in
	// force does not use.
	caches map[string]taskCache
	// sampler measures the scheduling latency the engine's shedder reads
	// (server.shed_latency); nil when shedding is off. Close stops it.
	sampler *shed.Sampler

	// What a reload hands on (reload.go). owner: Close closes the stores, exporters and
	// evaluators, which every runtime a reload builds shares; only the runtime in force owns
	// them. live points at the runtime in force, for the collectors registered once.
	owner     bool
	live      *atomic.Pointer[Runtime]
	opts      BuildOptions
	prompts   *telemetry.PromptMetrics
	traces    trace.TracerProvider
	openings  *alerts.Openings
	providers map[string]cascade.ProviderConfig
}

// StateHealth returns nil while the state backend answers, or why it does not.
func (rt *Runtime) StateHealth() error {
	if rt.State == nil {
		return nil
	}
	return rt.State.Health()
}

// Build makes the file live: it builds each provider's adapter (no connection is made), its
// guards, and every task and route over them, and renders every prompt template with a
// sample of its task's input fields. f must come from Load or Parse, which fill in
// the defaults Build relies on. Every problem found is returned at once, as Errors.
func (f *File) Build(opts BuildOptions) (*Runtime, error) {
	opts.openReview = true
	b := f.build(opts)
	if len(b.errs) > 0 {
		_ = b.rt.Close()
		return nil, b.errs.sorted()
	}
	return b.rt, nil
}

// builder builds a Runtime and keeps what Check inspects after.
type builder struct {
	f     *File
	clock clockwork.Clock
	// simulated: the clock is the caller's (a simulation's or a test's), not real time.
	simulated bool
	rand      func() float64
	log       *slog.Logger
	reg       prometheus.Registerer // where the metrics go
	rt        *Runtime
	errs      Errors
	// openings records the breakers' unusable openings for the unusable alert; nil when
	// that alert is off.
	openings *alerts.Openings
	// prev is the runtime a reload builds over, and diff what the file changes from it; nil
	// for a first Build.
	prev *Runtime
	diff *Diff
}

func (b *builder) errorf(path, format string, args ...any) {
	b.errs = append(b.errs, &Error{Path: path, Line: b.line(path), Msg: fmt.Sprintf(format, args...)})
}

// providerErrorf reports msg at provider p's key, or at defaults' when p writes nothing
// under the key's section (breaker, timeouts): the values that fail came from defaults, and
// are reported there once (Errors.sorted drops the other providers' equal errors).
func (b *builder) providerErrorf(p *Provider, key, msg string) {
	section, _, _ := strings.Cut(key, ".")
	own := "providers." + p.Name + "." + section
	for path := range b.f.lines {
		if path == own || strings.HasPrefix(path, own+".") {
			b.errorf("providers."+p.Name+"."+key, "%s", msg)
			return
		}
	}
	b.errorf("defaults."+key, "%s", msg)
}

func (b *builder) line(path string) int {
	v := validator{f: b.f}
	return v.line(path)
}

// build builds what it can. Entities that failed to load (f.invalid) are left out, and a
// provider whose adapter cannot be built is stood in for by one that always fails, so that
// the tasks over it are still checked.
func (f *File) build(opts BuildOptions) *builder {
	b := &builder{f: f, clock: opts.Clock, simulated: opts.Clock != nil, rand: opts.Rand, log: opts.Logger, prev: opts.previous}
	if b.clock == nil {
		b.clock = clockwork.NewRealClock()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	rt := &Runtime{
		File: f, Tasks: map[string]*cascade.Task{}, Routes: map[string]*cascade.Route{}, Models: map[string]string{},
		Faults: map[string]*fault.Provider{}, ReviewSLA: map[string]time.Duration{},
		owner: b.prev == nil, live: &atomic.Pointer[Runtime]{}, opts: opts,
	}
	b.rt = rt
	rt.live.Store(rt)
	if !b.metrics(opts) {
		return b
	}
	metrics, prompts := rt.Metrics, rt.prompts
	var err error

	var providers []cascade.ProviderConfig
	for _, p := range f.Providers {
		if pc, ok := b.provider(p); ok {
			providers = append(providers, pc)
			rt.ProviderOrder = append(rt.ProviderOrder, p.Name)
		}
	}
	if len(providers) == 0 {
		return b
	}
	if b.prev != nil {
		rt.Flags = b.prev.Flags // the flags in force survive a reload
	} else {
		rt.Flags = flags.NewMemory()
	}
	rt.Review = b.reviewStore(opts)
	rt.traces = b.tracerProvider(opts)
	rt.Engine, err = cascade.New(cascade.Config{
		Providers: providers, Flags: b.engineFlags(opts), Review: rt.Review, Metrics: metrics, Prompts: prompts, Clock: b.clock, Rand: b.rand, Logger: b.log,
		TracerProvider: rt.traces, Previous: b.prevEngine(), Shed: b.shedder(), Decisions: b.decisions(),
	})
	if err != nil {
		b.errorf("providers", "%v", err)
		return b
	}
	doc := &flags.Document{Tasks: map[string]flags.TaskFlags{}}
	for _, t := range f.Tasks {
		if f.invalid["tasks."+t.Name] {
			// Still read its files, so that one run reports their errors too.
			b.taskConfig(t)
			continue
		}
		if b.task(t) {
			pct := t.RolloutPct
			doc.Tasks[t.Name] = flags.TaskFlags{RolloutPct: &pct}
		}
	}
	for _, r := range f.Routes {
		if !f.invalid["routes."+r.Name] && b.route(r) {
			pct := r.RolloutPct
			doc.Tasks[r.Name] = flags.TaskFlags{RolloutPct: &pct}
		}
	}
	rt.FlagDefaults = doc
	if b.prev == nil { // a reload puts its defaults in force when it commits (State.Retarget)
		if err := rt.Flags.Set(context.Background(), doc); err != nil {
			b.errorf("", "flags: %v", err)
		}
	}
	b.state(opts)
	b.alerts(opts)
	b.reviewWebhook(opts)
	b.reviewSLA(opts)
	rt.openings = b.openings
	return b
}

// metrics registers the metrics and connects the redis state backend, or takes both from the
// runtime a reload builds over. It reports false when the metrics could not be registered.
func (b *builder) metrics(opts BuildOptions) bool {
	rt := b.rt
	if b.prev != nil {
		b.inherit()
		return true
	}
	reg := opts.Registerer
	if reg == nil {
		rt.Registry = prometheus.NewRegistry()
		reg = rt.Registry
		if err := telemetry.RegisterRuntime(reg); err != nil {
			b.errorf("", "metrics: %v", err)
			return false
		}
	}
	metrics, err := telemetry.New(reg)
	if err != nil {
		b.errorf("", "metrics: %v", err)
		return false
	}
	rt.Metrics = metrics
	b.reg = reg
	if rt.prompts, err = telemetry.NewPromptMetrics(reg); err != nil {
		b.errorf("", "metrics: %v", err)
		return false
	}
	b.redisState(opts)
	return true
}

// engineFlags is the flag source the engine reads: the admin API's (rt.Flags), and with
// flags.openfeature the team's flag system too, over OFREP (connected only when Build opens
// stores; Check validates the settings without a connection).
func (b *builder) engineFlags(opts BuildOptions) flags.Source {
	o := b.f.Flags.OpenFeature
	if o.Provider == "" {
		return b.rt.Flags
	}
	p, err := openfeature.NewOFREPProvider(openfeature.OFREPConfig{BaseURL: o.Endpoint, Headers: o.Headers})
	if err != nil {
		b.errorf("flags.openfeature", "%v", err)
		return b.rt.Flags
	}
	if !opts.openReview {
		return b.rt.Flags
	}
	api := isolated.NewAPI()
	ctx := context.Background()
	if err := api.SetProviderAndWait(ctx, p); err != nil {
		b.errorf("flags.openfeature", "%v", err)
		return b.rt.Flags
	}
	var names []string
	for _, t := range b.f.Tasks {
		names = append(names, t.Name)
	}
	for _, r := range b.f.Routes {
		names = append(names, r.Name)
	}
	src, err := openfeature.NewSource(ctx, api.NewClient(), names, openfeature.SourceConfig{
		RefreshInterval: o.Refresh, Clock: b.clock, Logger: b.log.With("flags", "openfeature"),
	})
	if err != nil {
		_ = api.Shutdown(ctx)
		b.errorf("flags.openfeature", "%v", err)
		return b.rt.Flags
	}
	b.rt.openFeature = func() { src.Close(); _ = api.Shutdown(context.Background()) }
	b.log.Info("flags also read from OpenFeature", "provider", o.Provider, "endpoint", o.Endpoint)
	return flags.Both(b.rt.Flags, src)
}

// redisState connects the redis state backend when Build opens stores (Check never
// connects): its breaker store then backs every provider's breaker.
func (b *builder) redisState(opts BuildOptions) {
	st := b.f.State
	if st.Backend != "redis" || !opts.openReview {
		return
	}
	client, err := redisstate.NewClient(st.Redis.URL, redisstate.ClientOptions{
		Cluster: st.Redis.Cluster, MasterName: st.Redis.MasterName, Timeout: st.Redis.Timeout,
	})
	if err != nil {
		b.errorf("state.redis.url", "%v", err)
		return
	}
	backend, err := redisstate.New(redisstate.Options{
		Client: client, Prefix: st.Redis.Prefix, Timeout: st.Redis.Timeout, Clock: b.clock, Logger: b.log,
	})
	if err != nil {
		_ = client.Close()
		b.errorf("state.redis", "%v", err)
		return
	}
	b.rt.redis, b.rt.redisClient = backend, client
}

// state makes the flags and faults durable: in Redis, in the SQLite file of the review
// queue (state.backend local, when Build opened that file), or in memory for a host that
// gave its own review store, a review store in PostgreSQL (a fleet shares its flags through
// state.backend redis) or a Check.
func (b *builder) state(opts BuildOptions) {
	rt := b.rt
	if b.prev != nil {
		rt.State = b.prev.State // state.* takes a restart; the reload retargets it
		return
	}
	defer func() {
		if rt.decisions != nil {
			rt.decisions.st.Store(rt.State) // the canaries' decisions are kept beside the flags
		}
	}()
	var store state.Store = state.NewMemory()
	kind := b.f.State.Backend
	_, sqliteReview := rt.Review.(*review.SQLite)
	switch {
	case rt.redis != nil:
		store = rt.redis
	case kind == "local" && rt.ownsReview && sqliteReview:
		s, err := sqlitestate.OpenSQLite(b.f.Review.SQLite.Path)
		if err != nil {
			b.errorf("review.sqlite.path", "flags and faults: %v", err)
			return
		}
		store = s
	}
	s, err := state.New(context.Background(), state.Options{
		Kind: kind, Store: store, Flags: rt.Flags, Faults: rt.Faults, Clock: b.clock, Logger: b.log,
	})
	rt.State = s
	// The collectors outlive reloads: they hold the runtime in force (live), not this one.
	redis, live, clock := rt.redis, rt.live, b.clock
	if rerr := telemetry.RegisterStateBackend(b.reg, func() bool { return s.Health() == nil }, func() uint64 {
		if redis != nil {
			return redis.Failures()
		}
		return 0
	}); rerr != nil {
		b.errorf("", "metrics: %v", rerr)
	}
	if rerr := telemetry.RegisterDrillAge(b.reg, func() map[string]float64 {
		ages := map[string]float64{}
		for scope, ds := range s.Drills() {
			// Only this config's tasks and routes: a record kept for one it dropped (or that
			// another replica's config has) makes no series.
			kind, name, _ := strings.Cut(scope, ":")
			cur := live.Load()
			known := kind == "task" && cur.Tasks[name] != nil || kind == "route" && cur.Routes[name] != nil
			if known && ds.LastPassed != nil {
				ages[name] = clock.Since(ds.LastPassed.FinishedAt).Seconds()
			}
		}
		return ages
	}); rerr != nil {
		b.errorf("", "metrics: %v", rerr)
	}
	switch {
	case err == nil:
	case rt.redis != nil && b.f.State.OnFailure == "local":
		b.log.Warn("redis state unavailable at start: serving from local state until it answers", "err", err)
	default:
		b.errorf("state", "loading flags and faults: %v", err)
	}
}

// provider builds one provider's adapter and guards. It reports false only when the provider
// cannot even be stood in for.
func (b *builder) provider(p *Provider) (cascade.ProviderConfig, bool) {
	path := "providers." + p.Name
	if p.Name == "" {
		return cascade.ProviderConfig{}, false
	}
	if pc, ok := b.carried(p); ok {
		return pc, true
	}
	var adapter afloat.Provider = unbuilt{p.Name}
	if !b.f.invalid[path] {
		a, err := b.adapter(p)
		if err != nil {
			key := "type"
			var ke *keyError
			if errors.As(err, &ke) {
				key = ke.key
			}
			b.errorf(path+"."+key, "%v", err)
		} else {
			adapter = a
		}
	}
	w := fault.Wrap(p.Name, adapter, b.clock)
	b.rt.Faults[p.Name] = w
	b.keepFault(p.Name, w)

	bc := breaker.Config{
		ConsecutiveFailures: p.Breaker.ConsecutiveFailures, FailureRate: p.Breaker.FailureRate,
		Window: p.Breaker.Window, MinCalls: p.Breaker.MinCalls, Recovery: p.Breaker.Recovery,
		Growth: p.Breaker.Growth, Jitter: jitterOf(p.Breaker.Jitter), RampUp: p.Breaker.RampUp,
		MaxRecovery: p.Breaker.MaxRecovery, UnusableCooldown: p.Breaker.UnusableCooldown,
		Disabled: !p.Breaker.Enabled, Clock: b.clock, Rand: b.rand, OnStateChange: b.breakerEvents(),
	}
	if b.rt.redis != nil {
		bc.Store = b.rt.redis.Breakers()
	}
	if _, err := breaker.New(p.Name, bc); err != nil {
		b.providerErrorf(p, "breaker", strings.TrimPrefix(err.Error(), fmt.Sprintf("breaker %q: ", p.Name)))
		bc = breaker.Config{Clock: b.clock}
	}
	lc := latency.Config{
		Percentile: p.Timeouts.Percentile, Multiplier: p.Timeouts.Multiplier, Min: p.Timeouts.Min,
		Max: p.Timeouts.Max, Initial: p.Timeouts.Initial, MinSamples: p.Timeouts.MinSamples,
	}
	if _, err := latency.NewEstimator(lc); err != nil {
		b.providerErrorf(p, "timeouts", strings.TrimPrefix(err.Error(), "latency: "))
		lc = latency.Config{}
	}
	ft := p.Timeouts.FirstToken
	fc := latency.Config{
		Percentile: cmp.Or(ft.Percentile, lc.Percentile), Multiplier: cmp.Or(ft.Multiplier, lc.Multiplier),
		Min: cmp.Or(ft.Min, lc.Min), Max: cmp.Or(ft.Max, lc.Max), Initial: cmp.Or(ft.Initial, lc.Initial),
		MinSamples: cmp.Or(ft.MinSamples, lc.MinSamples),
	}
	if _, err := latency.NewEstimator(fc); err != nil {
		b.providerErrorf(p, "timeouts.first_token", strings.TrimPrefix(err.Error(), "latency: "))
		fc = lc
	}
	cont, probe := b.capabilities(path, p, adapter)
	pc := cascade.ProviderConfig{
		Name: p.Name, Provider: w, Breaker: bc, Timeouts: lc, FirstToken: fc, StreamIdle: p.Timeouts.StreamIdle,
		MaxInFlight: p.MaxInFlight, QueueWait: cmp.Or(p.QueueWait, -1), Continuation: cont, Probe: probe, System: systems[p.Type], Model: traceModel(p),
		Retry: cascade.RetryConfig{Max: noneIsNegative(p.Retry.Max), BudgetRatio: noRatioIsNegative(p.Retry.BudgetRatio),
			BudgetFloor: noneIsNegative(p.Retry.BudgetFloor), Window: p.Retry.Window, MaxWait: p.Retry.MaxWait},
		Price: cascade.Price{InputPer1M: p.Price.InputPer1M, OutputPer1M: p.Price.OutputPer1M, Currency: p.Price.Currency},
	}
	b.rt.remember(p.Name, pc)
	return pc, true
}

// capabilities resolves a provider's continuation and background probe: the file's, or the
// adapter's own (see Provider.Continuation and Provider.Probe). A prefill continuation or a
// models probe that the adapter cannot do is an error.
func (b *builder) capabilities(path string, p *Provider, adapter afloat.Provider) (cascade.Continuation, cascade.ProbeMode) {
	cont := cascade.ContinueNone
	c, ok := adapter.(interface{ Continuation() string })
	can := ok && c.Continuation() == "prefill"
	switch {
	case p.Continuation == "prefill" && !can && !b.f.invalid[path]:
		b.errorf(path+".continuation", "provider type %s (dialect %q) cannot continue from an assistant prefill: it would refuse every continuation", p.Type, p.Dialect)
	case p.Continuation == "prefill", p.Continuation == "" && can:
		cont = cascade.ContinuePrefill
	}
	_, prober := adapter.(afloat.Prober)
	probe := cascade.ProbeMode(p.Probe)
	switch {
	case probe == "" && prober:
		probe = cascade.ProbeModels
	case probe == "":
		probe = cascade.ProbeOff
	case probe == cascade.ProbeModels && !prober && !b.f.invalid[path]:
		b.errorf(path+".probe", "provider type %s has no models list to probe: use completion (billed) or off", p.Type)
		probe = cascade.ProbeOff
	}
	return cont, probe
}

// jitterOf maps a jitter the file wrote as 0 ("none") to the breaker's -1 for none.
func jitterOf(j float64) float64 {
	if j == 0 {
		return -1
	}
	return j
}

// noneIsNegative maps a count the file wrote as 0 ("none") to the negative value that means
// none to the cascade, whose 0 means its default.
func noneIsNegative(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// noRatioIsNegative is noneIsNegative for a ratio: the file's 0 (none) is the cascade's
// negative.
func noRatioIsNegative(r float64) float64 {
	if r == 0 {
		return -1
	}
	return r
}

// adapter builds the adapter of p's type. An error that belongs to one key is a *keyError.
func (b *builder) adapter(p *Provider) (afloat.Provider, error) {
	if p.Type == TypeSim {
		return sim.New(sim.Config{
			Name: p.Name, P50: p.Latency.P50, P95: p.Latency.P95, ErrorRate: p.ErrorRate,
			ErrorStatus: p.ErrorStatus, Seed: p.Seed, Clock: b.clock,
		})
	}
	hc, err := httpClient(p)
	if err != nil {
		return nil, err
	}
	switch p.Type {
	case TypeOpenAI:
		return openai.New(openai.Config{
			Name: p.Name, BaseURL: p.BaseURL, APIKey: p.APIKey, Model: p.Model, Headers: p.Headers,
			Dialect: p.Dialect, HTTPClient: hc, Clock: b.clock,
		})
	case TypeAnthropic:
		return anthropic.New(anthropic.Config{
			Name: p.Name, BaseURL: p.BaseURL, APIKey: p.APIKey, Model: p.Model, Headers: p.Headers,
			HTTPClient: hc, Clock: b.clock,
		})
	case TypeGigaChat:
		return gigachat.New(gigachat.Config{
			Name: p.Name, BaseURL: p.BaseURL, AuthURL: p.AuthURL, AuthKey: p.AuthKey, Scope: p.Scope,
			Model: p.Model, HTTPClient: hc, Clock: b.clock, Logger: b.log,
		})
	case TypeYandex:
		return yandex.New(yandex.Config{
			Name: p.Name, BaseURL: p.BaseURL, ModelURI: p.ModelURI, APIKey: p.APIKey, IAMToken: p.IAMToken,
			FolderID: p.FolderID, HTTPClient: hc, Clock: b.clock,
		})
	}
	return nil, fmt.Errorf("provider type %s is not available in this build", p.Type)
}

// keyError is an adapter error that belongs to one key of the provider.
type keyError struct {
	key string
	err error
}

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// httpClient returns the HTTP client of an HTTP provider: its connect timeout, as many idle
// connections kept as its max_in_flight, and its ca_file's roots trusted beside the system's.
func httpClient(p *Provider) (*http.Client, error) {
	hc, err := httpx.NewTLSClient(httpx.Timeouts{Connect: p.Timeouts.Connect, IdlePerHost: p.MaxInFlight}, httpx.TLS{CAFile: p.CAFile})
	if err != nil {
		return nil, &keyError{key: "ca_file", err: err}
	}
	return hc, nil
}

// unbuilt stands in for a provider whose adapter could not be built, so that Check still
// checks the tasks over it. It never serves: Build returns no Runtime when one exists.
type unbuilt struct{ name string }

func (u unbuilt) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	return nil, &afloat.ProviderError{Provider: u.name, Kind: afloat.Unusable, Err: fmt.Errorf("provider %s was not built", u.name)}
}

// task builds one task and reports whether it was built.
func (b *builder) task(t *Task) bool {
	cfg, ok := b.taskConfig(t)
	if !ok {
		return false
	}
	task, err := b.rt.Engine.Task(cfg)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("cascade: task %q: ", t.Name))
		path := "tasks." + t.Name
		if rest, ok := strings.CutPrefix(msg, "canary: "); ok {
			path, msg = path+".canary", rest // on the canary's line
		} else if rest, ok := strings.CutPrefix(msg, "schema "+t.Name+": "); ok {
			path, msg = path+".schema", t.Schema+": "+rest // on the schema's line, naming its file
		}
		b.errorf(path, "%s", msg)
		return false
	}
	b.rt.Tasks[t.Name] = task
	b.rt.TaskOrder = append(b.rt.TaskOrder, t.Name)
	b.rt.ReviewSLA[t.Name] = t.ReviewSLA
	return true
}

// taskConfig reads a task's files into its cascade.TaskConfig, and reports whether they all
// could be read.
func (b *builder) taskConfig(t *Task) (cascade.TaskConfig, bool) {
	path := "tasks." + t.Name
	cfg := cascade.TaskConfig{
		Name: t.Name, Criticality: t.Criticality, OnExhausted: t.OnExhausted, Budget: t.Budget,
		ReviewSLA: t.ReviewSLA, MaxReasks: noneIsNegative(t.Reask.Max), Synonyms: t.Synonyms,
		OnRefusal: cascade.RefusalPolicy(t.OnRefusal), Hedge: t.Hedge.cascade(),
	}
	ok := t.Schema != "" // an absent schema was reported by validation
	if ok {
		schema, err := os.ReadFile(t.Schema)
		if err != nil {
			b.errorf(path+".schema", "%v", err)
			ok = false
		}
		cfg.Schema = schema
	}
	templates := make([]*prompt.Template, len(t.Cascade)) // nil where a template did not parse
	for i, tr := range t.Cascade {
		if tr.Prompt == "" {
			ok = false // reported by validation
			continue
		}
		tpl, err := prompt.ParseFile(tr.Prompt)
		if err != nil {
			b.errorf(fmt.Sprintf("%s.cascade[%d].prompt", path, i), "%v", err)
			ok = false
			continue
		}
		templates[i] = tpl
		reask, rok := b.reaskPrompt(fmt.Sprintf("%s.cascade[%d].reask_prompt", path, i), tr.ReaskPrompt)
		ok = ok && rok
		cfg.Cascade = append(cfg.Cascade, cascade.Tier{
			Provider: tr.Provider, Prompt: tpl, Reask: reask, MaxTokens: tr.MaxTokens, Temperature: tr.Temperature,
		})
	}
	if len(t.Input) > 0 {
		cfg.Inputs = t.Input.Names()
		var err error
		if cfg.InputSchema, err = inputSchema(t.Input); err != nil {
			b.errorf(path+".input", "%v", err)
			ok = false
		}
	}
	ok = b.renderSamples(t, templates) && ok
	ok = b.releases(t, &cfg) && ok
	if len(t.Heuristic) > 0 {
		rules := make(cascade.Rules, len(t.Heuristic))
		for i, r := range t.Heuristic {
			rules[i] = cascade.Rule{WhenAny: r.WhenAny, Set: r.Set, Default: r.Default}
		}
		cfg.Heuristic = rules
	}
	return cfg, ok
}

// renderSamples renders each of a task's templates with a sample input of the task's input
// fields (see sampleInput), as a call would, and reports whether all rendered. A template
// that reads a field the task's input schema does not declare fails here rather than on
// every call at run time.
func (b *builder) renderSamples(t *Task, templates []*prompt.Template) bool {
	in := sampleInput(t.Input, templateFields(templates))
	ok := true
	for i, tpl := range templates {
		if tpl == nil {
			continue
		}
		if _, err := tpl.Render(in); err != nil {
			p := fmt.Sprintf("tasks.%s.cascade[%d].prompt", t.Name, i)
			var mi *prompt.MissingInputError
			if errors.As(err, &mi) && len(t.Input) > 0 {
				b.errorf(p, "reads %q, which tasks.%s.input does not declare (it declares %s)", mi.Field, t.Name, strings.Join(t.Input.Names(), ", "))
			} else {
				b.errorf(p, "rendering with a sample input: %v", err)
			}
			ok = false
		}
	}
	return ok
}

// reaskPrompt parses a tier's re-ask template; "" is none.
func (b *builder) reaskPrompt(path, file string) (*prompt.Template, bool) {
	if file == "" {
		return nil, true
	}
	tpl, err := prompt.ParseFile(file)
	if err != nil {
		b.errorf(path, "%v", err)
		return nil, false
	}
	return tpl, true
}

// inputSchema builds the JSON Schema of a task's input: an object with every declared field
// required.
func inputSchema(fs Fields) ([]byte, error) {
	props := make(map[string]any, len(fs))
	for _, f := range fs {
		props[f.Name] = f.Schema
	}
	return json.Marshal(map[string]any{
		"$schema":    "https://json-schema.org/draft/2020-12/schema",
		"type":       "object",
		"properties": props,
		"required":   fs.Names(),
	})
}

// shedder is the engine's shedder for server.shed_latency, its sampler started and kept in
// the runtime; nil on a reload (server.* takes a restart: the engine takes its previous
// one's). With shedding off (threshold 0) it sheds nothing, and the engine still reads its
// pressure, so that afloat's own saturation is never blamed on a provider.
func (b *builder) shedder() *shed.Shedder {
	if b.prev != nil {
		return nil
	}
	// On a simulated clock the sampler sends itself no datagrams (see shed.NewSampler).
	b.rt.sampler = shed.NewSampler(context.Background(), 0, !b.simulated)
	return shed.New(b.f.Server.ShedThreshold(), b.rt.sampler.Latency)
}

// route builds one route and reports whether it was built.
func (b *builder) route(r *Route) bool {
	cfg := cascade.RouteConfig{
		Name: r.Name, Criticality: r.Criticality, Budget: r.Budget, MaxReasks: noneIsNegative(r.Reask.Max),
		OnRefusal: cascade.RefusalPolicy(r.OnRefusal), Hedge: r.Hedge.cascade(),
	}
	for i, tr := range r.Cascade {
		reask, ok := b.reaskPrompt(fmt.Sprintf("routes.%s.cascade[%d].reask_prompt", r.Name, i), tr.ReaskPrompt)
		if !ok {
			return false
		}
		cfg.Cascade = append(cfg.Cascade, cascade.RouteTier{
			Provider: tr.Provider, System: tr.System, SystemMode: tr.SystemMode, Reask: reask,
			MaxTokens: tr.MaxTokens, Temperature: tr.Temperature,
		})
	}
	cfg.Cache = b.answerCache("routes."+r.Name, r.Cache)
	route, err := b.rt.Engine.Route(cfg)
	if err != nil {
		b.errorf("routes."+r.Name, "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("cascade: route %q: ", r.Name)))
		return false
	}
	b.rt.Routes[r.Name] = route
	b.rt.RouteOrder = append(b.rt.RouteOrder, r.Name)
	for _, m := range r.Models {
		b.rt.Models[m] = r.Name
	}
	return true
}

// reviewStore returns the review store: the host's, the file's when Build asked for it, or
// one in memory (Check, and a store that could not open, reported as an error).
func (b *builder) reviewStore(opts BuildOptions) review.Store {
	if b.prev != nil {
		return b.prev.Review // review.* takes a restart
	}
	if opts.Review != nil {
		return opts.Review
	}
	r := b.f.Review
	ro := review.Options{Clock: b.clock, ClaimTTL: r.ClaimTTL, Retention: r.Retention, Metrics: b.rt.Metrics, Logger: b.log,
		Outbox: r.Webhook.URL != ""}
	if !opts.openReview {
		return review.NewMemoryWith(ro)
	}
	switch r.Store {
	case "", "sqlite":
		s, err := review.OpenSQLite(context.Background(), r.SQLite.Path, ro)
		if err != nil {
			b.errorf("review.sqlite.path", "%v", err)
			break
		}
		b.rt.ownsReview = true
		b.log.Info("review store open", "store", "sqlite", "path", r.SQLite.Path,
			"claim_ttl", r.ClaimTTL.String(), "retention", r.Retention.String())
		return s
	case "postgres":
		ro.MaxPending = r.Postgres.MaxPending
		s, err := review.OpenPostgres(context.Background(), r.Postgres.URL, ro)
		if err != nil {
			b.errorf("review.postgres.url", "%v", err)
			break
		}
		b.rt.ownsReview = true
		b.log.Info("review store open", "store", "postgres", "database", s.Database(), "max_pending", r.Postgres.MaxPending,
			"claim_ttl", r.ClaimTTL.String(), "retention", r.Retention.String())
		return s
	default:
		b.errorf("review.store", "unknown store %q", r.Store)
	}
	return review.NewMemoryWith(ro)
}

// Close stops what Build started and closes what it opened: the engine's background probes,
// the trace exporter (flushing the spans still queued, for at most 5s), and the review store
// unless the host gave it. A runtime that Reload replaced, or built and did not put in force,
// shares those with the runtime in force: its Close stops only its engine's probes of the
// providers it alone had. It is safe to call on a nil Runtime and more than once.
func (rt *Runtime) Close() error {
	if rt == nil {
		return nil
	}
	if !rt.owner {
		return rt.retire()
	}
	rt.Alerts.Close() // first: it reads the engine, the review store and the state
	if rt.sampler != nil {
		rt.sampler.Close()
		rt.sampler = nil
	}
	rt.closeReviewWatch() // before the review store closes
	if rt.Engine != nil {
		_ = rt.Engine.Close() // never fails; it waits for running probes to return
	}
	errs := []error{rt.shutdownTracing()}    // after the engine: the probes' last spans go too
	errs = append(errs, rt.closeCaches(nil)) // before the redis client they write to
	if rt.openFeature != nil {
		rt.openFeature()
		rt.openFeature = nil
	}
	if rt.decisions != nil {
		rt.decisions.close() // the canaries' decisions, before the state they go to
	}
	if rt.State != nil {
		errs = append(errs, rt.State.Close()) // closes the redis backend too
		rt.State = nil
	} else if rt.redis != nil {
		errs = append(errs, rt.redis.Close())
	}
	rt.redis = nil
	if rt.redisClient != nil {
		errs = append(errs, rt.redisClient.Close())
		rt.redisClient = nil
	}
	if rt.ownsReview && rt.Review != nil {
		rt.ownsReview = false
		errs = append(errs, rt.Review.Close())
	}
	return errors.Join(errs...)
}
