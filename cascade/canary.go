package cascade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/telemetry"
)

// Canary releases a candidate for one tier of a task: a new prompt version, another model
// (provider), or both. A stable-hash share of the calls asks the candidate instead of the
// tier's incumbent; package canary compares the two over the window and promotes the
// candidate (it takes every call) or rolls it back (it takes none). The envelope's
// prompt_version says which answered.
type Canary struct {
	// Tier is the index of the tier canaried; 0 (the primary) by default.
	Tier int
	// Prompt is the candidate's prompt; nil keeps the tier's.
	Prompt *prompt.Template
	// Provider names the candidate's provider; "" keeps the tier's.
	Provider string
	// ByRequest splits calls by request id; false splits by tenant, so that a tenant sees
	// one arm throughout (a call without a tenant is split by its request id).
	ByRequest bool
	// Config is the candidate's share, window, minimum calls and thresholds; its Clock nil
	// takes the engine's.
	Config canary.Config
}

// CanaryDecisions keep canaries' decisions beyond the process: config adapts the state
// backend (state.State) to it, so that a restart and every replica of a fleet see a canary
// promoted or rolled back. A canary is identified by its task and a fingerprint of its
// settings: a canary of other settings is another one. Implementations are safe for
// concurrent use.
type CanaryDecisions interface {
	// Decision returns the decision kept for the task's canary of fingerprint; ok is false
	// when there is none. It is read on the calls of an undecided canary: it must answer
	// from memory.
	Decision(task, fingerprint string) (d canary.Decision, ok bool)
	// Save keeps a decision taken here. It is called on the call that decided: it must not
	// wait on a remote store (it saves in the background, and reports its own failures).
	Save(task, fingerprint string, d canary.Decision)
}

// taskCanary is a task's canary in use: the decision engine and the candidate's tier.
type taskCanary struct {
	run         *canaryRun
	task        string
	tier        int
	cand        tier
	byRequest   bool
	costs       bool // the arms' costs are in one currency, and compared
	decisions   CanaryDecisions
	fingerprint string
	share       prometheus.Gauge // afloat_canary_share
}

// sync puts in force the decision kept for the canary (before a restart, by another
// replica): over none here, and over another one taken here, as the first decision a fleet
// kept stands. It reads memory only: a map lookup a call of a canaried tier.
func (c *taskCanary) sync() {
	if c.decisions == nil {
		return
	}
	d, ok := c.decisions.Decision(c.task, c.fingerprint)
	if !ok || c.run.c.Decided() && c.run.c.RolledBack() == (d.State == canary.RolledBack) {
		return
	}
	if c.run.c.Restore(d) == nil {
		c.share.Set(c.run.c.Status().Share)
	}
}

// canaryRun is a canary's decision engine with the settings it was made for, which a
// config reload keeps when they are the same (the figures and a decision carry over).
type canaryRun struct {
	c       *canary.Canary
	setting canarySetting
}

// canarySetting is what makes a canary the same one across reloads.
type canarySetting struct {
	Tier                         int
	Incumbent, Candidate         string // prompt versions
	ByRequest                    bool
	Share                        float64
	Window                       time.Duration
	MinCalls                     int
	Thresholds                   canary.Thresholds
	IncumbentProv, CandidateProv string
}

// fingerprint names the settings: a short digest of an explicit, versioned encoding, the same
// in every replica of one config and across afloat's versions (a new field of canarySetting
// must not reopen every canary decided before; add it here as "v2" only if it must).
func (s canarySetting) fingerprint() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	th := s.Thresholds
	enc := strings.Join([]string{"v1", strconv.Itoa(s.Tier), s.Incumbent, s.Candidate, s.IncumbentProv, s.CandidateProv,
		strconv.FormatBool(s.ByRequest), f(s.Share), strconv.FormatInt(int64(s.Window), 10), strconv.Itoa(s.MinCalls),
		f(th.ViolationRate), f(th.FailureRate), f(th.ReaskRate), f(th.P95), f(th.Cost)}, "\x00")
	sum := sha256.Sum256([]byte(enc))
	return hex.EncodeToString(sum[:8])
}

// canaryBook holds each task's canary by name, for a reload to carry over.
type canaryBook struct {
	mu   sync.Mutex
	runs map[string]*canaryRun
}

func (b *canaryBook) lookup(name string) *canaryRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[name]
}

func (b *canaryBook) put(name string, r *canaryRun) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runs == nil {
		b.runs = map[string]*canaryRun{}
	}
	b.runs[name] = r
}

// newCanary builds the candidate tier of task t's canary and its decision engine (the
// previous engine's, when a reload left the canary as it was).
func (e *Engine) newCanary(t *Task, cfg *Canary) (*taskCanary, error) {
	if cfg.Tier < 0 || cfg.Tier >= len(t.tiers) {
		return nil, fmt.Errorf("canary: tier %d: the cascade has %d", cfg.Tier, len(t.tiers))
	}
	inc := &t.tiers[cfg.Tier]
	provider, tpl := cfg.Provider, cfg.Prompt
	if provider == "" {
		provider = inc.up.name
	}
	if tpl == nil {
		tpl = inc.prompt
	}
	for _, f := range tpl.Fields() {
		if !slices.Contains(t.inputs, f) {
			// Every call would have to carry it, on either arm, and after a rollback too.
			return nil, fmt.Errorf("canary: the candidate's prompt reads %q, which the task's calls need not carry (the task's inputs: %s)", f, strings.Join(t.inputs, ", "))
		}
	}
	version := tierVersion(t.name, provider, tpl)
	if version == inc.version {
		return nil, fmt.Errorf("canary: the candidate (%s) is the tier's incumbent: name another prompt version or provider", version)
	}
	cand, err := e.newTier(t.name, cfg.Tier, provider, version)
	if err != nil {
		return nil, fmt.Errorf("canary: %w", err)
	}
	cand.prompt, cand.reask, cand.maxTokens, cand.temperature = tpl, inc.reask, inc.maxTokens, inc.temperature
	e.promptAnswers(&cand, t.name, provider, tpl.Version())

	setting := canarySetting{
		Tier: cfg.Tier, Incumbent: inc.version, Candidate: version, ByRequest: cfg.ByRequest,
		Share: cfg.Config.Share, Window: cfg.Config.Window, MinCalls: cfg.Config.MinCalls, Thresholds: cfg.Config.RollbackIf,
		IncumbentProv: inc.up.name, CandidateProv: provider,
	}
	var run *canaryRun
	if from := e.from.Load(); from != nil {
		if prev := from.canaries.lookup(t.name); prev != nil && reflect.DeepEqual(prev.setting, setting) {
			run = prev
		}
	}
	if run == nil {
		cc := cfg.Config
		if cc.Clock == nil {
			cc.Clock = e.clock
		}
		if cc.Salt == "" {
			cc.Salt = t.name // each task's canary takes its own tenants, not the same 10 % every time
		}
		c, err := canary.New(cc)
		if err != nil {
			return nil, err
		}
		run = &canaryRun{c: c, setting: setting}
	}
	share := e.metrics.CanaryShare.WithLabelValues(t.name)
	tc := &taskCanary{run: run, task: t.name, tier: cfg.Tier, cand: cand, byRequest: cfg.ByRequest,
		// Costs in two currencies are not compared: each arm's then reads 0, not compared.
		costs:     inc.up.price.Currency == cand.up.price.Currency || inc.up.price.Currency == "" || cand.up.price.Currency == "",
		decisions: e.decisions, fingerprint: setting.fingerprint(), share: share}
	tc.sync()
	share.Set(run.c.Status().Share)
	for _, d := range []canary.State{canary.Promoted, canary.RolledBack} {
		for _, by := range []string{"auto", "operator"} {
			e.metrics.CanaryDecisions.WithLabelValues(t.name, string(d), by)
		}
	}
	name, log, m, decisions, fp := t.name, e.log, e.metrics, tc.decisions, tc.fingerprint
	run.c.OnDecision(func(d canary.Decision) {
		share.Set(run.c.Status().Share)
		by := "auto"
		if d.By != "auto" {
			by = "operator"
		}
		m.CanaryDecisions.WithLabelValues(name, string(d.State), by).Inc()
		log.Warn("canary decided", "task", name, "decision", string(d.State), "by", d.By,
			"candidate", version, "incumbent", inc.version, "reasons", d.Reasons)
		if decisions != nil {
			decisions.Save(name, fp, d)
		}
	})
	return tc, nil
}

// tierVersion is the prompt version of a tier as envelopes and metrics name it:
// task/provider, and /version when the template declares one.
func tierVersion(task, provider string, tpl *prompt.Template) string {
	version := task + "/" + provider
	if v := tpl.Version(); v != "" {
		version += "/" + v
	}
	return version
}

// promptAnswers binds the afloat_prompt_answers_total series of tr's prompt version.
func (e *Engine) promptAnswers(tr *tier, task, provider, pv string) {
	tr.answers = map[string]prometheus.Counter{}
	e.prompts.Init(task, provider, pv)
	for _, r := range telemetry.PromptResults() {
		tr.answers[r] = e.prompts.Answers.WithLabelValues(task, provider, pv, r)
	}
	tr.answered = tr.answers["ok"]
}

// pick returns the tier to ask in place of tr for this call: the candidate when tr is the
// canaried tier and the call falls in the candidate's share.
func (c *taskCanary) pick(ctx context.Context, tr *tier) *tier {
	if c == nil || tr.idx != c.tier {
		return tr
	}
	c.sync()
	key := afloat.RequestID(ctx)
	if !c.byRequest {
		if tenant := Tenant(ctx); tenant != "" {
			key = tenant
		}
	}
	if key == "" {
		// No tenant and no request id (a library call): each call is its own request.
		key = strconv.FormatUint(rand.Uint64(), 36)
	}
	if c.run.c.Pick(key) == canary.Candidate {
		return &c.cand
	}
	return tr
}

// observe records one ask of the canaried tier on its arm: what the attempts of log from
// first on came to. An ask that no attempt reached the provider in (a gate skipped the tier)
// says nothing of the arm. An ask the hedge below it won is an answer at least as slow as it
// took: its latency counts, as a lower bound, so that a slow arm's tail is not hidden by the
// hedges it loses; it is neither a failure nor a violation. A hedge that lost, cut when it
// had barely begun, says nothing.
func (c *taskCanary) observe(ctx context.Context, tr *tier, log *callLog, first int, cost float64, took time.Duration, ok bool) {
	if c == nil || tr.idx != c.tier {
		return
	}
	arm := canary.Incumbent
	if tr == &c.cand {
		arm = canary.Candidate
	}
	if !ok && context.Cause(ctx) == errHedgeLost {
		if len(log.attempts) > first && !isHedge(ctx) {
			c.run.c.Observe(arm, canary.Observation{Latency: took})
		}
		return
	}
	if !c.costs {
		cost = 0
	}
	o := canary.Observation{Latency: took, Cost: cost, Failed: !ok}
	asked := false
	for i, a := range log.attempts[first:] {
		switch a.Outcome {
		case afloat.OutcomeCircuitOpen, afloat.OutcomeBulkhead:
			continue
		case afloat.OutcomeDeadline:
			if !ok {
				continue // cut by the budget or a hedge, not the arm's doing
			}
		}
		asked = true
		if i == 0 && a.Outcome == afloat.OutcomeContractViolation {
			o.Violation = true
		}
		if a.Reask {
			o.Reask = true
		}
	}
	if asked {
		c.run.c.Observe(arm, o)
	}
}

// CanaryStatus is a task's canary as /admin/status shows it.
type CanaryStatus struct {
	canary.Status
	Tier int
	// IncumbentVersion and CandidateVersion are the two arms' prompt versions.
	IncumbentVersion, CandidateVersion string
}

// Canary returns the status of the task's canary, deciding it first if it is due; ok is
// false when the task has none.
func (t *Task) Canary() (CanaryStatus, bool) {
	c := t.canary
	if c == nil {
		return CanaryStatus{}, false
	}
	c.sync()
	c.run.c.Check()
	return CanaryStatus{Status: c.run.c.Status(), Tier: c.tier, IncumbentVersion: c.run.setting.Incumbent, CandidateVersion: c.run.setting.Candidate}, true
}

// ErrNoCanary: the task has no canary.
var ErrNoCanary = errors.New("the task has no canary")

// SetCanary is an operator's decision on the task's canary: state promoted, rolled_back,
// pinned (the share stays, nothing is decided automatically) or running (unpinned); by
// names the operator. It returns canary.ErrDecided when the canary was decided already.
func (t *Task) SetCanary(state canary.State, by string) error {
	c := t.canary
	if c == nil {
		return ErrNoCanary
	}
	c.sync() // a decision the fleet kept is final here too
	var err error
	switch state {
	case canary.Promoted:
		_, err = c.run.c.Promote(by)
	case canary.RolledBack:
		_, err = c.run.c.Rollback(by)
	case canary.Pinned:
		err = c.run.c.Pin(by)
	case canary.Running:
		err = c.run.c.Unpin(by)
	default:
		err = fmt.Errorf("unknown canary state %q (want promoted, rolled_back, pinned or running)", state)
	}
	return err
}
