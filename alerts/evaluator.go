package alerts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/telemetry"
)

// Defaults of Config's zero fields.
const (
	DefaultInterval        = 5 * time.Second
	DefaultDrillMaxAge     = 2160 * time.Hour
	DefaultWebhookAttempts = 5
	DefaultWebhookBackoff  = time.Second
)

// Task is a task or route as the evaluator watches it.
type Task struct {
	// Name is the task's or route's name.
	Name string
	// Providers are its tiers' providers in order: Providers[0] is its primary (tier 0).
	Providers []string
	// ReviewSLA is when a queued review item is due; 0 means the task is not watched by
	// ReviewSLA (a route, which queues nothing).
	ReviewSLA time.Duration
}

// Config configures an Evaluator. An input an alert needs is required when that alert is
// among Rules; the others may be nil.
type Config struct {
	// Rules are the alerts to evaluate; at least one, each name at most once.
	Rules []Rule
	// Tasks are the tasks and routes PrimaryOpen and ReviewSLA watch.
	Tasks []Task
	// Providers are the providers Unusable watches. nil means every provider of Tasks.
	Providers []string
	// Counts feeds the rate alerts (FallbackShare, ContractViolationRate).
	Counts Counts
	// Breakers feeds PrimaryOpen, ContractViolationRate (which holds only while the
	// provider's breaker is closed) and Unusable.
	Breakers Breakers
	// Openings feeds Unusable: it must see every provider's breaker events.
	Openings *Openings
	// Reviews feeds ReviewSLA.
	Reviews Reviews
	// Drills feeds DrillStale, with DrillMaxAge: the longest a drilled task may go without
	// a passing drill. 0 means 2160h (90 days).
	Drills      Drills
	DrillMaxAge time.Duration
	// Canaries feeds CanaryRolledBack.
	Canaries Canaries
	// Interval is how often Start evaluates the alerts. 0 means 5s.
	Interval time.Duration
	// Clock drives the evaluations, the windows, the For periods and the webhooks' retries.
	// nil means real time.
	Clock clockwork.Clock
	// Logger receives a warning when an alert fires, an info line when it resolves, and the
	// webhooks' failures (never their URLs, which often hold a token). nil discards.
	Logger *slog.Logger
	// Firing is afloat_alerts_firing{alert} (telemetry.NewAlertsFiring): how many scopes of
	// each alert fire now. nil means a gauge registered nowhere.
	Firing *prometheus.GaugeVec
	// HTTPClient posts the webhooks; each attempt is also cut after 10s. nil means a client
	// of its own.
	HTTPClient *http.Client
	// Rand returns the numbers in [0, 1) that jitter the waits between a webhook's attempts;
	// it must be safe for concurrent use. nil means math/rand/v2's global source.
	Rand func() float64
	// WebhookAttempts bounds the POSTs of one notification. 0 means 5.
	WebhookAttempts int
	// WebhookBackoff is the wait before a webhook's second attempt; each further wait doubles,
	// up to a minute, and every wait is jittered to between half and one and a half times
	// its value. 0 means 1s.
	WebhookBackoff time.Duration
}

// Evaluator evaluates the alerts of its Rules on a clock, on sliding windows: each alert of
// each scope fires once when its condition has held for the rule's For, and resolves once when
// the condition has stopped holding for as long again (a condition that comes back within
// that time keeps the alert firing, without a second notification). Each firing and each
// resolution is logged, counted in afloat_alerts_firing and, when the rule has a webhook,
// posted to it. An Evaluator is safe for concurrent use; its methods are safe on a nil
// *Evaluator, which has no alerts.
type Evaluator struct {
	cfg    Config
	clock  clockwork.Clock
	log    *slog.Logger
	rules  []Rule
	firing *prometheus.GaugeVec
	hooks  *notifier

	evalMu  sync.Mutex // serializes Evaluate: the histories below and the steps of states
	calls   history[string]
	answers history[Scope]
	keep    time.Duration // the longest window of a rate rule

	mu     sync.Mutex // guards states
	states map[key]*tracked
	seq    uint64 // numbers the notifications, so that a stale delivery never overwrites

	startOnce sync.Once
	closeOnce sync.Once
	stop      context.CancelFunc
	done      chan struct{}
}

type key struct {
	alert Name
	scope Scope
}

// tracked is one alert of one scope through its life.
type tracked struct {
	State
	firing bool
	// holding is when the condition was first seen holding while not firing; clearing is
	// when it was first seen not holding while firing. Zero when not.
	holding, clearing time.Time
	// notified numbers the last notification sent, whose delivery State.Webhook shows.
	notified uint64
}

// reading is one scope's value at one evaluation.
type reading struct {
	scope            Scope
	value, threshold float64
	holds            bool
}

// New returns an Evaluator of cfg. It starts nothing: Start does. An invalid rule, or a rule
// without the input it needs, is an error.
func New(cfg Config) (*Evaluator, error) {
	e := &Evaluator{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, firing: cfg.Firing, states: map[key]*tracked{}}
	if e.clock == nil {
		e.clock = clockwork.NewRealClock()
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.cfg.Interval == 0 {
		e.cfg.Interval = DefaultInterval
	}
	if e.cfg.DrillMaxAge == 0 {
		e.cfg.DrillMaxAge = DefaultDrillMaxAge
	}
	if e.cfg.Providers == nil {
		e.cfg.Providers = providersOf(cfg.Tasks)
	}
	switch {
	case len(cfg.Rules) == 0:
		return nil, errors.New("alerts: no rules")
	case e.cfg.Interval < 0 || e.cfg.DrillMaxAge < 0 || cfg.WebhookBackoff < 0 || cfg.WebhookAttempts < 0:
		return nil, errors.New("alerts: interval, drill max age, webhook backoff and attempts must not be negative")
	}
	seen := map[Name]bool{}
	for _, r := range cfg.Rules {
		if seen[r.Name] {
			return nil, fmt.Errorf("alerts: %s configured twice", r.Name)
		}
		seen[r.Name] = true
		r, err := e.rule(r)
		if err != nil {
			return nil, fmt.Errorf("alerts: %s: %w", r.Name, err)
		}
		e.rules = append(e.rules, r)
		if r.Name.rate() {
			e.keep = max(e.keep, r.Window)
		}
	}
	if e.firing == nil {
		g, err := telemetry.NewAlertsFiring(nil, nil)
		if err != nil {
			return nil, err
		}
		e.firing = g
	}
	for _, r := range e.rules {
		e.firing.WithLabelValues(string(r.Name)).Set(0)
	}
	e.hooks = newNotifier(e.cfg, e.clock, e.log, e.delivered)
	return e, nil
}

// providersOf returns every provider of tasks, each once, in order.
func providersOf(tasks []Task) []string {
	var out []string
	for _, t := range tasks {
		for _, p := range t.Providers {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// Retarget replaces the tasks and providers the evaluator watches, as Config's Tasks and
// Providers (a config reload), from its next evaluation on. Every alert keeps its state: one
// whose task or provider left stops holding, and resolves after its For as any other.
func (e *Evaluator) Retarget(tasks []Task, providers []string) {
	if e == nil {
		return
	}
	if providers == nil {
		providers = providersOf(tasks)
	}
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	e.cfg.Tasks, e.cfg.Providers = tasks, providers
}

// rule checks one rule against its alert's needs and fills in its defaults.
func (e *Evaluator) rule(r Rule) (Rule, error) {
	needs := map[Name]bool{
		FallbackShare:         e.cfg.Counts != nil,
		ContractViolationRate: e.cfg.Counts != nil && e.cfg.Breakers != nil,
		PrimaryOpen:           e.cfg.Breakers != nil,
		Unusable:              e.cfg.Breakers != nil && e.cfg.Openings != nil,
		ReviewSLA:             e.cfg.Reviews != nil,
		DrillStale:            e.cfg.Drills != nil,
		CanaryRolledBack:      e.cfg.Canaries != nil,
	}
	ok, known := needs[r.Name]
	switch {
	case !known:
		return r, fmt.Errorf("unknown alert (want one of %v)", Names)
	case !ok:
		return r, errors.New("its input is missing from the config")
	case r.For < 0 || r.Window < 0 || r.MinCalls < 0 || r.Above < 0:
		return r, errors.New("above, for, window and min_calls must not be negative")
	case r.Name.rate() && r.Above > 1:
		return r, fmt.Errorf("above %v is outside [0, 1]", r.Above)
	case !r.Name.rate() && (r.Window != 0 || r.MinCalls != 0):
		return r, errors.New("window and min_calls apply to the rate alerts only")
	case r.Name != ReviewSLA && !r.Name.rate() && r.Above != 0:
		return r, errors.New("has no threshold: above must be left out")
	}
	if r.Webhook != "" {
		if u, err := url.Parse(r.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return r, errors.New("invalid webhook url (want an absolute http or https url)")
		}
	}
	if r.Name.rate() {
		r.Window = cmp.Or(r.Window, DefaultWindow)
		r.MinCalls = cmp.Or(r.MinCalls, DefaultMinCalls)
	}
	return r, nil
}

// Start evaluates the alerts now and then every Interval, until Close. The first evaluation
// takes the rate alerts' baseline: their windows count what follows it. Start may be called
// more than once; it starts once.
func (e *Evaluator) Start() {
	if e == nil {
		return
	}
	e.startOnce.Do(func() {
		ctx, stop := context.WithCancel(context.Background())
		e.stop, e.done = stop, make(chan struct{})
		ticker := e.clock.NewTicker(e.cfg.Interval)
		go func() {
			defer close(e.done)
			defer ticker.Stop()
			e.Evaluate(ctx)
			for {
				select {
				case <-ctx.Done():
					return
				case <-ticker.Chan():
					e.Evaluate(ctx)
				}
			}
		}()
	})
}

// Close stops the evaluations and the webhook deliveries and waits for them: a webhook
// attempt in flight finishes (each is cut after 10s), a retry not made yet and the
// notifications still queued are dropped. It may be called more than once, and without
// Start.
func (e *Evaluator) Close() {
	if e == nil {
		return
	}
	e.closeOnce.Do(func() {
		e.startOnce.Do(func() {}) // a Start after Close starts nothing
		if e.stop != nil {
			e.stop()
			<-e.done
		}
		e.hooks.close()
	})
}

// Evaluate evaluates every alert once, now, and sends the notifications of what fired or
// resolved. Start calls it every Interval; tests call it after advancing their clock.
func (e *Evaluator) Evaluate(ctx context.Context) {
	if e == nil {
		return
	}
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	now := e.clock.Now()
	e.sample(now)
	type ruleReadings struct {
		rule     Rule
		readings []reading
	}
	var all []ruleReadings
	for _, r := range e.rules {
		rs, ok := e.read(ctx, r, now)
		if !ok {
			continue // its input failed: the alert stays as it was
		}
		slices.SortFunc(rs, func(a, b reading) int {
			return cmp.Or(cmp.Compare(a.scope.Task, b.scope.Task), cmp.Compare(a.scope.Provider, b.scope.Provider))
		})
		all = append(all, ruleReadings{r, rs})
	}

	var changed []notice
	e.mu.Lock()
	for _, rr := range all {
		changed = append(changed, e.step(rr.rule, rr.readings, now)...)
	}
	for _, r := range e.rules {
		n := 0
		for k, t := range e.states {
			if k.alert == r.Name && t.firing {
				n++
			}
		}
		e.firing.WithLabelValues(string(r.Name)).Set(float64(n))
	}
	e.mu.Unlock()

	for _, c := range changed {
		attrs := []any{"alert", string(c.state.Alert), "value", c.state.Value, "threshold", c.state.Threshold}
		if c.state.Scope.Task != "" {
			attrs = append(attrs, "task", c.state.Scope.Task)
		}
		if c.state.Scope.Provider != "" {
			attrs = append(attrs, "provider", c.state.Scope.Provider)
		}
		if c.state.State == StatusFiring {
			e.log.Warn("alert firing: "+c.state.text(), attrs...)
		} else {
			e.log.Info("alert resolved: "+c.state.text(), attrs...)
		}
		if c.rule.Webhook != "" {
			e.hooks.send(c.rule, c.key, c.seq, c.state)
		}
	}
}

// notice is one firing or resolution to report.
type notice struct {
	rule  Rule
	key   key
	seq   uint64
	state State
}

// step moves the states of one rule by its readings; a scope it tracks that has no reading
// now does not hold. It returns the firings and resolutions. e.mu is held.
func (e *Evaluator) step(r Rule, rs []reading, now time.Time) []notice {
	var out []notice
	seen := map[Scope]bool{}
	move := func(k key, rd reading) {
		t := e.states[k]
		if t == nil {
			if !rd.holds {
				return // nothing to track
			}
			t = &tracked{State: State{Alert: r.Name, Scope: rd.scope}}
			e.states[k] = t
		}
		t.Value, t.Threshold = rd.value, rd.threshold
		var to Status
		switch {
		case !t.firing && !rd.holds:
			t.holding = time.Time{}
		case !t.firing:
			if t.holding.IsZero() {
				t.holding = now
			}
			if now.Sub(t.holding) >= r.For {
				t.firing, t.clearing, to = true, time.Time{}, StatusFiring
			}
		case rd.holds:
			t.clearing = time.Time{}
		default:
			if t.clearing.IsZero() {
				t.clearing = now
			}
			if now.Sub(t.clearing) >= r.For {
				t.firing, t.holding, to = false, time.Time{}, StatusResolved
			}
		}
		if to == "" {
			return
		}
		t.State.State, t.Since = to, now
		n := notice{rule: r, key: k, state: t.State}
		if r.Webhook != "" {
			e.seq++
			t.notified, n.seq = e.seq, e.seq
			t.Webhook = &Delivery{State: to, Result: resultPending}
			n.state.Webhook = nil
		}
		out = append(out, n)
	}
	for _, rd := range rs {
		seen[rd.scope] = true
		move(key{r.Name, rd.scope}, rd)
	}
	var gone []key
	for k := range e.states {
		if k.alert == r.Name && !seen[k.scope] {
			gone = append(gone, k)
		}
	}
	slices.SortFunc(gone, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.scope.Task, b.scope.Task), cmp.Compare(a.scope.Provider, b.scope.Provider))
	})
	for _, k := range gone {
		t := e.states[k]
		move(k, reading{scope: k.scope, threshold: t.Threshold})
	}
	return out
}

// delivered records where the notification seq of k stands, unless a later one was sent.
func (e *Evaluator) delivered(k key, seq uint64, d Delivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.states[k]; t != nil && t.notified == seq {
		t.Webhook = &d
	}
}

// Firing returns the alerts firing now, each with the delivery of its last notification, in
// the order of Names and then by scope. nil when none fires.
func (e *Evaluator) Firing() []State {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []State
	for _, t := range e.states {
		if !t.firing {
			continue
		}
		s := t.State
		if s.Webhook != nil {
			d := *s.Webhook
			s.Webhook = &d
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b State) int {
		return cmp.Or(cmp.Compare(slices.Index(Names, a.Alert), slices.Index(Names, b.Alert)),
			cmp.Compare(a.Scope.Task, b.Scope.Task), cmp.Compare(a.Scope.Provider, b.Scope.Provider))
	})
	return out
}

// Rules returns the rules in force, with their defaults filled in.
func (e *Evaluator) Rules() []Rule {
	if e == nil {
		return nil
	}
	return slices.Clone(e.rules)
}

// sample reads the totals of the rate rules into their histories.
func (e *Evaluator) sample(now time.Time) {
	var calls, answers bool
	for _, r := range e.rules {
		calls = calls || r.Name == FallbackShare
		answers = answers || r.Name == ContractViolationRate
	}
	if calls {
		e.calls.add(now, e.cfg.Counts.Calls(), e.keep)
	}
	if answers {
		e.answers.add(now, e.cfg.Counts.Answers(), e.keep)
	}
}

// read returns the readings of one rule now; ok is false when its input failed.
func (e *Evaluator) read(ctx context.Context, r Rule, now time.Time) (out []reading, ok bool) {
	switch r.Name {
	case FallbackShare:
		for task, c := range e.calls.increase(r.Window) {
			out = append(out, rateReading(r, Scope{Task: task}, c, true))
		}
	case ContractViolationRate:
		for s, c := range e.answers.increase(r.Window) {
			out = append(out, rateReading(r, s, c, e.closed(ctx, s.Provider)))
		}
	case PrimaryOpen:
		for _, t := range e.cfg.Tasks {
			if len(t.Providers) == 0 {
				continue
			}
			p := t.Providers[0]
			out = append(out, flag(Scope{Task: t.Name, Provider: p}, !e.closed(ctx, p)))
		}
	case Unusable:
		for _, p := range e.cfg.Providers {
			out = append(out, flag(Scope{Provider: p}, e.cfg.Openings.Unusable(p) && !e.closed(ctx, p)))
		}
	case ReviewSLA:
		return e.reviewSLA(ctx, r, now)
	case DrillStale:
		return e.drillStale(now), true
	case CanaryRolledBack:
		for task, rolledBack := range e.cfg.Canaries.RolledBack() {
			out = append(out, flag(Scope{Task: task}, rolledBack))
		}
	}
	return out, true
}

// rateReading is a rate rule's reading of one scope: its share over the window, which holds
// with at least MinCalls calls in it and when gate (for ContractViolationRate: the breaker is
// closed) allows.
func rateReading(r Rule, s Scope, c Count, gate bool) reading {
	rd := reading{scope: s, threshold: r.Above}
	if c.All > 0 {
		rd.value = c.Hits / c.All
	}
	rd.holds = gate && c.All >= float64(r.MinCalls) && rd.value > r.Above
	return rd
}

// flag is the reading of a condition without a threshold: value 1 while it holds.
func flag(s Scope, holds bool) reading {
	rd := reading{scope: s, holds: holds}
	if holds {
		rd.value = 1
	}
	return rd
}

// closed reports whether the provider's breaker is closed; an unknown provider's is.
func (e *Evaluator) closed(ctx context.Context, provider string) bool {
	b := e.cfg.Breakers.Breaker(provider)
	return b == nil || b.State(ctx) == breaker.StateClosed
}
