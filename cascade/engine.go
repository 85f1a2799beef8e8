package cascade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/limit"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/shed"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// ProviderConfig is one provider and the guards it shares across every task that uses it.
type ProviderConfig struct {
	// Name is the provider's configured name ("gigachat-pro"); required and unique.
	Name string
	// Provider is the adapter; required.
	Provider afloat.Provider
	// Breaker configures the provider's circuit breaker; zero fields take breaker's
	// defaults. Its Clock defaults to the engine's, and its OnStateChange is wrapped so the
	// engine's metrics see every change.
	Breaker breaker.Config
	// Timeouts configures the read timeout derived from measured latency; zero fields take
	// latency's defaults.
	Timeouts latency.Config
	// MaxInFlight is the hard cap of the provider's bulkhead, whose limit is adaptive under it
	// (package limit: it grows with demand while the provider answers as fast as it has over
	// the long run, and falls when its latency rises or it drops calls). A call beyond the
	// limit waits briefly in a bounded queue, within its budget, before the tier is skipped
	// (outcome bulkhead). 0 means 256: a provider that hangs holds at most that many
	// goroutines, each for a bounded read timeout.
	MaxInFlight int
	// QueueWait is the longest a call waits for a slot of a full bulkhead; it waits at most
	// half of what its budget leaves above the attempt's need and the reserve of the tiers
	// below, too. 0 means 1s; a negative value skips at once (a fixed capacity that spills).
	QueueWait time.Duration
	// Retry bounds retries on this provider; zero fields take RetryConfig's defaults.
	Retry RetryConfig
	// Price turns tokens into cost; the zero Price costs nothing.
	Price Price
	// FirstToken configures the time a stream may take to its first chunk, learnt from
	// measured times to first chunk; zero fields take Timeouts'.
	FirstToken latency.Config
	// StreamIdle is the longest gap between two chunks of a stream once it has begun: fixed,
	// and usually more generous than the first chunk's. 0 means 10s.
	StreamIdle time.Duration
	// Continuation says what the provider can do with an answer cut on another tier:
	// ContinuePrefill continues it from the partial text (an assistant prefill); "" and
	// ContinueNone cannot, so it only takes over a stream that had not reached the client.
	Continuation Continuation
	// Probe is how an open breaker of this provider is probed in the background, so that no
	// user request is spent on a dead provider: ProbeModels calls the adapter's
	// afloat.Prober (a free models list), ProbeCompletion makes a one-token completion
	// (billed), "" and ProbeOff leave probing to user requests. A probe runs at the end of
	// each open period and may take Timeouts.Max, at most 10s; ProbeModels with an adapter
	// that is no afloat.Prober is an error. Engine.Close stops the probes.
	Probe ProbeMode
	// System names the adapter's kind in traces, as gen_ai.system: "openai", "anthropic",
	// "gigachat", "yandexgpt", "sim". "" leaves the attribute out.
	System string
	// Model is the model the adapter asks for when a request names none, in traces as
	// gen_ai.request.model. "" leaves the attribute out for such requests.
	Model string
}

// Continuation is what a provider can do with an answer cut on another tier.
type Continuation string

const (
	// ContinueNone: the provider cannot continue another's answer.
	ContinueNone Continuation = "none"
	// ContinuePrefill: the provider continues from an assistant prefill (afloat.Request's
	// Continue).
	ContinuePrefill Continuation = "prefill"
)

// ProbeMode is how an open breaker is probed in the background.
type ProbeMode string

const (
	// ProbeOff leaves probing to user requests.
	ProbeOff ProbeMode = "off"
	// ProbeModels calls the adapter's afloat.Prober.
	ProbeModels ProbeMode = "models"
	// ProbeCompletion makes a one-token completion.
	ProbeCompletion ProbeMode = "completion"
)

// DefaultMaxInFlight is ProviderConfig.MaxInFlight's default.
const DefaultMaxInFlight = 256

// Price is a provider's price per million tokens.
type Price struct {
	InputPer1M  float64
	OutputPer1M float64
	Currency    string
}

func (p Price) cost(u afloat.Usage) float64 {
	return (float64(u.InputTokens)*p.InputPer1M + float64(u.OutputTokens)*p.OutputPer1M) / 1e6
}

// RetryConfig bounds retries on the same provider (the micro level; the cascade is the
// macro level).
type RetryConfig struct {
	// Max is the number of retries of one call after a transient failure. 0 means 1; a
	// negative value disables retries.
	Max int
	// BudgetRatio caps retries at this share of the calls over Window. 0 means 0.2; a
	// negative value means none (only BudgetFloor's retries).
	BudgetRatio float64
	// BudgetFloor is the retries always allowed over Window, whatever BudgetRatio says, so
	// that a quiet service still retries its first transient failure (failsafe-go's budget
	// has the same floor). 0 means 3; a negative value means none.
	BudgetFloor int
	// Window is the period the budget counts over. 0 means 10s.
	Window time.Duration
	// Backoff is the mean wait before a retry (jittered ±50%). 0 means 50ms.
	Backoff time.Duration
	// MaxWait is the longest Retry-After that is still waited out (when it also fits the
	// call's budget). 0 means 2s, which covers the common 1–2 s of a rate limit.
	MaxWait time.Duration
}

func (r RetryConfig) withDefaults() (RetryConfig, error) {
	if r.Max == 0 {
		r.Max = 1
	}
	if r.Max < 0 {
		r.Max = 0
	}
	switch {
	case r.BudgetRatio == 0:
		r.BudgetRatio = 0.2
	case r.BudgetRatio < 0:
		r.BudgetRatio = 0
	}
	switch {
	case r.BudgetFloor == 0:
		r.BudgetFloor = 3
	case r.BudgetFloor < 0:
		r.BudgetFloor = 0
	}
	if r.Window == 0 {
		r.Window = 10 * time.Second
	}
	if r.Backoff == 0 {
		r.Backoff = 50 * time.Millisecond
	}
	if r.MaxWait == 0 {
		r.MaxWait = 2 * time.Second
	}
	switch {
	case r.BudgetRatio > 1:
		return r, fmt.Errorf("retry budget_ratio %v is outside 0–1", r.BudgetRatio)
	case r.Window < 0 || r.Backoff < 0 || r.MaxWait < 0:
		return r, errors.New("retry durations must not be negative")
	}
	return r, nil
}

// Config configures an Engine.
type Config struct {
	// Providers are the providers tasks may use.
	Providers []ProviderConfig
	// Flags serves the kill switches, read on every call. nil means a flags.Memory with
	// every task on.
	Flags flags.Source
	// Review takes the items of critical tasks that no tier answered. nil means an
	// in-memory queue (nothing survives a restart).
	Review review.Queue
	// Metrics receives the metrics of shared/DESIGN.md §8. nil means metrics registered
	// nowhere.
	Metrics *telemetry.Metrics
	// Prompts receives the per prompt version metrics (afloat_prompt_answers_total). nil
	// means metrics registered nowhere.
	Prompts *telemetry.PromptMetrics
	// Clock drives every timer, deadline and window. nil means real time.
	Clock clockwork.Clock
	// Rand returns the random numbers in [0, 1) that jitter the waits before a retry; it
	// must be safe for concurrent use. nil means math/rand/v2's global source.
	Rand func() float64
	// Logger receives state changes and failures, and each attempt at debug level; a record
	// logged during a call carries the call's request_id, trace_id and span_id
	// (telemetry.LogHandler). nil discards them.
	Logger *slog.Logger
	// TracerProvider makes the spans of shared/DESIGN.md §8: one per call ("afloat.task
	// NAME", "afloat.route NAME") and a child per attempt ("afloat.attempt PROVIDER"), with
	// OpenTelemetry's GenAI attributes. nil means a no-op provider: no span is recorded, and a
	// call pays next to nothing for tracing.
	TracerProvider trace.TracerProvider
	// Shed sheds calls, the least critical first, while the process itself is saturated
	// (package shed); a shed call goes straight to its policy with reason shed (a route's
	// fails with ErrShed). nil sheds nothing; nil with Previous takes Previous's.
	Shed *shed.Shedder
	// Decisions keeps the canaries' decisions beyond the process (the state backend): one
	// taken here is saved, one taken before a restart or by another replica is put in force.
	// nil keeps them in memory; nil with Previous takes Previous's.
	Decisions CanaryDecisions
	// Previous is the engine this one is built to replace (a config reload); nil means none.
	// A provider of Previous is carried over, by name, when its ProviderConfig has the very
	// adapter Previous had (the same Provider value) and the same settings: it keeps its
	// breaker and the state in it, its bulkhead count, retry budget and background probe, and
	// each of its tasks and routes keeps its latency estimates. Any other provider starts
	// afresh. Tasks and routes keep their fallback share and spend by name. Metrics and
	// Prompts nil take Previous's. New only reads Previous; TakeOver puts the new engine in
	// its place. See reload.go.
	Previous *Engine
}

// Engine holds the providers and runs tasks over them. It is safe for concurrent use.
type Engine struct {
	clock     clockwork.Clock
	rand      func() float64
	flags     flags.Source
	review    review.Queue
	metrics   *telemetry.Metrics
	prompts   *telemetry.PromptMetrics
	shed      *shed.Shedder
	decisions CanaryDecisions
	log       *slog.Logger
	latency   *latency.Set
	upstreams map[string]*upstream
	order     []string
	tracer    trace.Tracer
	spends    spendBook  // what each task's and route's calls cost, by name
	shares    shareBook  // each task's and route's fallback share, by name
	canaries  canaryBook // each task's canary, by name

	// from is what the engine takes over from Config.Previous while its tasks and routes are
	// built; nil for a first engine, and once TakeOver has run.
	from      atomic.Pointer[inheritance]
	closeOnce sync.Once

	namesMu sync.Mutex
	names   map[string]bool // task and route names: one namespace, as metrics and flags share it
	scopes  map[string][]string
}

// upstream is a provider with its shared guards.
type upstream struct {
	name       string
	p          afloat.Provider
	br         *breaker.Breaker
	timeouts   latency.Config
	firstToken latency.Config // Timeouts' fields where FirstToken left them zero
	streamIdle time.Duration
	continues  bool // continuation prefill
	// lim is the bulkhead: the adaptive concurrency limit, capped at max_in_flight; limitGauge
	// and queuedGauge export it.
	lim                     *limit.Limiter
	limitGauge, queuedGauge prometheus.Gauge
	// queueWait is the longest a call waits for a slot (ProviderConfig.QueueWait); 0 for none.
	queueWait time.Duration
	retry     RetryConfig
	budget    *retryBudget
	price     Price
	probe     *prober // nil when the provider is not probed in the background
	system    string  // gen_ai.system in traces
	model     string  // gen_ai.request.model in traces, when a request names none

	// settings is the ProviderConfig it was made from, less what carryOver does not compare.
	settings ProviderConfig
	// holders counts the engines that hold it: a reload's carries it over, and its probe
	// stops when the last of them closes.
	holders atomic.Int32
}

// New builds an Engine. Every provider's breaker and guards are created here.
func New(cfg Config) (*Engine, error) {
	if p := cfg.Previous; p != nil {
		cfg.Metrics, cfg.Prompts, cfg.Shed = cmp.Or(cfg.Metrics, p.metrics), cmp.Or(cfg.Prompts, p.prompts), cmp.Or(cfg.Shed, p.shed)
		if cfg.Decisions == nil {
			cfg.Decisions = p.decisions
		}
	}
	e := &Engine{
		clock: cfg.Clock, rand: cfg.Rand, flags: cfg.Flags, shed: cfg.Shed, decisions: cfg.Decisions, review: cfg.Review, metrics: cfg.Metrics, prompts: cfg.Prompts, log: cfg.Logger,
		latency: latency.NewSet(), upstreams: map[string]*upstream{}, names: map[string]bool{}, scopes: map[string][]string{},
	}
	if e.clock == nil {
		e.clock = clockwork.NewRealClock()
	}
	if e.rand == nil {
		e.rand = rand.Float64
	}
	if e.flags == nil {
		e.flags = flags.NewMemory()
	}
	if e.review == nil {
		e.review = review.NewMemory(e.clock)
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.log = slog.New(telemetry.LogHandler(e.log.Handler()))
	e.tracer = newTracer(cfg.TracerProvider)
	if e.metrics == nil {
		m, err := telemetry.New(nil)
		if err != nil {
			return nil, err
		}
		e.metrics = m
	}
	if e.prompts == nil {
		pm, err := telemetry.NewPromptMetrics(nil)
		if err != nil {
			return nil, err
		}
		e.prompts = pm
	}
	if len(cfg.Providers) == 0 {
		return nil, errors.New("cascade: no providers")
	}
	for _, pc := range cfg.Providers {
		u := cfg.Previous.carryOver(pc)
		if u == nil {
			var err error
			if u, err = e.newUpstream(pc); err != nil {
				return nil, fmt.Errorf("cascade: provider %q: %w", pc.Name, err)
			}
		}
		if _, dup := e.upstreams[u.name]; dup {
			return nil, fmt.Errorf("cascade: provider %q configured twice", u.name)
		}
		e.upstreams[u.name] = u
		e.order = append(e.order, u.name)
	}
	for _, u := range e.upstreams {
		u.holders.Add(1)
	}
	if cfg.Previous != nil {
		e.from.Store(cfg.Previous.inheritance())
		return e, nil // TakeOver exports its providers' series
	}
	e.exportProviders()
	return e, nil
}

// exportProviders exports each provider's series, its circuit state read from its breaker.
func (e *Engine) exportProviders() {
	for _, name := range e.order {
		u := e.upstreams[name]
		e.metrics.InitProvider(name)
		// Read at scrape time, so an open period that ran out reads half-open.
		e.metrics.CircuitState.Watch(name, func() float64 { return float64(u.br.State(context.Background())) })
	}
}

func (e *Engine) newUpstream(pc ProviderConfig) (*upstream, error) {
	if pc.Name == "" {
		return nil, errors.New("name is required")
	}
	if pc.Provider == nil {
		return nil, errors.New("adapter is nil")
	}
	settings := comparable(pc) // as given, before the defaults below
	retry, err := pc.Retry.withDefaults()
	if err != nil {
		return nil, err
	}
	if pc.MaxInFlight < 0 {
		return nil, fmt.Errorf("max_in_flight %d is negative", pc.MaxInFlight)
	}
	if pc.MaxInFlight == 0 {
		pc.MaxInFlight = DefaultMaxInFlight
	}
	if pc.QueueWait == 0 {
		pc.QueueWait = time.Second
	}
	queue := 0 // the limiter's default: as many as max_in_flight
	if pc.QueueWait < 0 {
		queue = -1
	}
	// Validate the timeouts once here, so that a task never meets a bad config.
	if _, err := latency.NewEstimator(pc.Timeouts); err != nil {
		return nil, err
	}
	firstToken := inheritTimeouts(pc.FirstToken, pc.Timeouts)
	if _, err := latency.NewEstimator(firstToken); err != nil {
		return nil, fmt.Errorf("first token: %w", err)
	}
	switch {
	case pc.StreamIdle < 0:
		return nil, fmt.Errorf("stream idle %v is negative", pc.StreamIdle)
	case pc.StreamIdle == 0:
		pc.StreamIdle = 10 * time.Second
	}
	switch pc.Continuation {
	case "", ContinueNone, ContinuePrefill:
	default:
		return nil, fmt.Errorf("unknown continuation %q (want prefill or none)", pc.Continuation)
	}
	probe, err := e.newProber(pc)
	if err != nil {
		return nil, err
	}
	bc := pc.Breaker
	if bc.Clock == nil {
		bc.Clock = e.clock
	}
	user := bc.OnStateChange
	// The hook holds the metrics and the logger, not e: a provider carried over by reloads
	// would otherwise keep every engine before it alive.
	name, metrics, log := pc.Name, e.metrics, e.log
	bc.OnStateChange = func(ev breaker.Event) {
		if ev.To == breaker.StateOpen {
			metrics.CircuitOpened.WithLabelValues(name).Inc()
		}
		// At warn: a provider's breaker moving is what an operator looks for first. It has no
		// call's context: the change is the provider's, delivered in order after the call.
		log.Warn("circuit state changed", "provider", name, "from", ev.From.String(), "to", ev.To.String(), "kind", ev.Kind.String())
		probe.notify(ev) // an opening arms the background probe, a closing disarms it
		if user != nil {
			user(ev)
		}
	}
	br, err := breaker.New(pc.Name, bc)
	if err != nil {
		return nil, err
	}
	probe.attach(br)
	u := &upstream{
		name: pc.Name, p: pc.Provider, br: br, timeouts: pc.Timeouts, firstToken: firstToken, streamIdle: pc.StreamIdle,
		continues: pc.Continuation == ContinuePrefill,
		lim:       limit.New(limit.Config{Max: pc.MaxInFlight, Queue: queue, Clock: e.clock}), queueWait: max(pc.QueueWait, 0), retry: retry, budget: newRetryBudget(e.clock, retry), price: pc.Price,
		limitGauge: e.metrics.ConcurrencyLimit.WithLabelValues(pc.Name), queuedGauge: e.metrics.ConcurrencyQueued.WithLabelValues(pc.Name),
		probe: probe, system: pc.System, model: pc.Model, settings: settings,
	}
	e.setConcurrency(u) // the initial limit, from start-up
	return u, nil
}

// inheritTimeouts returns c with each zero field taken from base.
func inheritTimeouts(c, base latency.Config) latency.Config {
	c.Percentile = cmp.Or(c.Percentile, base.Percentile)
	c.Multiplier = cmp.Or(c.Multiplier, base.Multiplier)
	c.Min = cmp.Or(c.Min, base.Min)
	c.Max = cmp.Or(c.Max, base.Max)
	c.Initial = cmp.Or(c.Initial, base.Initial)
	c.MinSamples = cmp.Or(c.MinSamples, base.MinSamples)
	c.Window = cmp.Or(c.Window, base.Window)
	return c
}

// Breaker returns the named provider's breaker, or nil.
func (e *Engine) Breaker(provider string) *breaker.Breaker {
	if u := e.upstreams[provider]; u != nil {
		return u.br
	}
	return nil
}

// Providers returns the provider names in configuration order.
func (e *Engine) Providers() []string { return e.order }

// InFlight returns the calls in flight to the named provider.
func (e *Engine) InFlight(provider string) int {
	if u := e.upstreams[provider]; u != nil {
		return u.lim.InFlight()
	}
	return 0
}

// Concurrency returns the named provider's concurrency limit now and the calls waiting for a
// slot under it.
func (e *Engine) Concurrency(provider string) (limit, queued int) {
	if u := e.upstreams[provider]; u != nil {
		return u.lim.Limit(), u.lim.Queued()
	}
	return 0, 0
}

// Latency returns the estimators, one per provider × task.
func (e *Engine) Latency() *latency.Set { return e.latency }

// Flags returns the flag source the engine reads.
func (e *Engine) Flags() flags.Source { return e.flags }

// Metrics returns the engine's metrics.
func (e *Engine) Metrics() *telemetry.Metrics { return e.metrics }

// PromptMetrics returns the engine's per prompt version metrics.
func (e *Engine) PromptMetrics() *telemetry.PromptMetrics { return e.prompts }

type tenantKey struct{}

// WithTenant returns a ctx that carries the tenant id the flags (blocklist, rollout) and the
// review queue read.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// Tenant returns the tenant id ctx carries, or "".
func Tenant(ctx context.Context) string {
	s, _ := ctx.Value(tenantKey{}).(string)
	return s
}

// claimName reserves a task or route name, and records the providers of its tiers.
func (e *Engine) claimName(name string, tiers []tier) error {
	e.namesMu.Lock()
	defer e.namesMu.Unlock()
	if e.names[name] {
		return fmt.Errorf("a task or route named %q exists already", name)
	}
	e.names[name] = true
	for _, tr := range tiers {
		e.scopes[name] = append(e.scopes[name], tr.up.name)
	}
	return nil
}

type idempotencyKey struct{}

// WithIdempotencyKey returns a ctx that carries the caller's idempotency key; a review item
// queued for the call carries it, so that a retried call finds the first item instead of
// queueing twice.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// withBudget puts the call's budget in ctx: now+budget, or the caller's own deadline when
// that is earlier.
func (e *Engine) withBudget(ctx context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	if d, ok := latency.FromContext(ctx); ok && !d.At().After(e.clock.Now().Add(budget)) {
		// The caller gave the call its budget already, no longer than this one (a gateway's,
		// counted from the call's arrival): it is the call's, and nothing needs another.
		return ctx, func() {}
	}
	return latency.WithBudget(ctx, e.clock, budget)
}

// Close stops the background probes of every provider (ProviderConfig.Probe) and waits for
// the running ones to return, cancelling their context: a probe cut so reports nothing to
// its breaker. A provider that another engine carried over (Config.Previous) goes on probing
// until that engine closes too. The engine still serves calls after Close, which then probe
// open breakers themselves. Close may be called more than once; it returns nil.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		var last []*upstream
		for _, u := range e.upstreams {
			if u.holders.Add(-1) == 0 {
				u.probe.stop()
				last = append(last, u)
			}
		}
		for _, u := range last {
			u.probe.wait()
		}
	})
	return nil
}
