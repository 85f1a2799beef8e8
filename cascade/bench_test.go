package cascade

import (
	"context"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cache"
	"github.com/jonboulle/clockwork"
)

// static answers at once with a prebuilt response, so that a benchmark measures the
// cascade's own cost and none of a provider's.
type static struct{ resp *afloat.Response }

func (s static) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	return s.resp, nil
}

func benchTask(b *testing.B, tiers int) (*Engine, *Task) {
	b.Helper()
	return benchTaskWith(b, tiers, nil)
}

// benchTaskWith is benchTask with the task's config changed by mod.
func benchTaskWith(b *testing.B, tiers int, mod func(*TaskConfig)) (*Engine, *Task) {
	b.Helper()
	cfg := Config{Clock: clockwork.NewRealClock()}
	tc := TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema), Heuristic: triageRules}
	for i := range tiers {
		name := "p" + string(rune('0'+i))
		cfg.Providers = append(cfg.Providers, ProviderConfig{Name: name,
			Provider: static{&afloat.Response{Content: validAnswer, Usage: afloat.Usage{InputTokens: 120, OutputTokens: 30}}},
			Price:    Price{InputPer1M: 1.5, OutputPer1M: 1.5, Currency: "USD"}})
		tc.Cascade = append(tc.Cascade, Tier{Provider: name, Prompt: mustPrompt(b, "triage/"+name+".v1.tmpl")})
	}
	if mod != nil {
		mod(&tc)
	}
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	task, err := e.Task(tc)
	if err != nil {
		b.Fatal(err)
	}
	return e, task
}

// BenchmarkHappyPath is one call answered by tier 0: flags, gates, template rendering, the
// call to a provider that answers at once, contract check and schema validation, metrics.
func BenchmarkHappyPath(b *testing.B) {
	_, task := benchTask(b, 3)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := task.RunJSON(ctx, ticket)
		if err != nil || res.Source != afloat.SourceModel {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkOpenCircuitCall is a whole call whose only tier's circuit is open: flags, the
// skip, and the heuristic fallback with its validation.
func BenchmarkOpenCircuitCall(b *testing.B) {
	e, task := benchTask(b, 1)
	ctx := context.Background()
	if err := e.Breaker("p0").Force(ctx, breaker.StateOpen); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := task.RunJSON(ctx, ticket)
		if err != nil || res.Source != afloat.SourceHeuristic {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkSkipOpenCircuit is the cost of the circuit gate skipping one open tier: what
// every call pays per broken provider during an outage.
func BenchmarkSkipOpenCircuit(b *testing.B) {
	e, task := benchTask(b, 1)
	ctx := context.Background()
	if err := e.Breaker("p0").Force(ctx, breaker.StateOpen); err != nil {
		b.Fatal(err)
	}
	tr := &task.tiers[0]
	req := &afloat.Request{}
	b.ReportAllocs()
	for b.Loop() {
		log := callLog{attempts: make([]afloat.Attempt, 0, 1)}
		if out := e.call(ctx, &log, spec{tr: tr, req: req}, nil); out.outcome != afloat.OutcomeCircuitOpen {
			b.Fatal(out.outcome)
		}
	}
}

// benchCache is an answer cache for a benchmark, bounded well above what it puts.
func benchCache(b *testing.B, fresh bool) func(*TaskConfig) {
	c, err := cache.New(cache.Options{MaxEntries: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return func(tc *TaskConfig) { tc.Cache = &Cache{Store: c, TTL: time.Hour, Fresh: fresh} }
}

// BenchmarkHappyPathCached is BenchmarkHappyPath with an answer cache (serve: on_error):
// what the cache adds to a call tier 0 answers is its key (the input encoded and hashed)
// and the store of the answer.
func BenchmarkHappyPathCached(b *testing.B) {
	_, task := benchTaskWith(b, 3, benchCache(b, false))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := task.RunJSON(ctx, ticket)
		if err != nil || res.Source != afloat.SourceModel {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkFreshHit is a call answered from the cache before any tier (serve:
// always_fresh): the key and the lookup, no provider call.
func BenchmarkFreshHit(b *testing.B) {
	_, task := benchTaskWith(b, 3, benchCache(b, true))
	ctx := context.Background()
	if _, err := task.RunJSON(ctx, ticket); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := task.RunJSON(ctx, ticket)
		if err != nil || res.Source != afloat.SourceCache {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkOutageFromCache is a call whose only tier's circuit is open, answered from the
// cache: BenchmarkOpenCircuitCall with the cache instead of the heuristic.
func BenchmarkOutageFromCache(b *testing.B) {
	e, task := benchTaskWith(b, 1, benchCache(b, false))
	ctx := context.Background()
	if _, err := task.RunJSON(ctx, ticket); err != nil {
		b.Fatal(err)
	}
	if err := e.Breaker("p0").Force(ctx, breaker.StateOpen); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := task.RunJSON(ctx, ticket)
		if err != nil || res.Source != afloat.SourceCache {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkCacheAdds is what the cache (serve: on_error) adds to a call tier 0 answered,
// alone: the key (the input's canonical form, hashed) and the store of the answer.
func BenchmarkCacheAdds(b *testing.B) {
	_, task := benchTaskWith(b, 3, benchCache(b, false))
	ctx := context.Background()
	tr := &task.tiers[0]
	val := []byte(validAnswer)
	b.ReportAllocs()
	for b.Loop() {
		kc := task.cached(ctx, ticket)
		if kc.c == nil {
			b.Fatal("no key")
		}
		kc.keep(ctx, tr, tr.version, val)
	}
}
