// Package cache keeps the validated answers of the models, so that a call whose every tier
// failed can still be answered with the last good answer to the same input: stale-if-error
// for model answers, the cascade's last tier.
//
// An answer is stored under a [Key] of its scope (the task or route), its tenant and the
// canonical JSON of its input, so tenants never share answers. [Cache.Get] serves it only
// while it is younger than the caller's maxAge and within the ttl of its [Cache.Put]; the
// [Entry] says which prompt version, provider and tier produced it and when, so the caller
// can mark the result as degraded and say how old it is.
//
// A Cache keeps its entries in process, in an LRU of Options.MaxEntries; with Options.Redis
// it also keeps them in Redis, so a replica can serve what another one was answered. Redis is
// never on a caller's critical path for long: a Get waits for it at most 50ms, a Put only
// queues its write, and a failing Redis reads as a miss, is counted in [Stats] and logged.
//
// A task call uses it like this, tiers being the cascade's tiers in turn:
//
//	input, _ := json.Marshal(args) // args is a map[string]any: its keys come out sorted
//	k := cache.KeyOf("triage", tenant, input)
//	value, err := tiers(ctx, input)
//	if err == nil {
//		c.Put(ctx, k, cache.Entry{Value: value, PromptVersion: "triage/openai/v3",
//			Provider: "openai", Tier: 0}, 24*time.Hour) // At: now
//		return value, nil
//	}
//	if e, ok := c.Get(ctx, k, 6*time.Hour); ok {
//		return e.Value, nil // degraded: the answer of e.At
//	}
//	return nil, err
package cache
