package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
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
	case crit == afloat.Critical && c.Fresh:
		return errors.New("cache: a critical task serves a cached verdict only when no model can judge the call, never instead of asking one (serve: on_error)")
	}
	return nil
}

// taskCache is a task's cache with its metric handles bound.
type taskCache struct {
	Cache
	// versions are the prompt versions whose answers may be served: the tiers' and a
	// canary's candidate. An answer of a version retired from the config is not.
	versions []string
	clock    clockwork.Clock // the engine's: when an answer was given
	// canary is the task's, whose candidate's answers are not served once it is rolled
	// back; nil for none.
	canary  *taskCanary
	hits    prometheus.Counter // afloat_cache_total{result="hit"}: an answer served
	misses  prometheus.Counter // "miss": a lookup found none, or none young enough
	retired prometheus.Counter // "retired": an answer of a prompt version no longer served
	stored  prometheus.Counter // "stored"
}

func (e *Engine) taskCache(name string, c *Cache, versions []string, tc *taskCanary) *taskCache {
	if c == nil {
		return nil
	}
	m := e.metrics.Cache
	return &taskCache{
		Cache: *c, versions: versions, canary: tc, clock: e.clock,
		hits: m.WithLabelValues(name, "hit"), misses: m.WithLabelValues(name, "miss"),
		retired: m.WithLabelValues(name, "retired"), stored: m.WithLabelValues(name, "stored"),
	}
}

// cache is the call's use of the task's cache: keyed by the task, the tenant and the
// canonical input; the zero cached without a cache, or for an input that cannot be encoded.
func (t *Task) cached(ctx context.Context, in afloat.Input) cached {
	if t.cache == nil {
		return cached{}
	}
	key, ok := t.cacheKey(ctx, in)
	if !ok {
		return cached{}
	}
	return cached{c: t.cache, key: key}
}

// cacheKey is the key of the call's answer: the task, the tenant, the canonical input. ok is
// false when the input cannot be encoded.
func (t *Task) cacheKey(ctx context.Context, in afloat.Input) (cache.Key, bool) {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	b, ok := appendCanonical((*bp)[:0], map[string]any(in), 0)
	*bp = b[:0]
	if !ok {
		return cache.Key{}, false
	}
	return cache.KeyOf(t.name, Tenant(ctx), b), true
}

// keyBufs are the buffers canonical inputs are written into, so that a call's key costs no
// allocation for an input of strings, numbers and booleans.
var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxDepth bounds the nesting appendCanonical follows; a deeper input is not cached.
const maxDepth = 32

// appendCanonical appends v in a canonical form: the same value always writes the same
// bytes, and two different values never do (each value is tagged with its type, strings are
// length-prefixed, a map's keys are sorted). It is the cache key's input, never parsed back. It
// reports false for a value it cannot encode.
func appendCanonical(b []byte, v any, depth int) ([]byte, bool) {
	if depth > maxDepth {
		return b, false
	}
	switch x := v.(type) {
	case nil:
		return append(b, 'n'), true
	case string:
		return appendString(b, 's', x), true
	case bool:
		return strconv.AppendBool(append(b, 'b'), x), true
	case float64:
		return strconv.AppendFloat(append(b, 'f'), x, 'g', -1, 64), true
	case int:
		return strconv.AppendInt(append(b, 'i'), int64(x), 10), true
	case int64:
		return strconv.AppendInt(append(b, 'i'), x, 10), true
	case json.Number:
		return appendString(b, '#', string(x)), true
	case map[string]any:
		var arr [16]string
		keys := arr[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = strconv.AppendInt(append(b, '{'), int64(len(keys)), 10)
		for _, k := range keys {
			var ok bool
			if b, ok = appendCanonical(appendString(b, 'k', k), x[k], depth+1); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	case []any:
		b = strconv.AppendInt(append(b, '['), int64(len(x)), 10)
		for _, e := range x {
			var ok bool
			if b, ok = appendCanonical(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	j, err := json.Marshal(v) // another type (a library caller's struct): its JSON
	if err != nil {
		return b, false
	}
	return appendString(b, 'j', string(j)), true
}

// appendString appends s tagged and length-prefixed: its bytes as they are, which no other
// string's encoding can be mistaken for.
func appendString(b []byte, tag byte, s string) []byte {
	b = strconv.AppendInt(append(b, tag), int64(len(s)), 10)
	return append(append(b, ':'), s...)
}

// cached is one call's use of its task's or route's answer cache: the call's key, and what
// its one lookup found. The zero cached (no cache, or an input with no key) does nothing.
type cached struct {
	c      *taskCache
	key    cache.Key
	looked bool        // the cache was read
	en     cache.Entry // what it held that a tier still serves, when found
	found  bool
}

// lookup reads the cache once: an answer young enough, by a version the cascade still
// serves. ctx bounds a Redis read.
func (k *cached) lookup(ctx context.Context) {
	k.looked = true
	en, ok := k.c.Store.Get(ctx, k.key, k.c.TTL)
	switch {
	case !ok:
		k.c.misses.Inc()
	case !k.c.serves(en.PromptVersion):
		k.c.retired.Inc()
	default:
		k.en, k.found = en, true
	}
}

// fresh returns the answer to serve before any tier is asked (serve: always_fresh): tier
// 0's, as the happy path would have answered; a lower tier's answer, given while tier 0
// failed, waits for tier 0 to fail again. ctx is the call's: the read fits in its budget.
func (k *cached) fresh(ctx context.Context) (cache.Entry, bool) {
	if k.c == nil || !k.c.Fresh {
		return cache.Entry{}, false
	}
	k.lookup(ctx)
	if !k.found || k.en.Tier != 0 {
		return cache.Entry{}, false
	}
	k.c.hits.Inc()
	return k.en, true
}

// stale returns the answer to serve once every tier failed.
func (k *cached) stale(ctx context.Context) (cache.Entry, bool) {
	if k.c == nil {
		return cache.Entry{}, false
	}
	if !k.looked {
		k.lookup(context.WithoutCancel(ctx)) // the budget may be spent: the read bounds itself
	}
	if !k.found {
		return cache.Entry{}, false
	}
	k.c.hits.Inc()
	return k.en, true
}

// keep stores tier tr's valid answer, val, under version: unless the cache holds a higher
// tier's answer to the same input that is still served, which it keeps (the backup's
// answer, given during the primary's outage, does not replace the primary's).
func (k *cached) keep(ctx context.Context, tr *tier, version string, val []byte) {
	if k.c == nil {
		return
	}
	if tr.idx > 0 {
		en, found := k.en, k.found
		if !k.looked {
			en, found = k.c.Store.Get(ctx, k.key, k.c.TTL)
			found = found && k.c.serves(en.PromptVersion)
		}
		if found && en.Tier < tr.idx {
			return
		}
	}
	k.c.Store.Put(ctx, k.key, cache.Entry{Value: val, PromptVersion: version, Provider: tr.up.name, Tier: tr.idx, At: k.c.clock.Now()}, k.c.TTL)
	k.c.stored.Inc()
}

// serves reports whether an answer of version may be served: the cascade still has the
// version, and it is not a canary's candidate that was rolled back.
func (c *taskCache) serves(version string) bool {
	if !slices.Contains(c.versions, version) {
		return false
	}
	if c.canary == nil || version != c.canary.cand.version {
		return true
	}
	c.canary.sync() // a rollback another replica decided retires the candidate's answers here too
	return !c.canary.run.c.RolledBack()
}

// CacheStatus is a task's or route's answer cache as /admin/status shows it.
type CacheStatus struct {
	TTL time.Duration
	// Serve is on_error or always_fresh.
	Serve string
	// Entries is what the cache holds in process now (a cache shared by tasks counts all).
	Entries int
}

// status is the cache's status; ok is false without a cache.
func (c *taskCache) status() (CacheStatus, bool) {
	if c == nil {
		return CacheStatus{}, false
	}
	serve := "on_error"
	if c.Fresh {
		serve = "always_fresh"
	}
	return CacheStatus{TTL: c.TTL, Serve: serve, Entries: c.Store.Len()}, true
}

// Cache returns the task's answer cache's status; ok is false without one.
func (t *Task) Cache() (CacheStatus, bool) { return t.cache.status() }

// Cache returns the route's answer cache's status; ok is false without one.
func (r *Route) Cache() (CacheStatus, bool) { return r.cache.status() }

// fromCache is the envelope of a cached answer.
func (t *Task) fromCache(en cache.Entry, log *callLog, start time.Time, degraded bool) afloat.Result[json.RawMessage] {
	res := afloat.Result[json.RawMessage]{
		Task: t.name, Value: en.Value, Source: afloat.SourceCache, Degraded: degraded,
		Provider: en.Provider, Tier: en.Tier, PromptVersion: en.PromptVersion, CachedAt: en.At.UTC(),
	}
	return t.finish(res, log, start)
}
