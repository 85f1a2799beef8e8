package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cache"
)

// Cache is a task's answer cache (DESIGN §2 step 4): HTTP's stale-if-error for model
// answers. Every valid answer a tier gives is stored under the task, the tenant and the
// canonical input; when every tier failed, an answer younger than TTL, by a prompt version
// still in the cascade, is served before the task's policy, as source cache, degraded.
type Cache struct {
	// Store keeps the answers; required. Tasks may share one: its keys hold the task's name.
	Store *cache.Cache
	// TTL is the age past which an answer is no longer served; required.
	TTL time.Duration
	// Fresh also answers from the cache on the happy path, before any tier is asked, when
	// the same input was answered within TTL (serve: always_fresh), saving the call's cost;
	// such an answer is not degraded. false asks the tiers first and serves the cache only
	// when they all failed (serve: on_error).
	Fresh bool
	// AllowCritical lets a critical task serve a cached verdict when no model can judge the
	// call, instead of failing closed; without it a critical task refuses a cache.
	AllowCritical bool
}

// check refuses a cache that cannot work or that would let a critical task answer without a
// judgement.
func (c *Cache) check(crit afloat.Criticality) error {
	switch {
	case c.Store == nil:
		return errors.New("cache: a store is required")
	case c.TTL <= 0:
		return errors.New("cache: ttl must be positive")
	case crit == afloat.Critical && !c.AllowCritical:
		return errors.New("cache: a critical task fails closed, and a cached verdict was judged on an earlier call, for content that may have changed meaning since (allow it with allow_critical)")
	}
	return nil
}

// taskCache is a task's cache with its metric handles bound.
type taskCache struct {
	Cache
	// versions are the prompt versions whose answers may be served: the tiers' and a
	// canary's candidate. An answer of a version retired from the config is not.
	versions []string
	hits     prometheus.Counter // afloat_cache_total{result="hit"}
	misses   prometheus.Counter // "miss": none, or none young enough
	retired  prometheus.Counter // "retired": an answer of a prompt version no longer served
	stored   prometheus.Counter // "stored"
}

func (e *Engine) taskCache(name string, c *Cache, versions []string) *taskCache {
	if c == nil {
		return nil
	}
	m := e.metrics.Cache
	return &taskCache{
		Cache: *c, versions: versions,
		hits: m.WithLabelValues(name, "hit"), misses: m.WithLabelValues(name, "miss"),
		retired: m.WithLabelValues(name, "retired"), stored: m.WithLabelValues(name, "stored"),
	}
}

// cacheKey is the key of the call's answer: the task, the tenant, the canonical input
// (encoding/json writes a map's keys sorted). ok is false when the input cannot be encoded.
func (t *Task) cacheKey(ctx context.Context, in afloat.Input) (cache.Key, bool) {
	b, err := json.Marshal(in)
	if err != nil {
		return cache.Key{}, false
	}
	return cache.KeyOf(t.name, Tenant(ctx), b), true
}

// fromCache answers the call from the cache when it holds an answer to its input young
// enough, by a prompt version still served. degraded is false on the happy path (Fresh).
func (t *Task) fromCache(ctx context.Context, key cache.Key, log *callLog, start time.Time, degraded bool) (afloat.Result[json.RawMessage], bool) {
	c := t.cache
	// The call's budget may be spent by now; the store's lookup bounds itself.
	en, ok := c.Store.Get(context.WithoutCancel(ctx), key, c.TTL)
	switch {
	case !ok:
		c.misses.Inc()
		return afloat.Result[json.RawMessage]{}, false
	case !slices.Contains(c.versions, en.PromptVersion):
		c.retired.Inc()
		return afloat.Result[json.RawMessage]{}, false
	}
	c.hits.Inc()
	res := afloat.Result[json.RawMessage]{
		Task: t.name, Value: en.Value, Source: afloat.SourceCache, Degraded: degraded,
		Provider: en.Provider, Tier: en.Tier, PromptVersion: en.PromptVersion, CachedAt: en.At.UTC(),
	}
	return t.finish(res, log, start), true
}

// remember stores tier tr's valid answer to the call.
func (t *Task) remember(ctx context.Context, key cache.Key, tr *tier, val json.RawMessage) {
	c := t.cache
	c.Store.Put(ctx, key, cache.Entry{
		Value: val, PromptVersion: tr.version, Provider: tr.up.name, Tier: tr.idx, At: t.e.clock.Now(),
	}, c.TTL)
	c.stored.Inc()
}
