package cascade

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// candidatePrompt is a new version of the primary's prompt, which the fakes can tell apart.
func candidatePrompt(t *testing.T) *prompt.Template {
	t.Helper()
	p, err := prompt.Parse("prompts/triage/p0.v2.tmpl", "--- system\nCANDIDATE: triage the ticket as JSON.\n--- user\nSubject: {{.subject}}\nMessage: {{.message}}\n")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// byPrompt answers the incumbent's prompt validly, and the candidate's first asks with a
// contract violation violating of every 10 times (its re-asks validly).
func byPrompt(violating int, candidateAsks *atomic.Int64) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	var firsts atomic.Int64
	return func(_ context.Context, req *afloat.Request, _ int) (*afloat.Response, error) {
		ok := &afloat.Response{Content: validAnswer, Usage: afloat.Usage{InputTokens: 100, OutputTokens: 20}}
		if !strings.HasPrefix(req.Messages[0].Content, "CANDIDATE") {
			return ok, nil
		}
		candidateAsks.Add(1)
		if len(req.Messages) > 2 { // a re-ask
			return ok, nil
		}
		if n := firsts.Add(1) - 1; n%10 < int64(violating) {
			return &afloat.Response{Content: "I think it is a technical issue.", Usage: ok.Usage}, nil
		}
		return ok, nil
	}
}

// callMany makes calls calls, each its own request, and counts the envelopes by prompt
// version.
func callMany(t *testing.T, task *Task, from, calls int) map[string]int {
	t.Helper()
	versions := map[string]int{}
	for i := from; i < from+calls; i++ {
		ctx := afloat.WithRequestID(context.Background(), fmt.Sprintf("req-%d", i))
		res, err := task.RunJSON(ctx, ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != afloat.SourceModel || res.Degraded {
			t.Fatalf("call %d: source %s degraded %v: a canary never degrades a call", i, res.Source, res.Degraded)
		}
		versions[res.PromptVersion]++
	}
	return versions
}

const (
	incumbentVersion = "triage/p0/v1"
	candidateVersion = "triage/p0/v2"
)

// A candidate prompt whose answers violate the contract 30 % of the time is rolled back once
// the window has passed, with the figures recorded; until then it takes its share of the
// calls and no more, and afterwards none.
func TestCanaryRollsBackAViolatingCandidate(t *testing.T) {
	var asks atomic.Int64
	fx := newFixture(t, nil, byPrompt(3, &asks))
	task := fx.task(t, func(c *TaskConfig) {
		c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true,
			Config: canary.Config{Share: 0.2, Window: 30 * time.Minute, MinCalls: 100}}
	})

	versions := callMany(t, task, 0, 1000)
	if share := float64(versions[candidateVersion]) / 1000; share < 0.15 || share > 0.25 {
		t.Fatalf("the candidate answered %v of the calls at share 0.2: %v", share, versions)
	}
	if versions[incumbentVersion]+versions[candidateVersion] != 1000 {
		t.Fatalf("envelopes name versions %v", versions)
	}
	st, _ := task.Canary()
	if st.State != canary.Running {
		t.Fatalf("decided before the window: %s", st.State)
	}
	if st.IncumbentVersion != incumbentVersion || st.CandidateVersion != candidateVersion || st.Tier != 0 {
		t.Fatalf("status names %s vs %s on tier %d", st.IncumbentVersion, st.CandidateVersion, st.Tier)
	}

	fx.clock.Advance(31 * time.Minute)
	st, _ = task.Canary()
	if st.State != canary.RolledBack || st.Share != 0 || st.Decision == nil {
		t.Fatalf("after the window: state %s share %v decision %v; want rolled back", st.State, st.Share, st.Decision)
	}
	d := st.Decision
	if d.By != "auto" || d.Candidate.ViolationRate < 0.25 || d.Candidate.ViolationRate > 0.35 || d.Incumbent.ViolationRate != 0 {
		t.Fatalf("decision %+v: want auto, the candidate's violation rate near 30 %%, the incumbent's 0", d)
	}
	if d.Candidate.ReaskRate < 0.25 || d.Candidate.Calls != versions[candidateVersion] || d.Incumbent.Calls != versions[incumbentVersion] {
		t.Fatalf("decision figures %+v vs the calls each arm answered %v", d, versions)
	}
	if !strings.Contains(strings.Join(d.Reasons, "\n"), "violation rate") {
		t.Fatalf("the reasons do not name the violation rate: %q", d.Reasons)
	}

	before := asks.Load()
	after := callMany(t, task, 1000, 200)
	if after[incumbentVersion] != 200 || asks.Load() != before {
		t.Fatalf("after the rollback %v answered, and the candidate was asked %d times more", after, asks.Load()-before)
	}
}

// A candidate as good as the incumbent is promoted: it takes every call.
func TestCanaryPromotesAGoodCandidate(t *testing.T) {
	var asks atomic.Int64
	fx := newFixture(t, nil, byPrompt(0, &asks))
	task := fx.task(t, func(c *TaskConfig) {
		c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true,
			Config: canary.Config{Share: 0.1, Window: 30 * time.Minute, MinCalls: 50}}
	})
	versions := callMany(t, task, 0, 1000)
	if versions[candidateVersion] < 50 || versions[candidateVersion] > 150 {
		t.Fatalf("share 0.1 sent %v", versions)
	}
	fx.clock.Advance(30*time.Minute + time.Second)
	callMany(t, task, 1000, 1) // the call after the window decides
	st, _ := task.Canary()
	if st.State != canary.Promoted || st.Share != 1 || st.Decision == nil || st.Decision.By != "auto" {
		t.Fatalf("state %s share %v decision %+v; want promoted", st.State, st.Share, st.Decision)
	}
	if after := callMany(t, task, 2000, 100); after[candidateVersion] != 100 {
		t.Fatalf("after the promotion %v answered", after)
	}
}

// A canary of a provider (another model) for the primary's tier, split by tenant: a tenant
// sees one arm; the backup tier is untouched.
func TestCanaryOfAProviderByTenant(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer), answer(validAnswer), answer(validAnswer))
	task := fx.task(t, func(c *TaskConfig) {
		c.Cascade = c.Cascade[:2]
		c.Canary = &Canary{Provider: "p2", Config: canary.Config{Share: 0.5, Window: time.Hour}}
	})
	seen := map[string]string{}
	for i := range 400 {
		tenant := fmt.Sprintf("tenant-%d", i%40)
		ctx := afloat.WithRequestID(WithTenant(context.Background(), tenant), fmt.Sprint(i))
		res, err := task.RunJSON(ctx, ticket)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[tenant]; ok && prev != res.Provider {
			t.Fatalf("tenant %s was answered by %s and by %s: a tenant sees one arm", tenant, prev, res.Provider)
		}
		seen[tenant] = res.Provider
		if res.Tier != 0 || (res.Provider == "p2") != (res.PromptVersion == "triage/p2/v1") {
			t.Fatalf("envelope: tier %d provider %s version %s", res.Tier, res.Provider, res.PromptVersion)
		}
	}
	if fx.fakes["p1"].calls.Load() != 0 {
		t.Fatal("the backup was asked while the primary's arms answered")
	}
	if fx.fakes["p2"].calls.Load() == 0 || fx.fakes["p0"].calls.Load() == 0 {
		t.Fatalf("both arms answer: p0 %d, p2 %d calls", fx.fakes["p0"].calls.Load(), fx.fakes["p2"].calls.Load())
	}
}

// An operator rolls a canary back by hand, and then it cannot be decided again.
func TestCanaryByHand(t *testing.T) {
	var asks atomic.Int64
	fx := newFixture(t, nil, byPrompt(0, &asks))
	task := fx.task(t, func(c *TaskConfig) {
		c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true, Config: canary.Config{Share: 0.5, Window: time.Hour}}
	})
	if err := task.SetCanary(canary.Pinned, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := task.SetCanary(canary.RolledBack, "alice"); err != nil {
		t.Fatal(err)
	}
	st, _ := task.Canary()
	if st.State != canary.RolledBack || st.Decision.By != "alice" {
		t.Fatalf("state %s by %s", st.State, st.Decision.By)
	}
	if err := task.SetCanary(canary.Promoted, "bob"); err != canary.ErrDecided {
		t.Fatalf("promoting a rolled-back canary: %v", err)
	}
	plain := fx.task(t, func(c *TaskConfig) { c.Name = "plain" })
	if _, ok := plain.Canary(); ok || plain.SetCanary(canary.Promoted, "bob") != ErrNoCanary {
		t.Fatal("a task without a canary")
	}
}

// A candidate that is the incumbent, or a tier that does not exist, is refused.
func TestCanaryRefused(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	for name, c := range map[string]*Canary{
		"same":    {Provider: "p0", Config: canary.Config{Share: 0.1, Window: time.Hour}},
		"tier":    {Tier: 3, Provider: "p0", Config: canary.Config{Share: 0.1, Window: time.Hour}},
		"unknown": {Provider: "nobody", Config: canary.Config{Share: 0.1, Window: time.Hour}},
		"share":   {Prompt: candidatePrompt(t), Config: canary.Config{Share: 2, Window: time.Hour}},
	} {
		_, err := fx.eng.Task(TaskConfig{Name: name, Criticality: afloat.Enrichment, Schema: []byte(triageSchema),
			Cascade: []Tier{{Provider: "p0", Prompt: mustPrompt(t, "prompts/triage/p0.v1.tmpl")}}, Canary: c})
		if err == nil {
			t.Errorf("%s: a canary that cannot work was taken", name)
		}
	}
}

// A reload that leaves the canary as it was keeps its figures and its decision.
func TestCanaryCarriedOverByAReload(t *testing.T) {
	var asks atomic.Int64
	fx := newFixture(t, nil, byPrompt(0, &asks))
	mod := func(c *TaskConfig) {
		c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true, Config: canary.Config{Share: 0.5, Window: time.Hour}}
	}
	task := fx.task(t, mod)
	callMany(t, task, 0, 40)
	before, _ := task.Canary()

	var cfg Config
	cfg.Clock, cfg.Previous = fx.clock, fx.eng
	for _, name := range fx.eng.Providers() {
		cfg.Providers = append(cfg.Providers, ProviderConfig{Name: name, Provider: fx.fakes[name], Retry: RetryConfig{BudgetFloor: -1}})
	}
	next, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx2 := &fixture{clock: fx.clock, eng: next, fakes: fx.fakes}
	again := fx2.task(t, mod)
	after, _ := again.Canary()
	if after.Incumbent.Calls+after.Candidate.Calls != 40 || !after.Started.Equal(before.Started) {
		t.Fatalf("the reload lost the canary's figures: %+v, before %+v", after.Status, before.Status)
	}
	changed := fx2.task(t, func(c *TaskConfig) {
		mod(c)
		c.Name = "triage2"
	})
	if st, _ := changed.Canary(); st.Incumbent.Calls != 0 {
		t.Fatal("another task's canary starts afresh")
	}
}

// An arm that loses to the hedge below it still counts, its latency as a lower bound: a slow
// candidate whose every call is hedged away is seen as slow, and rolled back.
func TestCanaryCountsTheHedgesItLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowCandidate := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			if strings.HasPrefix(req.Messages[0].Content, "CANDIDATE") {
				return after(2*time.Second, answer(validAnswer))(ctx, req, n)
			}
			return after(50*time.Millisecond, answer(validAnswer))(ctx, req, n)
		}
		fx := newFixture(t, realClock, slowCandidate, after(50*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, func(c *TaskConfig) {
			c.Budget = 5 * time.Second
			c.Hedge = Hedge{After: 300 * time.Millisecond, Max: 1}
			c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true,
				Config: canary.Config{Share: 0.5, Window: time.Minute, MinCalls: 5}}
		})
		hedgedAway, answered := 0, 0 // the candidate's calls the hedge won, and those it answered
		for i := range 40 {
			ctx := afloat.WithRequestID(context.Background(), fmt.Sprintf("req-%d", i))
			res, err := task.RunJSON(ctx, ticket)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case res.Provider == "p1":
				hedgedAway++
			case res.PromptVersion == candidateVersion:
				answered++
			}
		}
		st, _ := task.Canary()
		if hedgedAway < 5 || st.Candidate.Calls != hedgedAway+answered {
			t.Fatalf("the candidate answered %d calls and lost %d to the hedge; its figures count %d: want them all", answered, hedgedAway, st.Candidate.Calls)
		}
		if st.Candidate.P95 < 300*time.Millisecond || st.Candidate.FailureRate != 0 {
			t.Fatalf("candidate figures %+v: want its hedged-away calls counted, at least 300ms each, none a failure", st.Candidate)
		}
		time.Sleep(time.Minute) // synctest: the window passes
		st, _ = task.Canary()
		if st.State != canary.RolledBack || !strings.Contains(strings.Join(st.Decision.Reasons, "\n"), "p95 latency") {
			t.Fatalf("state %s, decision %+v; want rolled back on its p95", st.State, st.Decision)
		}
	})
}

// A reload that drops a canary removes its series (so that the rolled-back alert resolves)
// and leaves the old canary deciding nothing; one that changes its settings starts afresh.
func TestCanaryReloadDropsOrRenews(t *testing.T) {
	var asks atomic.Int64
	fx := newFixture(t, nil, byPrompt(0, &asks))
	withCanary := func(share float64) func(*TaskConfig) {
		return func(c *TaskConfig) {
			c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true, Config: canary.Config{Share: share, Window: time.Hour}}
		}
	}
	old := fx.task(t, withCanary(0.5))
	callMany(t, old, 0, 20)
	if err := old.SetCanary(canary.RolledBack, "alice"); err != nil {
		t.Fatal(err)
	}
	share := func() float64 { return testutil.ToFloat64(fx.eng.Metrics().CanaryShare.WithLabelValues("triage")) }
	if share() != 0 {
		t.Fatalf("afloat_canary_share %v after the rollback", share())
	}

	reload := func(mod func(*TaskConfig)) (*Engine, *Task) {
		cfg := Config{Clock: fx.clock, Previous: fx.eng, Metrics: fx.eng.Metrics()}
		for _, name := range fx.eng.Providers() {
			cfg.Providers = append(cfg.Providers, ProviderConfig{Name: name, Provider: fx.fakes[name], Retry: RetryConfig{BudgetFloor: -1}})
		}
		next, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		task := (&fixture{clock: fx.clock, eng: next, fakes: fx.fakes}).task(t, mod)
		next.TakeOver(fx.eng)
		fx.eng = next
		return next, task
	}
	_, renewed := reload(withCanary(0.2))
	if st, _ := renewed.Canary(); st.State != canary.Running || st.Share != 0.2 || st.Incumbent.Calls != 0 {
		t.Fatalf("a canary of new settings: %+v; want it afresh", st.Status)
	}
	if share() != 0.2 {
		t.Fatalf("afloat_canary_share %v, want the new canary's 0.2", share())
	}
	_, plain := reload(nil)
	if _, ok := plain.Canary(); ok {
		t.Fatal("the reload dropped the canary, and the task still has one")
	}
	if n := testutil.CollectAndCount(fx.eng.Metrics().CanaryShare); n != 0 {
		t.Fatalf("afloat_canary_share has %d series after the canary was dropped", n)
	}
}

// A candidate whose prompt reads a field the task's calls need not carry is refused: every
// call would have to carry it.
func TestCanaryCandidateReadsNoNewField(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	p, err := prompt.Parse("prompts/triage/p0.v9.tmpl", "--- user\n{{.subject}} {{.customer_tier}}\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fx.eng.Task(TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema),
		Cascade: []Tier{{Provider: "p0", Prompt: mustPrompt(t, "prompts/triage/p0.v1.tmpl")}},
		Canary:  &Canary{Prompt: p, Config: canary.Config{Share: 0.1, Window: time.Hour}}})
	if err == nil || !strings.Contains(err.Error(), "customer_tier") {
		t.Fatalf("a candidate reading a new field: %v", err)
	}
}

// memDecisions keeps canary decisions in memory, as a state backend would across processes.
type memDecisions struct {
	mu   sync.Mutex
	kept map[string]canary.Decision // by task + "/" + fingerprint
}

func (m *memDecisions) Decision(task, fp string) (canary.Decision, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.kept[task+"/"+fp]
	return d, ok
}

func (m *memDecisions) Save(task, fp string, d canary.Decision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.kept[task+"/"+fp]; !ok { // the first decision of a canary stands, as in the state backends
		m.kept[task+"/"+fp] = d
	}
}

// A canary's decision is kept beyond the process: an engine started afresh (a restart, or
// another replica) over the same decisions finds its canary of the same settings decided,
// at once or on its next call; a canary of other settings is another one.
func TestCanaryDecisionKeptAcrossProcesses(t *testing.T) {
	var asks atomic.Int64
	store := &memDecisions{kept: map[string]canary.Decision{}}
	withCanary := func(share float64) func(*TaskConfig) {
		return func(c *TaskConfig) {
			c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true, Config: canary.Config{Share: share, Window: time.Hour}}
		}
	}
	process := func() (*fixture, *Task) {
		fx := newFixture(t, func(c *Config) { c.Decisions = store }, byPrompt(0, &asks))
		return fx, fx.task(t, withCanary(0.5))
	}
	_, other := process() // a replica started before the decision
	_, late := process()  // one that decides otherwise, its save not landed yet
	if err := late.canary.run.c.Restore(canary.Decision{State: canary.Promoted, By: "auto"}); err != nil {
		t.Fatal(err)
	}
	_, task := process()
	if err := task.SetCanary(canary.RolledBack, "alice"); err != nil {
		t.Fatal(err)
	}

	_, restarted := process()
	if st, _ := restarted.Canary(); st.State != canary.RolledBack || st.Share != 0 || st.Decision.By != "alice" {
		t.Fatalf("after a restart: %+v; want alice's rollback", st.Status)
	}
	before := asks.Load()
	callMany(t, other, 0, 50) // the other replica's next calls put the decision in force
	if asks.Load() != before {
		t.Fatalf("the other replica still asked the rolled-back candidate %d times", asks.Load()-before)
	}
	if st, _ := other.Canary(); st.State != canary.RolledBack {
		t.Fatalf("the other replica's canary: %s", st.State)
	}
	// A replica that decided otherwise before it heard (here: promoted on its own) takes the
	// decision kept first; an operator's decision on a replica that has not heard yet is
	// refused as decided.
	if st, _ := late.Canary(); st.State != canary.RolledBack || st.Decision.By != "alice" {
		t.Fatalf("a replica that had decided otherwise: %s by %s; want alice's rollback", st.State, st.Decision.By)
	}
	_, unheard := process()
	if err := unheard.SetCanary(canary.Promoted, "bob"); err != canary.ErrDecided {
		t.Fatalf("an operator's promotion of a canary the fleet rolled back: %v; want ErrDecided", err)
	}
	fx, _ := process()
	renewed := fx.task(t, func(c *TaskConfig) { c.Name = "renewed"; withCanary(0.5)(c) })
	if st, _ := renewed.Canary(); st.State != canary.Running {
		t.Fatalf("another task's canary: %s", st.State)
	}
	changed := (func() *Task {
		fx := newFixture(t, func(c *Config) { c.Decisions = store }, byPrompt(0, &asks))
		return fx.task(t, withCanary(0.2))
	})()
	if st, _ := changed.Canary(); st.State != canary.Running {
		t.Fatalf("a canary of other settings: %s; want it afresh", st.State)
	}
}

// The fingerprint of a canary's settings is pinned: every replica, and every later version of
// afloat, must name a kept decision alike.
func TestCanaryFingerprintIsStable(t *testing.T) {
	s := canarySetting{Tier: 0, Incumbent: "triage/p0/v1", Candidate: "triage/p0/v2", ByRequest: true, Share: 0.1,
		Window: 30 * time.Minute, MinCalls: 200, IncumbentProv: "p0", CandidateProv: "p0",
		Thresholds: canary.Thresholds{ViolationRate: 0.02, FailureRate: 0.05, ReaskRate: 0.05, P95: 0.25, Cost: 0.25}}
	const want = "74e99363346781c2"
	if got := s.fingerprint(); got != want {
		t.Fatalf("fingerprint %s, want %s: a change here reopens every canary decided before", got, want)
	}
	s.Share = 0.2
	if s.fingerprint() == want {
		t.Fatal("another share, the same fingerprint")
	}
}
