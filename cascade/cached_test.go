package cascade

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cache"
	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/shed"
)

// numbered answers "ticket N" with is_urgent N/100, so that a test can tell which input an
// answer was given to; while down is set it fails as a 503.
func numbered(down *atomic.Bool) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	re := regexp.MustCompile(`ticket (\d+)`)
	return func(_ context.Context, req *afloat.Request, _ int) (*afloat.Response, error) {
		if down.Load() {
			return nil, &afloat.ProviderError{Provider: "fake", Status: 503, Kind: afloat.Unavailable}
		}
		m := re.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content)
		if m == nil {
			return &afloat.Response{Content: validAnswer}, nil
		}
		n, _ := strconv.Atoi(m[1])
		return &afloat.Response{Content: fmt.Sprintf(`{"department":"billing","is_urgent":%g,"urgency_score":1}`, float64(n)/100),
			Usage: afloat.Usage{InputTokens: 100, OutputTokens: 20}}, nil
	}
}

func ticketN(n int) afloat.Input {
	return afloat.Input{"subject": fmt.Sprintf("ticket %d", n), "message": "the invoice is wrong"}
}

func newCache(t *testing.T, fx *fixture, max int) *cache.Cache {
	t.Helper()
	c, err := cache.New(cache.Options{MaxEntries: max, Clock: fx.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func urgency(t *testing.T, v json.RawMessage) float64 {
	t.Helper()
	var out struct {
		IsUrgent float64 `json:"is_urgent"`
	}
	if err := json.Unmarshal(v, &out); err != nil {
		t.Fatalf("answer %s: %v", v, err)
	}
	return out.IsUrgent
}

// The outage test of the answer cache: inputs repeat (20 distinct, 200 calls) and every
// provider is down. Each input answered before is answered from the cache, with the age it
// has; the others get the heuristic; another tenant never gets the first tenant's answers;
// and past the TTL nothing is served.
func TestCacheAnswersSeenInputsDuringAnOutage(t *testing.T) {
	var down atomic.Bool
	fx := newFixture(t, nil, numbered(&down), numbered(&down))
	store := newCache(t, fx, 1000)
	task := fx.task(t, func(c *TaskConfig) { c.Cache = &Cache{Store: store, TTL: 24 * time.Hour} })
	tenantA := WithTenant(context.Background(), "tenant-a")
	tenantB := WithTenant(context.Background(), "tenant-b")

	answeredAt := fx.clock.Now()
	for n := range 10 { // inputs 0–9 are seen, by tenant A only
		res, err := task.RunJSON(tenantA, ticketN(n))
		if err != nil || res.Source != afloat.SourceModel {
			t.Fatalf("healthy call %d: %v, source %s", n, err, res.Source)
		}
	}
	if got := store.Len(); got != 10 {
		t.Fatalf("the cache holds %d answers after 10 calls, want 10", got)
	}

	down.Store(true)
	fx.clock.Advance(3 * time.Hour)
	bySource := map[afloat.Source]int{}
	for i := range 200 {
		n := i % 20
		res, err := task.RunJSON(tenantA, ticketN(n))
		if err != nil {
			t.Fatal(err)
		}
		bySource[res.Source]++
		if n < 10 {
			if res.Source != afloat.SourceCache || !res.Degraded {
				t.Fatalf("seen input %d: source %s degraded %v, want cache, degraded", n, res.Source, res.Degraded)
			}
			if !res.CachedAt.Equal(answeredAt) {
				t.Fatalf("seen input %d: cached_at %v, want %v (answered 3h ago)", n, res.CachedAt, answeredAt)
			}
			if got := urgency(t, res.Value); got != float64(n)/100 {
				t.Fatalf("seen input %d got the answer of another input: is_urgent %v", n, got)
			}
			if res.PromptVersion != "triage/p0/v1" || res.Provider != "p0" {
				t.Fatalf("a cached answer names who gave it: %s %s", res.Provider, res.PromptVersion)
			}
			if res.Reason == "" {
				t.Fatal("a cached answer during an outage carries its reason")
			}
		} else if res.Source != afloat.SourceHeuristic {
			t.Fatalf("unseen input %d: source %s, want heuristic", n, res.Source)
		}
	}
	if bySource[afloat.SourceCache] != 100 || bySource[afloat.SourceHeuristic] != 100 {
		t.Fatalf("by source %v, want 100 from the cache and 100 from the heuristic", bySource)
	}

	for n := range 10 {
		res, err := task.RunJSON(tenantB, ticketN(n))
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != afloat.SourceHeuristic {
			t.Fatalf("tenant B got source %s for tenant A's input %d: tenants never share answers", res.Source, n)
		}
	}

	fx.clock.Advance(21*time.Hour + time.Nanosecond) // 24h and 1ns after the answers
	res, err := task.RunJSON(tenantA, ticketN(3))
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != afloat.SourceHeuristic {
		t.Fatalf("an answer older than the TTL was served: source %s, cached_at %v", res.Source, res.CachedAt)
	}
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), "cached_at") {
		t.Fatalf("a heuristic envelope carries cached_at: %s", b)
	}
}

// The envelope of a cached answer says when the model gave it.
func TestCachedEnvelope(t *testing.T) {
	var down atomic.Bool
	fx := newFixture(t, nil, numbered(&down))
	task := fx.task(t, func(c *TaskConfig) { c.Cache = &Cache{Store: newCache(t, fx, 10), TTL: time.Hour} })
	if _, err := task.RunJSON(context.Background(), ticketN(7)); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	fx.clock.Advance(90 * time.Second)
	res, err := task.RunJSON(context.Background(), ticketN(7))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if env["source"] != "cache" || env["degraded"] != true || env["cached_at"] != "2026-11-29T10:00:00Z" {
		t.Fatalf("envelope %s: want source cache, degraded, cached_at 2026-11-29T10:00:00Z", b)
	}
	var back afloat.Result[json.RawMessage]
	if err := json.Unmarshal(b, &back); err != nil || !back.CachedAt.Equal(res.CachedAt) || !back.HasValue() {
		t.Fatalf("the envelope does not read back: %v, %+v", err, back)
	}
}

// serve: always_fresh answers an input seen within the TTL from the cache before any tier
// is asked: not degraded, no provider call, no cost.
func TestCacheAlwaysFresh(t *testing.T) {
	var down atomic.Bool
	fx := newFixture(t, nil, numbered(&down))
	task := fx.task(t, func(c *TaskConfig) { c.Cache = &Cache{Store: newCache(t, fx, 10), TTL: time.Hour, Fresh: true} })
	ctx := context.Background()
	first, err := task.RunJSON(ctx, ticketN(1))
	if err != nil || first.Source != afloat.SourceModel {
		t.Fatalf("first call: %v, %s", err, first.Source)
	}
	again, err := task.RunJSON(ctx, ticketN(1))
	if err != nil {
		t.Fatal(err)
	}
	if again.Source != afloat.SourceCache || again.Degraded || again.Reason != "" || len(again.Attempts) != 0 || again.Usage.Cost != 0 {
		t.Fatalf("a fresh hit: source %s degraded %v reason %q attempts %d cost %v; want cache, not degraded, no attempt",
			again.Source, again.Degraded, again.Reason, len(again.Attempts), again.Usage.Cost)
	}
	if calls := fx.fakes["p0"].calls.Load(); calls != 1 {
		t.Fatalf("the provider was called %d times, want 1", calls)
	}
	if _, err := task.RunJSON(ctx, ticketN(2)); err != nil || fx.fakes["p0"].calls.Load() != 2 {
		t.Fatalf("another input must ask the provider: %v, %d calls", err, fx.fakes["p0"].calls.Load())
	}
	fx.clock.Advance(time.Hour + time.Nanosecond)
	if res, _ := task.RunJSON(ctx, ticketN(1)); res.Source != afloat.SourceModel {
		t.Fatalf("past the TTL the provider answers again, not the cache: %s", res.Source)
	}
}

// An answer of a prompt version the cascade no longer has is never served: the new prompt
// may answer differently.
func TestCacheServesOnlyVersionsInTheCascade(t *testing.T) {
	var down atomic.Bool
	fx := newFixture(t, nil, numbered(&down))
	store := newCache(t, fx, 10)
	v1 := fx.task(t, func(c *TaskConfig) { c.Cache = &Cache{Store: store, TTL: time.Hour} })
	if _, err := v1.RunJSON(context.Background(), ticketN(4)); err != nil {
		t.Fatal(err)
	}
	fx2 := newFixture(t, func(c *Config) { c.Clock = fx.clock }, numbered(&down))
	v2 := fx2.task(t, func(c *TaskConfig) {
		c.Cache = &Cache{Store: store, TTL: time.Hour}
		c.Cascade[0].Prompt = mustPrompt(t, "prompts/triage/p0.v2.tmpl")
	})
	down.Store(true)
	res, err := v2.RunJSON(context.Background(), ticketN(4))
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != afloat.SourceHeuristic {
		t.Fatalf("an answer of prompt v1 was served by a cascade on v2: source %s, version %s", res.Source, res.PromptVersion)
	}
	if res, _ := v1.RunJSON(context.Background(), ticketN(4)); res.Source != afloat.SourceCache {
		t.Fatalf("the v1 cascade still serves its answer: source %s", res.Source)
	}
}

// A critical task refuses a cache unless it allows one explicitly; with it, a cached verdict
// answers before the review queue.
func TestCacheOnACriticalTask(t *testing.T) {
	var down atomic.Bool
	fx := newFixture(t, nil, numbered(&down))
	store := newCache(t, fx, 10)
	_, err := fx.eng.Task(TaskConfig{Name: "moderation", Criticality: afloat.Critical, OnExhausted: PolicyBlock,
		Schema: []byte(triageSchema), Cascade: []Tier{{Provider: "p0", Prompt: mustPrompt(t, "m.v1.tmpl")}},
		Cache: &Cache{Store: store, TTL: time.Hour}})
	if err == nil || !strings.Contains(err.Error(), "allow_critical") {
		t.Fatalf("a critical task took a cache without allow_critical: %v", err)
	}
	task, err := fx.eng.Task(TaskConfig{Name: "moderation", Criticality: afloat.Critical, OnExhausted: PolicyBlock,
		Schema: []byte(triageSchema), Cascade: []Tier{{Provider: "p0", Prompt: mustPrompt(t, "m.v1.tmpl")}},
		Cache: &Cache{Store: store, TTL: time.Hour, AllowCritical: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.RunJSON(context.Background(), ticketN(5)); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	if res, err := task.RunJSON(context.Background(), ticketN(5)); err != nil || res.Source != afloat.SourceCache {
		t.Fatalf("a seen input: %v, source %s; want the cached verdict", err, res.Source)
	}
	if _, err := task.RunJSON(context.Background(), ticketN(6)); err != afloat.ErrBlocked {
		t.Fatalf("an unseen input fails closed: %v", err)
	}
}

// Shedding goes straight to the policy: the cache answers only for tiers that failed.
func TestCacheIsNotAskedWhenShed(t *testing.T) {
	var down atomic.Bool
	pressure := time.Duration(0)
	fx := newFixture(t, func(c *Config) { c.Shed = shed.New(10*time.Millisecond, func() time.Duration { return pressure }) }, numbered(&down))
	task := fx.task(t, func(c *TaskConfig) { c.Cache = &Cache{Store: newCache(t, fx, 10), TTL: time.Hour} })
	if _, err := task.RunJSON(context.Background(), ticketN(1)); err != nil {
		t.Fatal(err)
	}
	pressure = time.Second
	res, err := task.RunJSON(context.Background(), ticketN(1))
	if err != nil || res.Source != afloat.SourceHeuristic || res.Reason != afloat.ReasonShed {
		t.Fatalf("a shed call: %v, source %s reason %s; want the heuristic, shed", err, res.Source, res.Reason)
	}
}

// The canonical input of a cache key: the same value writes the same bytes whatever the
// order of its keys, and values of different types or contents never write the same.
func TestCanonicalInput(t *testing.T) {
	enc := func(v any) string {
		b, ok := appendCanonical(nil, v, 0)
		if !ok {
			t.Fatalf("%v did not encode", v)
		}
		return string(b)
	}
	a := map[string]any{"subject": "hi", "n": 1.0, "tags": []any{"x", true, nil}, "meta": map[string]any{"b": "2", "a": "1"}}
	b := map[string]any{"meta": map[string]any{"a": "1", "b": "2"}, "tags": []any{"x", true, nil}, "n": 1.0, "subject": "hi"}
	if enc(a) != enc(b) {
		t.Fatalf("the same input in another order: %s vs %s", enc(a), enc(b))
	}
	distinct := []any{nil, "1", 1.0, 1, json.Number("1"), true, "true", []any{"a", "b"}, []any{"ab"}, []any{[]any{"a"}, "b"},
		map[string]any{"a": "b"}, map[string]any{"ab": ""}, map[string]any{"a": map[string]any{}}, struct{ A int }{1}, `s"q`}
	seen := map[string]int{}
	for i, v := range distinct {
		if j, dup := seen[enc(v)]; dup {
			t.Fatalf("%#v and %#v encode alike: %s", distinct[j], v, enc(v))
		}
		seen[enc(v)] = i
	}
	deep := any("leaf")
	for range maxDepth + 2 {
		deep = []any{deep}
	}
	if _, ok := appendCanonical(nil, deep, 0); ok {
		t.Fatal("an input nested past maxDepth was encoded")
	}
	if _, ok := appendCanonical(nil, map[string]any{"f": func() {}}, 0); ok {
		t.Fatal("a func was encoded")
	}
}

// A backup's answer, given while the primary was down, does not replace the primary's in the
// cache; and serve: always_fresh answers before the tiers only with the primary's answer, so
// that a healthy primary is asked rather than a backup's answer served as not degraded.
func TestCacheKeepsTheBetterTiersAnswer(t *testing.T) {
	var primaryDown, backupDown atomic.Bool
	fx := newFixture(t, nil, numbered(&primaryDown), numbered(&backupDown))
	task := fx.task(t, func(c *TaskConfig) { c.Cache = &Cache{Store: newCache(t, fx, 10), TTL: time.Hour, Fresh: true} })
	ctx := context.Background()

	primaryDown.Store(true)
	if res, _ := task.RunJSON(ctx, ticketN(1)); res.Provider != "p1" {
		t.Fatalf("the backup answers while the primary is down: %+v", res)
	}
	primaryDown.Store(false)
	fx.clock.Advance(6 * time.Minute) // the primary's breaker is past its recovery
	if res, _ := task.RunJSON(ctx, ticketN(1)); res.Source != afloat.SourceModel || res.Provider != "p0" {
		t.Fatalf("a healthy primary with only the backup's answer cached: source %s from %s; want the primary asked", res.Source, res.Provider)
	}
	if res, _ := task.RunJSON(ctx, ticketN(1)); res.Source != afloat.SourceCache || res.Tier != 0 || res.Degraded {
		t.Fatalf("now the primary's answer is cached: source %s tier %d degraded %v", res.Source, res.Tier, res.Degraded)
	}

	onError := fx.task(t, func(c *TaskConfig) { c.Name = "on-error"; c.Cache = &Cache{Store: newCache(t, fx, 10), TTL: time.Hour} })
	if _, err := onError.RunJSON(ctx, ticketN(2)); err != nil {
		t.Fatal(err)
	}
	primaryDown.Store(true)
	if res, _ := onError.RunJSON(ctx, ticketN(2)); res.Provider != "p1" || res.Source != afloat.SourceModel {
		t.Fatalf("the backup answers: %+v", res)
	}
	backupDown.Store(true)
	if res, _ := onError.RunJSON(ctx, ticketN(2)); res.Source != afloat.SourceCache || res.Provider != "p0" {
		t.Fatalf("every tier down: source %s from %s; want the primary's answer, which the backup's did not replace", res.Source, res.Provider)
	}
}

// A canary's candidate that was rolled back has its answers no longer served from the cache.
func TestCacheDropsARolledBackCandidatesAnswers(t *testing.T) {
	var down atomic.Bool
	fx := newFixture(t, nil, numbered(&down))
	task := fx.task(t, func(c *TaskConfig) {
		c.Cache = &Cache{Store: newCache(t, fx, 10), TTL: time.Hour}
		c.Canary = &Canary{Prompt: candidatePrompt(t), ByRequest: true, Config: canary.Config{Share: 1, Window: time.Hour}}
	})
	ctx := context.Background()
	if res, _ := task.RunJSON(ctx, ticketN(1)); res.PromptVersion != candidateVersion {
		t.Fatalf("share 1: answered by %s", res.PromptVersion)
	}
	down.Store(true)
	if res, _ := task.RunJSON(ctx, ticketN(1)); res.Source != afloat.SourceCache || res.PromptVersion != candidateVersion {
		t.Fatalf("the candidate's answer is served while it runs: %s %s", res.Source, res.PromptVersion)
	}
	if err := task.SetCanary(canary.RolledBack, "alice"); err != nil {
		t.Fatal(err)
	}
	if res, _ := task.RunJSON(ctx, ticketN(1)); res.Source != afloat.SourceHeuristic {
		t.Fatalf("after the rollback: source %s, version %s; the candidate's answers are not served", res.Source, res.PromptVersion)
	}
}

// A killed task answers by its policy, not from the cache.
func TestCacheIsNotAskedWhenKilled(t *testing.T) {
	var down atomic.Bool
	fl := flags.NewMemory()
	fx := newFixture(t, func(c *Config) { c.Flags = fl }, numbered(&down))
	task := fx.task(t, func(c *TaskConfig) { c.Cache = &Cache{Store: newCache(t, fx, 10), TTL: time.Hour, Fresh: true} })
	if _, err := task.RunJSON(context.Background(), ticketN(1)); err != nil {
		t.Fatal(err)
	}
	if err := fl.Set(context.Background(), &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}}); err != nil {
		t.Fatal(err)
	}
	res, err := task.RunJSON(context.Background(), ticketN(1))
	if err != nil || res.Source != afloat.SourceHeuristic || res.Reason != afloat.ReasonKillSwitch {
		t.Fatalf("a killed task: %v, source %s reason %s; want the heuristic, kill_switch", err, res.Source, res.Reason)
	}
}
