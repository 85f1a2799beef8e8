package cascade

import (
	"context"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// reloadFixture is an engine over p0, p1, p2 (each with a background probe) and a triage
// task over them, with p0's breaker forced open and a few answers from p1 measured.
func reloadFixture(t *testing.T) (*fixture, *Task, []ProviderConfig) {
	t.Helper()
	var cfgs []ProviderConfig
	fx := newFixture(t, func(c *Config) {
		for i := range c.Providers {
			c.Providers[i].Probe = ProbeCompletion
		}
		cfgs = c.Providers
	}, failWith(503, afloat.Unavailable), answer(validAnswer), answer(validAnswer))
	task := fx.task(t, nil)
	if err := fx.eng.Breaker("p0").Force(context.Background(), breaker.StateOpen); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil || res.Provider != "p1" {
			t.Fatalf("got %+v, %v; want p1's answer", res, err)
		}
	}
	return fx, task, cfgs
}

// TestReloadCarriesOverUnchangedProviders: a provider given again with the same adapter and
// settings keeps its breaker (open, as it was), its latency estimates and its probe; one
// whose settings changed starts afresh; the task keeps its fallback share; TakeOver drops the
// series of the provider that left and stops only its probe.
func TestReloadCarriesOverUnchangedProviders(t *testing.T) {
	fx, old, cfgs := reloadFixture(t)
	prev := fx.eng
	changed := cfgs[1]
	changed.MaxInFlight = 7
	added := ProviderConfig{Name: "p3", Provider: &fake{name: "p3", fn: answer(validAnswer)}, Breaker: breaker.Config{Rand: noJitter}}
	next, err := New(Config{Clock: fx.clock, Previous: prev, Providers: []ProviderConfig{cfgs[0], changed, added}})
	if err != nil {
		t.Fatal(err)
	}
	if next.Metrics() != prev.Metrics() {
		t.Fatal("the new engine took metrics of its own: series would split")
	}
	if next.Breaker("p0") != prev.Breaker("p0") {
		t.Fatal("p0 is unchanged and got a new breaker")
	}
	if st := next.Breaker("p0").State(context.Background()); st != breaker.StateOpen {
		t.Fatalf("p0's breaker is %v after the reload, want open", st)
	}
	if next.Breaker("p1") == prev.Breaker("p1") {
		t.Fatal("p1's max_in_flight changed and it kept its breaker")
	}
	fresh := ProviderConfig{Name: "p0", Provider: &fake{name: "p0", fn: answer(validAnswer)}}
	if prev.carryOver(fresh) != nil {
		t.Fatal("another adapter under the same name was carried over")
	}

	task, err := next.Task(TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema), Heuristic: triageRules,
		Cascade: []Tier{{Provider: "p0", Prompt: mustPrompt(t, "p0.v2.tmpl")}, {Provider: "p1", Prompt: mustPrompt(t, "p1.v1.tmpl")}}})
	if err != nil {
		t.Fatal(err)
	}
	oldP0, _ := prev.Latency().Lookup("p0", "triage")
	newP0, _ := next.Latency().Lookup("p0", "triage")
	if oldP0 == nil || newP0 != oldP0 {
		t.Fatal("p0's latency estimate for triage was not carried over")
	}
	oldP1, _ := prev.Latency().Lookup("p1", "triage")
	if newP1, _ := next.Latency().Lookup("p1", "triage"); newP1 == nil || newP1 == oldP1 {
		t.Fatal("p1 changed and kept its latency estimate")
	}
	if got, want := task.FallbackShare(), old.FallbackShare(); want != 1 || got != want {
		t.Fatalf("fallback share %v after the reload, want %v (every call fell back to p1)", got, want)
	}
	if got, want := task.Spend().Answers, old.Spend().Answers; want != 3 || got != want {
		t.Fatalf("spend answers %d after the reload, want %d", got, want)
	}

	next.TakeOver(prev)
	if n := testutil.CollectAndCount(next.Metrics().CircuitState); n != 3 {
		t.Fatalf("%d circuit state series after the reload, want 3 (p0, p1, p3; p2 left)", n)
	}
	if got := next.Metrics().CircuitState.Value("p0"); got != float64(breaker.StateOpen) {
		t.Fatalf("afloat_circuit_state{p0} = %v, want open", got)
	}
	if !stopped(prev.upstreams["p2"].probe) || !stopped(prev.upstreams["p1"].probe) {
		t.Fatal("the probes of the providers the reload replaced go on")
	}
	if stopped(next.upstreams["p0"].probe) {
		t.Fatal("closing the old engine stopped the probe of the provider carried over")
	}
	_ = next.Close()
	if !stopped(next.upstreams["p0"].probe) {
		t.Fatal("the last engine holding p0 closed and its probe goes on")
	}
}

// TestReloadThatFailsLeavesThePreviousEngine: an engine built over another and closed without
// taking over (a reload that failed) stops none of the previous engine's probes and leaves
// its series reading the previous breakers.
func TestReloadThatFailsLeavesThePreviousEngine(t *testing.T) {
	fx, _, cfgs := reloadFixture(t)
	prev := fx.eng
	changed := cfgs[0]
	changed.MaxInFlight = 3
	next, err := New(Config{Clock: fx.clock, Previous: prev, Providers: []ProviderConfig{changed, cfgs[1]}})
	if err != nil {
		t.Fatal(err)
	}
	_ = next.Close()
	for _, name := range []string{"p0", "p1", "p2"} {
		if stopped(prev.upstreams[name].probe) {
			t.Fatalf("a discarded successor stopped %s's probe", name)
		}
	}
	if got := prev.Metrics().CircuitState.Value("p0"); got != float64(breaker.StateOpen) {
		t.Fatalf("afloat_circuit_state{p0} = %v, want the previous breaker's open", got)
	}
}

func stopped(p *prober) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}
