package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/normalize"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/prometheus/client_golang/prometheus"
)

// Policy is what a task answers when every tier was skipped or failed.
type Policy string

const (
	// PolicyHeuristic answers from the task's Heuristic (fail open): enrichment's default.
	PolicyHeuristic Policy = "heuristic"
	// PolicyUnavailable answers with no result (fail silent): assistance's default.
	PolicyUnavailable Policy = "unavailable"
	// PolicyHuman queues the call for an operator and answers its review id (fail closed):
	// critical's default.
	PolicyHuman Policy = "human"
	// PolicyBlock refuses the call with afloat.ErrBlocked (fail closed).
	PolicyBlock Policy = "block"
)

// ParsePolicy reads a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyHeuristic, PolicyUnavailable, PolicyHuman, PolicyBlock:
		return p, nil
	}
	return "", fmt.Errorf("unknown on_exhausted policy %q (want heuristic, unavailable, human or block)", s)
}

// DefaultPolicy is the policy a criticality takes when the task names none.
func DefaultPolicy(c afloat.Criticality) Policy {
	switch c {
	case afloat.Enrichment:
		return PolicyHeuristic
	case afloat.Assistance:
		return PolicyUnavailable
	}
	return PolicyHuman
}

// Tier is one step of a task's cascade: a provider with that provider's own prompt.
type Tier struct {
	// Provider names a provider of the engine.
	Provider string
	// Prompt renders the messages for this provider; required.
	Prompt *prompt.Template
	// MaxTokens caps the answer; 0 leaves it to the provider.
	MaxTokens int
	// Temperature is nil to leave it to the provider.
	Temperature *float64
	// Reask overrides the clarifying message of a re-ask for this provider: the messages it
	// renders are appended to the conversation after the model's answer. Its data are
	// normalize.ReaskData's: errors ([]string), stage, schema and answer (strings); it may
	// read no other field. nil uses normalize.ReaskText as one user message.
	Reask *prompt.Template
}

// TaskConfig is one use of AI in the product.
type TaskConfig struct {
	// Name is the task's name ("triage"); required.
	Name string
	// Criticality is required: the class is an explicit decision, never a default.
	Criticality afloat.Criticality
	// OnExhausted is the policy when no tier answers; "" takes DefaultPolicy(Criticality).
	// A critical task may only be human or block: failing open is refused.
	OnExhausted Policy
	// Budget covers every attempt, retry and re-ask of one call. 0 means 10s.
	Budget time.Duration
	// Schema is the JSON Schema of the answer; required.
	Schema []byte
	// Synonyms map a property of Schema to other words a model may use for it
	// ({"department": ["категория", "category"]}); see normalize.WithSynonyms. nil means
	// none; a property the schema lacks is refused.
	Synonyms map[string][]string
	// Inputs are the input fields a call must carry; nil takes the fields the tiers'
	// templates read.
	Inputs []string
	// InputSchema is a JSON Schema for the input object, checked on every call (a field of
	// the wrong type is an *InputError naming it); nil checks only that Inputs are present.
	InputSchema []byte
	// Cascade is the ordered tiers: primary, backup, emergency; at least one.
	Cascade []Tier
	// Heuristic answers under PolicyHeuristic; nil makes such a task answer unavailable.
	Heuristic Heuristic
	// ReviewSLA is the time by which an operator is due to answer a queued item. 0 means
	// 30m.
	ReviewSLA time.Duration
	// MaxReasks is the number of clarifying re-asks after a contract violation, per tier.
	// 0 means 1; a negative value disables re-asks.
	MaxReasks int
	// OnRefusal is what follows a provider's content-policy refusal: RefusalStop (the
	// default: no other tier is asked, the task answers by its OnExhausted policy with reason
	// refused) or RefusalNextTier.
	OnRefusal RefusalPolicy
	// Hedge asks the next tier too when a tier is slow to answer; the zero Hedge never
	// hedges. See Hedge.
	Hedge Hedge
	// Cache serves an earlier valid answer to the same input when every tier fails; nil
	// means none. See Cache.
	Cache *Cache
	// Canary sends a share of one tier's calls to a candidate prompt or provider; nil means
	// none. See Canary.
	Canary *Canary
}

// Task is a configured task. It implements afloat.Runner and is safe for concurrent use.
type Task struct {
	e         *Engine
	hedge     Hedge
	name      string
	crit      afloat.Criticality
	policy    Policy
	budget    time.Duration
	contract  *normalize.Contract
	input     *normalize.Contract
	format    *afloat.ResponseFormat
	inputs    []string
	tiers     []tier
	heuristic Heuristic
	reviewSLA time.Duration
	maxReasks int
	onRefusal RefusalPolicy
	share     *shareWindow
	cache     *taskCache  // nil without a cache
	canary    *taskCanary // nil without a canary

	steps        stepCounters
	okRequests   prometheus.Counter
	shareGauge   prometheus.Gauge
	shed         prometheus.Counter // afloat_shed_total
	sourceGauges sourceGauges
}

// tier is a Tier resolved against the engine, with its metric handles bound.
type tier struct {
	scope       string // the task's or route's name
	idx         int
	up          *upstream
	prompt      *prompt.Template
	reask       *prompt.Template
	version     string
	est         *latency.Estimator
	streamEst   *latency.Estimator // routes: time to first chunk, learnt apart from whole answers
	maxTokens   int
	temperature *float64

	attempts    map[afloat.Outcome]prometheus.Counter
	latency     prometheus.Observer
	readTimeout prometheus.Gauge
	tokens      prometheus.Counter
	cost        prometheus.Counter
	reasks      prometheus.Counter
	retries     prometheus.Counter
	refusals    prometheus.Counter
	hedges      prometheus.Counter            // afloat_hedges_total: calls hedged from this tier to the next
	wasted      prometheus.Counter            // cost of answers not used
	skipped     prometheus.Counter            // stream events skipped
	spend       *spendWindow                  // the task's or route's, shared by its tiers
	answers     map[string]prometheus.Counter // by result (ok or a stage); nil for routes
	answered    prometheus.Counter            // answers["ok"]; nil for routes
}

// Task builds a task over the engine's providers. It refuses a configuration that could not
// work or that would fail open for a critical task.
func (e *Engine) Task(cfg TaskConfig) (*Task, error) {
	t, err := e.newTask(cfg)
	if err != nil {
		return nil, fmt.Errorf("cascade: task %q: %w", cfg.Name, err)
	}
	return t, nil
}

func (e *Engine) newTask(cfg TaskConfig) (*Task, error) {
	if cfg.Name == "" {
		return nil, errors.New("name is required")
	}
	if cfg.Criticality == 0 {
		return nil, errors.New("criticality is required (enrichment, assistance or critical)")
	}
	if _, err := afloat.ParseCriticality(cfg.Criticality.String()); err != nil {
		return nil, err
	}
	policy := cfg.OnExhausted
	if policy == "" {
		policy = DefaultPolicy(cfg.Criticality)
	}
	if _, err := ParsePolicy(string(policy)); err != nil {
		return nil, err
	}
	if cfg.Criticality == afloat.Critical && policy != PolicyHuman && policy != PolicyBlock {
		return nil, fmt.Errorf("a critical task must fail closed: on_exhausted %q would answer when no model could judge (use human or block)", policy)
	}
	if len(cfg.Cascade) == 0 {
		return nil, errors.New("cascade has no tiers")
	}
	if len(cfg.Schema) == 0 {
		return nil, errors.New("schema is required")
	}
	contract, err := normalize.Compile(cfg.Name, cfg.Schema, normalize.WithSynonyms(cfg.Synonyms))
	if err != nil {
		return nil, err
	}
	onRefusal, err := ParseRefusalPolicy(string(cfg.OnRefusal))
	if err != nil {
		return nil, err
	}

	t := &Task{
		e: e, hedge: cfg.Hedge, name: cfg.Name, crit: cfg.Criticality, policy: policy, budget: cfg.Budget,
		contract: contract, heuristic: cfg.Heuristic, reviewSLA: cfg.ReviewSLA, maxReasks: cfg.MaxReasks, onRefusal: onRefusal,
		share:  e.shareOf(cfg.Name),
		format: &afloat.ResponseFormat{Type: "json_schema", Name: cfg.Name, Schema: contract.Schema()},
	}
	switch {
	case t.budget < 0:
		return nil, fmt.Errorf("budget %v is negative", t.budget)
	case t.budget == 0:
		t.budget = 10 * time.Second
	}
	if err := cfg.Hedge.check(); err != nil {
		return nil, err
	}
	if t.reviewSLA == 0 {
		t.reviewSLA = 30 * time.Minute
	}
	switch {
	case t.maxReasks == 0:
		t.maxReasks = 1
	case t.maxReasks < 0:
		t.maxReasks = 0
	}
	if len(cfg.InputSchema) > 0 {
		if t.input, err = normalize.Compile(cfg.Name+"-input", cfg.InputSchema); err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
	}
	if err := t.checkHeuristic(); err != nil {
		return nil, err
	}

	var fields []string
	for i, tc := range cfg.Cascade {
		if tc.Prompt == nil {
			return nil, fmt.Errorf("tier %d (%s): prompt is required", i, tc.Provider)
		}
		tr, err := e.newTier(cfg.Name, i, tc.Provider, tierVersion(cfg.Name, tc.Provider, tc.Prompt))
		if err != nil {
			return nil, err
		}
		tr.prompt, tr.maxTokens, tr.temperature = tc.Prompt, tc.MaxTokens, tc.Temperature
		if tc.Reask != nil {
			if err := checkReask(tc.Reask, contract.Schema()); err != nil {
				return nil, fmt.Errorf("tier %d (%s): %w", i, tc.Provider, err)
			}
			tr.reask = tc.Reask
		}
		e.promptAnswers(&tr, cfg.Name, tc.Provider, tc.Prompt.Version())
		t.tiers = append(t.tiers, tr)
		fields = append(fields, tc.Prompt.Fields()...)
	}
	if cfg.Cache != nil {
		if err := cfg.Cache.check(cfg.Criticality); err != nil {
			return nil, err
		}
	}
	versions := make([]string, 0, len(t.tiers)+1)
	for _, tr := range t.tiers {
		versions = append(versions, tr.version)
	}
	if cfg.Inputs != nil {
		t.inputs = slices.Clone(cfg.Inputs)
	} else {
		slices.Sort(fields)
		t.inputs = slices.Compact(fields)
	}
	if cfg.Canary != nil {
		if t.canary, err = e.newCanary(t, cfg.Canary); err != nil {
			return nil, err
		}
		versions = append(versions, t.canary.cand.version)
	}
	t.cache = e.taskCache(cfg.Name, cfg.Cache, versions, t.canary)

	if err := e.claimName(cfg.Name, t.scopeTiers()); err != nil {
		return nil, err
	}
	if t.canary != nil {
		e.canaries.put(cfg.Name, t.canary.run)
	}
	t.okRequests, t.shareGauge = e.initSeries(cfg.Name, t.scopeTiers())
	t.shed = e.metrics.Shed.WithLabelValues(cfg.Name)
	t.sourceGauges = e.sourceGauges(cfg.Name)
	t.steps = e.stepCounters(cfg.Name)
	return t, nil
}

// scopeTiers are the tiers whose providers serve the task: the cascade's, and a canary's
// candidate.
func (t *Task) scopeTiers() []tier {
	if t.canary == nil {
		return t.tiers
	}
	return append(slices.Clone(t.tiers), t.canary.cand)
}

// checkReask refuses a re-ask template that reads a field ReaskData does not set or that
// cannot render.
func checkReask(tpl *prompt.Template, schema json.RawMessage) error {
	for _, f := range tpl.Fields() {
		if !slices.Contains(normalize.ReaskFields(), f) {
			return fmt.Errorf("re-ask template %s reads %q; it may read %s", tpl.Name(), f, strings.Join(normalize.ReaskFields(), ", "))
		}
	}
	sample := &afloat.ContractError{Stage: normalize.StageSchema, Details: []string{"at /: missing property 'x'"}}
	if _, err := tpl.Render(normalize.ReaskData(sample, schema, "{}")); err != nil {
		return fmt.Errorf("re-ask template: %w", err)
	}
	return nil
}

// stepCounters are the afloat_normalize_total series of a task or route, one per step.
type stepCounters [normalize.NumSteps]prometheus.Counter

func (e *Engine) stepCounters(scope string) stepCounters {
	var sc stepCounters
	for i := range sc {
		sc[i] = e.metrics.Normalize.WithLabelValues(scope, normalize.Steps(1<<i).String())
	}
	return sc
}

// count adds the steps that changed an answer.
func (sc *stepCounters) count(s normalize.Steps) {
	for i := range sc {
		if s&(1<<i) != 0 {
			sc[i].Inc()
		}
	}
}

// newTier resolves tier i of the task or route named scope against the engine, with its
// estimator and metric handles bound.
func (e *Engine) newTier(scope string, i int, provider, version string) (tier, error) {
	u := e.upstreams[provider]
	if u == nil {
		return tier{}, fmt.Errorf("tier %d: unknown provider %q", i, provider)
	}
	est, err := e.estimator(u, scope, u.timeouts)
	if err != nil {
		return tier{}, fmt.Errorf("tier %d (%s): %w", i, provider, err)
	}
	m := e.metrics
	tr := tier{
		scope: scope, idx: i, up: u, version: version, est: est,
		attempts:    map[afloat.Outcome]prometheus.Counter{},
		latency:     m.ProviderLatency.WithLabelValues(u.name, scope),
		readTimeout: m.ReadTimeout.WithLabelValues(u.name, scope),
		tokens:      m.Tokens.WithLabelValues(u.name, scope),
		cost:        m.Cost.WithLabelValues(u.name, scope),
		reasks:      m.Reasks.WithLabelValues(scope, u.name),
		retries:     m.Retries.WithLabelValues(scope, u.name),
		refusals:    m.Refusals.WithLabelValues(scope, u.name),
		hedges:      m.Hedges.WithLabelValues(scope, u.name),
		wasted:      m.WastedCost.WithLabelValues(u.name, scope),
		skipped:     m.StreamEventsSkipped.WithLabelValues(u.name, scope),
		spend:       e.spendOf(scope, u.price.Currency),
	}
	for _, o := range afloat.Outcomes {
		tr.attempts[o] = m.Attempts.WithLabelValues(scope, u.name, string(o))
	}
	tr.readTimeout.Set(est.ReadTimeout().Seconds())
	return tr, nil
}

// initSeries exports the series of a task or route at zero and returns the handles of its
// happy path.
func (e *Engine) initSeries(scope string, tiers []tier) (ok prometheus.Counter, share prometheus.Gauge) {
	providers := make([]string, len(tiers))
	for i, tr := range tiers {
		providers[i] = tr.up.name
	}
	outcomes := make([]string, len(afloat.Outcomes))
	reasons := []string{"", string(afloat.ReasonKillSwitch), string(afloat.ReasonShed)}
	for i, o := range afloat.Outcomes {
		outcomes[i] = string(o)
		if o != afloat.OutcomeOK {
			reasons = append(reasons, string(o))
		}
	}
	m := e.metrics
	m.InitTask(scope, providers, outcomes, reasons)
	return m.Requests.WithLabelValues(scope, string(afloat.SourceModel), "false", ""), m.FallbackShare.WithLabelValues(scope)
}

// checkHeuristic refuses a rule set that cannot produce a valid answer.
func (t *Task) checkHeuristic() error {
	rules, ok := t.heuristic.(Rules)
	if !ok {
		return nil
	}
	for _, combo := range rules.combinations() {
		b, err := json.Marshal(combo)
		if err != nil {
			return fmt.Errorf("heuristic: %w", err)
		}
		if err := t.contract.Validate(b); err != nil {
			return fmt.Errorf("heuristic rules can produce %s, which does not fit the schema: %w", b, err)
		}
	}
	return nil
}

// Name returns the task's name.
func (t *Task) Name() string { return t.name }

// Criticality returns the task's criticality.
func (t *Task) Criticality() afloat.Criticality { return t.crit }

// Enter waits for a turn at the work that comes before a call of the task runs, such as
// decoding its body (shed.Shedder.Enter), and returns the function that ends the turn: call it
// once that work is done. ok is false when afloat is too busy to even start the call
// (afloat_shed_total counts it, and the caller answers it overloaded) or ctx ended first.
// The wait is part of the call's budget: it is never longer than the task's Budget, and the
// caller gives the call what is left of it (a context whose deadline is the Budget after the
// call arrived).
func (t *Task) Enter(ctx context.Context) (leave func(), ok bool) {
	leave, ok = t.e.shed.Enter(ctx, t.crit, t.budget)
	if !ok && ctx.Err() == nil {
		t.shed.Inc()
	}
	return leave, ok
}

// Budget returns the task's budget: the most a call of it takes, from its arrival.
func (t *Task) Budget() time.Duration { return t.budget }

// Policy returns the on_exhausted policy in force.
func (t *Task) Policy() Policy { return t.policy }

// Inputs returns the input fields a call must carry.
func (t *Task) Inputs() []string { return slices.Clone(t.inputs) }

// Contract returns the task's compiled output contract.
func (t *Task) Contract() *normalize.Contract { return t.contract }

// FallbackShare returns the share of the last minute's calls not answered by tier 0.
func (t *Task) FallbackShare() float64 { return t.share.share() }

// FallbackHistory returns the fallback share of each 5 s of the last minute, oldest first;
// -1 where no call answered (the console's charts).
func (t *Task) FallbackHistory() []float64 { return t.share.history() }

// InputError says that a call's input lacks a field or has one of the wrong type.
type InputError struct {
	Field   string
	Problem string
}

func (e *InputError) Error() string { return fmt.Sprintf("input %q: %s", e.Field, e.Problem) }

func (t *Task) checkInput(in afloat.Input) error {
	for _, f := range t.inputs {
		if _, ok := in[f]; !ok {
			return &InputError{Field: f, Problem: "missing"}
		}
	}
	if t.input == nil {
		return nil
	}
	if err := t.input.ValidateValue(map[string]any(in)); err != nil {
		return inputError(err)
	}
	return nil
}

// inputError names the first field a schema violation is about.
func inputError(err error) error {
	var ce *afloat.ContractError
	if !errors.As(err, &ce) || len(ce.Details) == 0 {
		return &InputError{Field: "input", Problem: err.Error()}
	}
	d := ce.Details[0] // "at /field/...: problem"
	field, problem := "input", d
	if rest, ok := strings.CutPrefix(d, "at /"); ok {
		if loc, p, ok := strings.Cut(rest, ": "); ok {
			problem = p
			if name, _, _ := strings.Cut(loc, "/"); name != "" {
				field = name
			}
		}
	}
	if m := missingProperty(problem); m != "" {
		field, problem = m, "missing"
	}
	return &InputError{Field: field, Problem: problem}
}

// missingProperty reads the first property a "missing properties 'a', 'b'" message names.
func missingProperty(problem string) string {
	rest, ok := strings.CutPrefix(problem, "missing properties ")
	if !ok {
		if rest, ok = strings.CutPrefix(problem, "missing property "); !ok {
			return ""
		}
	}
	first, _, _ := strings.Cut(rest, ",")
	return strings.Trim(first, "'\" ")
}
