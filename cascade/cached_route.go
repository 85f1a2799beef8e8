package cascade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// cached is the call's use of the route's cache: keyed by the route, the tenant and the
// request; the zero cached without a cache, or for a request that cannot be encoded.
func (r *Route) cached(ctx context.Context, in *afloat.Request) cached {
	if r.cache == nil {
		return cached{}
	}
	b, err := json.Marshal(cachedRequest{in.Messages, in.Tools, in.ToolChoice, in.ResponseFormat, in.MaxTokens, in.Temperature})
	if err != nil {
		return cached{}
	}
	return cached{c: r.cache, key: cache.KeyOf(r.name, Tenant(ctx), b)}
}

// fromCache decodes a cached answer; ok is false without one.
func (r *Route) fromCache(en cache.Entry, ok bool) (cachedAnswer, bool) {
	if !ok {
		return cachedAnswer{}, false
	}
	var resp afloat.Response
	if err := json.Unmarshal(en.Value, &resp); err != nil {
		return cachedAnswer{}, false
	}
	return cachedAnswer{en, &resp}, true
}

// cachedAnswer is a route's cached answer, decoded.
type cachedAnswer struct {
	cache.Entry
	resp *afloat.Response
}

// cachedReply is the reply of a cached answer. degraded is false on the happy path (Fresh).
func (r *Route) cachedReply(a cachedAnswer, log *callLog, start time.Time, degraded bool) *Reply {
	rep := &Reply{
		Route: r.name, Response: a.resp, Source: afloat.SourceCache, CachedAt: a.At.UTC(), Degraded: degraded,
		Reason: log.reason, Provider: a.Provider, Tier: a.Tier, Attempts: log.attempts, Usage: log.usage,
	}
	r.finish(rep, start)
	return rep
}

// exhaustedOrCached answers a call no tier answered: from the cache when it can, else as
// exhausted.
func (r *Route) exhaustedOrCached(ctx context.Context, kc *cached, log *callLog, start time.Time) (*Reply, error) {
	if a, ok := r.fromCache(kc.stale(ctx)); ok {
		return r.cachedReply(a, log, start, true), nil
	}
	return r.exhausted(log, start)
}

// keep stores tier tr's whole answer to the request.
func (r *Route) keep(ctx context.Context, kc *cached, tr *tier, resp *afloat.Response) {
	if kc.c == nil || resp == nil || resp.FinishReason == "length" {
		return // a cut answer is no answer to keep
	}
	kept := afloat.Response{Content: resp.Content, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Model: resp.Model}
	b, err := json.Marshal(kept)
	if err != nil {
		return
	}
	kc.keep(ctx, tr, kc.c.versions[tr.idx], b)
}
