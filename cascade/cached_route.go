package cascade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cache"
)

// A route's answer cache is a task's (Cache), keyed by the chat request instead of a task's
// input: the messages, tools, tool choice, response format, token cap and temperature (the
// model the client named is left out: every alias of the route asks the same). What it keeps
// is the answer: its text, tool calls, finish reason and model, without usage (a cached
// answer costs nothing).

// versions are the cache versions of a route's tiers, by tier: a route has no prompt
// versions, so a tier's is its provider and a digest of its system prompt and mode. A reload
// that changes a tier's system prompt retires the answers it gave.
func versions(route string, tiers []RouteTier) []string {
	out := make([]string, len(tiers))
	for i, rt := range tiers {
		out[i] = routeVersion(route, rt)
	}
	return out
}

func routeVersion(route string, rt RouteTier) string {
	v := route + "/" + rt.Provider
	if rt.System == "" {
		return v
	}
	sum := sha256.Sum256([]byte(string(rt.SystemMode) + "\x00" + rt.System))
	return v + "/system-" + hex.EncodeToString(sum[:4])
}

// cachedRequest is what of a chat request its answer depends on.
type cachedRequest struct {
	Messages       []afloat.Message       `json:"messages"`
	Tools          []afloat.Tool          `json:"tools,omitempty"`
	ToolChoice     *afloat.ToolChoice     `json:"tool_choice,omitempty"`
	ResponseFormat *afloat.ResponseFormat `json:"response_format,omitempty"`
	MaxTokens      int                    `json:"max_tokens,omitempty"`
	Temperature    *float64               `json:"temperature,omitempty"`
}

// cacheKey is the key of the request's answer; ok is false without a cache or when the
// request cannot be encoded.
func (r *Route) cacheKey(ctx context.Context, in *afloat.Request) (cache.Key, bool) {
	if r.cache == nil {
		return cache.Key{}, false
	}
	b, err := json.Marshal(cachedRequest{in.Messages, in.Tools, in.ToolChoice, in.ResponseFormat, in.MaxTokens, in.Temperature})
	if err != nil {
		return cache.Key{}, false
	}
	return cache.KeyOf(r.name, Tenant(ctx), b), true
}

// fromCache answers the call from the cache when it holds an answer to the request young
// enough, by a tier still in the cascade. degraded is false on the happy path (Fresh).
func (r *Route) fromCache(ctx context.Context, key cache.Key, log *callLog, start time.Time, degraded bool) (*Reply, bool) {
	c := r.cache
	en, ok := c.Store.Get(context.WithoutCancel(ctx), key, c.TTL)
	switch {
	case !ok:
		c.misses.Inc()
		return nil, false
	case !slices.Contains(c.versions, en.PromptVersion):
		c.retired.Inc()
		return nil, false
	}
	var resp afloat.Response
	if err := json.Unmarshal(en.Value, &resp); err != nil {
		c.misses.Inc()
		return nil, false
	}
	c.hits.Inc()
	rep := &Reply{
		Route: r.name, Response: &resp, Source: afloat.SourceCache, CachedAt: en.At.UTC(), Degraded: degraded,
		Reason: log.reason, Provider: en.Provider, Tier: en.Tier, Attempts: log.attempts, Usage: log.usage,
	}
	r.finish(rep, start)
	return rep, true
}

// exhaustedOrCached answers a call no tier answered: from the cache when it can, else as
// exhausted.
func (r *Route) exhaustedOrCached(ctx context.Context, key cache.Key, cached bool, log *callLog, start time.Time) (*Reply, error) {
	if cached {
		if rep, ok := r.fromCache(ctx, key, log, start, true); ok {
			return rep, nil
		}
	}
	return r.exhausted(log, start)
}

// remember stores tier tr's whole answer to the request.
func (r *Route) remember(ctx context.Context, key cache.Key, tr *tier, resp *afloat.Response) {
	if resp == nil || resp.FinishReason == "length" {
		return // a cut answer is no answer to keep
	}
	kept := afloat.Response{Content: resp.Content, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Model: resp.Model}
	b, err := json.Marshal(kept)
	if err != nil {
		return
	}
	c := r.cache
	c.Store.Put(ctx, key, cache.Entry{Value: b, PromptVersion: c.versions[tr.idx], Provider: tr.up.name, Tier: tr.idx, At: r.e.clock.Now()}, c.TTL)
	c.stored.Inc()
}
