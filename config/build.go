package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/internal/httpx"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/afloat-dev/afloat/provider/sim"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/telemetry"
)

// BuildOptions are what a Runtime takes from its host rather than from the file.
type BuildOptions struct {
	// Clock drives every timer, deadline and simulated latency. nil means real time.
	Clock clockwork.Clock
	// Logger receives the runtime's logs. nil discards them.
	Logger *slog.Logger
	// Registerer takes the metrics. nil means a new registry, returned in Runtime.Registry.
	Registerer prometheus.Registerer
}

// Runtime is a File made live: the engine with every provider, task and route, and what the
// gateway serves beside them. Its parts are safe for concurrent use; its maps and slices are
// not to be modified.
type Runtime struct {
	File   *File
	Engine *cascade.Engine
	Tasks  map[string]*cascade.Task
	Routes map[string]*cascade.Route
	// TaskOrder, RouteOrder and ProviderOrder are the names in the file's order.
	TaskOrder, RouteOrder, ProviderOrder []string
	// Faults holds every provider, wrapped so that drills inject faults into the real
	// adapter.
	Faults map[string]*fault.Provider
	// Flags starts with every task and route on at its rollout_pct.
	Flags *flags.Memory
	// Review is in memory in this build: nothing queued survives a restart.
	Review review.Queue
	// Registry is the registry the metrics went to when BuildOptions.Registerer was nil;
	// nil otherwise.
	Registry *prometheus.Registry
	Metrics  *telemetry.Metrics
	// ReviewSLA is each task's review SLA in force.
	ReviewSLA map[string]time.Duration
}

// Build makes the file live: it builds each provider's adapter (no connection is made), its
// guards, and every task and route over them. f must come from Load or Parse, which fill in
// the defaults Build relies on. Every problem found is returned at once, as Errors.
func (f *File) Build(opts BuildOptions) (*Runtime, error) {
	b := f.build(opts)
	if len(b.errs) > 0 {
		return nil, b.errs.sorted()
	}
	return b.rt, nil
}

// builder builds a Runtime and keeps what Check inspects after.
type builder struct {
	f     *File
	clock clockwork.Clock
	log   *slog.Logger
	rt    *Runtime
	errs  Errors
	// prompts are each task's templates by tier, nil where a template did not parse, kept
	// even when the task did not build so that Check renders them.
	prompts map[string][]*prompt.Template
}

func (b *builder) errorf(path, format string, args ...any) {
	b.errs = append(b.errs, &Error{Path: path, Line: b.line(path), Msg: fmt.Sprintf(format, args...)})
}

func (b *builder) line(path string) int {
	v := validator{f: b.f}
	return v.line(path)
}

// build builds what it can. Entities that failed to load (f.invalid) are left out, and a
// provider whose adapter cannot be built is stood in for by one that always fails, so that
// the tasks over it are still checked.
func (f *File) build(opts BuildOptions) *builder {
	b := &builder{f: f, clock: opts.Clock, log: opts.Logger, prompts: map[string][]*prompt.Template{}}
	if b.clock == nil {
		b.clock = clockwork.NewRealClock()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	rt := &Runtime{
		File: f, Tasks: map[string]*cascade.Task{}, Routes: map[string]*cascade.Route{},
		Faults: map[string]*fault.Provider{}, ReviewSLA: map[string]time.Duration{},
	}
	b.rt = rt
	reg := opts.Registerer
	if reg == nil {
		rt.Registry = prometheus.NewRegistry()
		reg = rt.Registry
	}
	metrics, err := telemetry.New(reg)
	if err != nil {
		b.errorf("", "metrics: %v", err)
		return b
	}
	rt.Metrics = metrics
	if f.State.Backend != "memory" {
		b.errorf("state.backend", "state backend %s is not available in this build", f.State.Backend)
	}

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
	rt.Flags = flags.NewMemory()
	rt.Review = review.NewMemory(b.clock)
	rt.Engine, err = cascade.New(cascade.Config{
		Providers: providers, Flags: rt.Flags, Review: rt.Review, Metrics: metrics, Clock: b.clock, Logger: b.log,
	})
	if err != nil {
		b.errorf("providers", "%v", err)
		return b
	}
	doc := &flags.Document{Tasks: map[string]flags.TaskFlags{}}
	for _, t := range f.Tasks {
		if !f.invalid["tasks."+t.Name] && b.task(t) {
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
	if err := rt.Flags.Set(context.Background(), doc); err != nil {
		b.errorf("", "flags: %v", err)
	}
	b.log.Warn("review queue is in memory: queued items do not survive a restart",
		"configured_store", f.Review.Store)
	return b
}

// provider builds one provider's adapter and guards. It reports false only when the provider
// cannot even be stood in for.
func (b *builder) provider(p *Provider) (cascade.ProviderConfig, bool) {
	path := "providers." + p.Name
	if p.Name == "" {
		return cascade.ProviderConfig{}, false
	}
	var adapter afloat.Provider = unbuilt{p.Name}
	if !b.f.invalid[path] {
		a, err := b.adapter(p)
		if err != nil {
			b.errorf(path+".type", "%v", err)
		} else {
			adapter = a
		}
	}
	w := fault.Wrap(p.Name, adapter, b.clock)
	b.rt.Faults[p.Name] = w

	bc := breaker.Config{
		ConsecutiveFailures: p.Breaker.ConsecutiveFailures, FailureRate: p.Breaker.FailureRate,
		Window: p.Breaker.Window, MinCalls: p.Breaker.MinCalls, Recovery: p.Breaker.Recovery,
		MaxRecovery: p.Breaker.MaxRecovery, UnusableCooldown: p.Breaker.UnusableCooldown,
		Disabled: !p.Breaker.Enabled, Clock: b.clock,
	}
	if _, err := breaker.New(p.Name, bc); err != nil {
		b.errorf(path+".breaker", "%v", err)
		bc = breaker.Config{Clock: b.clock}
	}
	lc := latency.Config{
		Percentile: p.Timeouts.Percentile, Multiplier: p.Timeouts.Multiplier, Min: p.Timeouts.Min,
		Max: p.Timeouts.Max, Initial: p.Timeouts.Initial, MinSamples: p.Timeouts.MinSamples,
	}
	if _, err := latency.NewEstimator(lc); err != nil {
		b.errorf(path+".timeouts", "%v", strings.TrimPrefix(err.Error(), "latency: "))
		lc = latency.Config{}
	}
	return cascade.ProviderConfig{
		Name: p.Name, Provider: w, Breaker: bc, Timeouts: lc, MaxInFlight: p.MaxInFlight,
		Retry: cascade.RetryConfig{Max: noneIsNegative(p.Retry.Max), BudgetRatio: p.Retry.BudgetRatio, Window: p.Retry.Window},
		Price: cascade.Price{InputPer1M: p.Price.InputPer1M, OutputPer1M: p.Price.OutputPer1M, Currency: p.Price.Currency},
	}, true
}

// noneIsNegative maps a count the file wrote as 0 ("none") to the negative value that means
// none to the cascade, whose 0 means its default.
func noneIsNegative(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// adapter builds the adapter of p's type.
func (b *builder) adapter(p *Provider) (afloat.Provider, error) {
	switch p.Type {
	case TypeOpenAI:
		hc, err := httpClient(p)
		if err != nil {
			return nil, err
		}
		return openai.New(openai.Config{
			Name: p.Name, BaseURL: p.BaseURL, APIKey: p.APIKey, Model: p.Model, Headers: p.Headers,
			HTTPClient: hc, Clock: b.clock,
		})
	case TypeSim:
		return sim.New(sim.Config{
			Name: p.Name, P50: p.Latency.P50, P95: p.Latency.P95, ErrorRate: p.ErrorRate,
			ErrorStatus: p.ErrorStatus, Seed: p.Seed, Clock: b.clock,
		})
	}
	return nil, fmt.Errorf("provider type %s is not available in this build", p.Type)
}

// httpClient returns the HTTP client of an HTTP provider: its connect timeout, and its
// ca_file's roots trusted beside the system's.
func httpClient(p *Provider) (*http.Client, error) {
	hc := httpx.NewClient(httpx.Timeouts{Connect: p.Timeouts.Connect})
	if p.CAFile == "" {
		return hc, nil
	}
	pem, err := os.ReadFile(p.CAFile)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %s holds no PEM certificate", p.CAFile)
	}
	tr, ok := hc.Transport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("ca_file: unexpected transport %T", hc.Transport)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
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
		b.errorf("tasks."+t.Name, "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("cascade: task %q: ", t.Name)))
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
		ReviewSLA: t.ReviewSLA, MaxReasks: noneIsNegative(t.Reask.Max),
	}
	ok := true
	schema, err := os.ReadFile(t.Schema)
	if err != nil {
		b.errorf(path+".schema", "%v", err)
		ok = false
	}
	cfg.Schema = schema
	templates := make([]*prompt.Template, len(t.Cascade))
	b.prompts[t.Name] = templates
	for i, tr := range t.Cascade {
		tpl, err := prompt.ParseFile(tr.Prompt)
		if err != nil {
			b.errorf(fmt.Sprintf("%s.cascade[%d].prompt", path, i), "%v", err)
			ok = false
			continue
		}
		templates[i] = tpl
		cfg.Cascade = append(cfg.Cascade, cascade.Tier{
			Provider: tr.Provider, Prompt: tpl, MaxTokens: tr.MaxTokens, Temperature: tr.Temperature,
		})
	}
	if len(t.Input) > 0 {
		cfg.Inputs = t.Input.Names()
		if cfg.InputSchema, err = inputSchema(t.Input); err != nil {
			b.errorf(path+".input", "%v", err)
			ok = false
		}
	}
	if len(t.Heuristic) > 0 {
		rules := make(cascade.Rules, len(t.Heuristic))
		for i, r := range t.Heuristic {
			rules[i] = cascade.Rule{WhenAny: r.WhenAny, Set: r.Set, Default: r.Default}
		}
		cfg.Heuristic = rules
	}
	return cfg, ok
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

// route builds one route and reports whether it was built.
func (b *builder) route(r *Route) bool {
	cfg := cascade.RouteConfig{
		Name: r.Name, Criticality: r.Criticality, Budget: r.Budget, MaxReasks: noneIsNegative(r.Reask.Max),
	}
	for _, tr := range r.Cascade {
		cfg.Cascade = append(cfg.Cascade, cascade.RouteTier{
			Provider: tr.Provider, System: tr.System, SystemMode: tr.SystemMode,
			MaxTokens: tr.MaxTokens, Temperature: tr.Temperature,
		})
	}
	route, err := b.rt.Engine.Route(cfg)
	if err != nil {
		b.errorf("routes."+r.Name, "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("cascade: route %q: ", r.Name)))
		return false
	}
	b.rt.Routes[r.Name] = route
	b.rt.RouteOrder = append(b.rt.RouteOrder, r.Name)
	return true
}
