package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
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
