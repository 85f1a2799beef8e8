package config

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/afloat-dev/afloat/cache"
	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/state"
)

// taskCache is a task's answer cache as built, with the bound it was built for: a reload that
// keeps the bound keeps the cache and what it holds.
type taskCache struct {
	store *cache.Cache
	max   int
}

// releases reads a task's cache and canary into cfg, and reports whether the canary's
// template could be read and rendered.
func (b *builder) releases(t *Task, cfg *cascade.TaskConfig) bool {
	path := "tasks." + t.Name
	cfg.Cache = b.answerCache(path, t.Cache)
	c := t.Canary
	if c == nil {
		return true
	}
	cc := &cascade.Canary{
		Tier: c.Tier, Provider: c.Provider, ByRequest: c.By == "request",
		Config: canary.Config{
			Share: float64(c.Share), Window: c.Window, MinCalls: c.MinCalls,
			RollbackIf: c.RollbackIf.Canary(),
		},
	}
	if c.Prompt != "" {
		tpl, err := prompt.ParseFile(c.Prompt)
		if err != nil {
			b.errorf(path+".canary.prompt", "%v", err)
			return false
		}
		if _, err := tpl.Render(sampleInput(t.Input, tpl.Fields())); err != nil {
			b.errorf(path+".canary.prompt", "rendering with a sample input: %v", err)
			return false
		}
		cc.Prompt = tpl
	}
	cfg.Canary = cc
	return true
}

// answerCache is the cascade's cache of the task or route at path, nil for none.
func (b *builder) answerCache(path string, c *Cache) *cascade.Cache {
	if c == nil || c.MaxEntries < 1 || c.TTL <= 0 {
		return nil // none, or one validation refused
	}
	store := b.cacheStore(path, c.MaxEntries)
	if store == nil {
		return nil
	}
	return &cascade.Cache{Store: store, TTL: c.TTL, Fresh: c.Serve == "always_fresh", AllowCritical: c.AllowCritical}
}

// Canary is the thresholds as package canary takes them. Validation filled the defaults in,
// so a 0 here was written: no worsening at all, which canary reads from a tiny threshold
// (its 0 is its default).
func (t CanaryThresholds) Canary() canary.Thresholds {
	threshold := func(s Share) float64 {
		if s == 0 {
			return 1e-9
		}
		return float64(s)
	}
	return canary.Thresholds{
		ViolationRate: threshold(t.ViolationRate), FailureRate: threshold(t.FailureRate), ReaskRate: threshold(t.ReaskRate),
		P95: threshold(t.P95), Cost: threshold(t.Cost),
	}
}

// cacheStore returns the answer cache of the task or route at path, bounded at max entries: the previous
// runtime's when it had one of the same bound, else a new one, in process and, with the
// redis state backend, in Redis too. nil when it cannot be made (reported).
func (b *builder) cacheStore(name string, max int) *cache.Cache {
	// name is the path (tasks.NAME, routes.NAME): a task and a route never share one.
	if b.rt.caches == nil {
		b.rt.caches = map[string]taskCache{}
	}
	if b.prev != nil {
		if prev, ok := b.prev.caches[name]; ok && prev.max == max {
			b.rt.caches[name] = prev
			return prev.store
		}
	}
	opts := cache.Options{MaxEntries: max, Clock: b.clock, Logger: b.log.With("cache", name)}
	if rc, ok := b.rt.redisClient.(redis.UniversalClient); ok {
		opts.Redis, opts.Prefix = rc, b.f.State.Redis.Prefix
	}
	store, err := cache.New(opts)
	if err != nil {
		b.errorf(name+".cache", "%v", err)
		return nil
	}
	b.rt.caches[name] = taskCache{store: store, max: max}
	return store
}

// closeCaches closes the answer caches rt built that keep is not using (nil: every one).
func (rt *Runtime) closeCaches(keep *Runtime) error {
	var errs []error
	for name, c := range rt.caches {
		if keep != nil && keep.caches[name].store == c.store {
			continue
		}
		if err := c.store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	rt.caches = nil
	return errors.Join(errs...)
}

// canaryDecisions keeps the engine's canary decisions in the state backend (the local file, or
// Redis for a fleet), saving each in the background; Runtime.Close waits for the saves. The
// engine is built before the state, so the state is set once made.
type canaryDecisions struct {
	st     atomic.Pointer[state.State]
	log    *slog.Logger
	mu     sync.Mutex // orders Save's Add before close's Wait
	closed bool
	saving sync.WaitGroup
}

// close waits for the saves under way; a decision taken after it (a call still running past
// the shutdown's grace) is logged, not saved to a state being closed.
func (c *canaryDecisions) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.saving.Wait()
}

func (c *canaryDecisions) Decision(task, fingerprint string) (canary.Decision, bool) {
	st := c.st.Load()
	if st == nil {
		return canary.Decision{}, false
	}
	r, ok := st.Canaries()[task]
	if !ok || r.Fingerprint != fingerprint {
		return canary.Decision{}, false
	}
	return canary.Decision{State: canary.State(r.State), At: r.At, By: r.By, Reasons: r.Reasons}, true
}

func (c *canaryDecisions) Save(task, fingerprint string, d canary.Decision) {
	st := c.st.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if st == nil || c.closed {
		c.log.Error("canary decision not kept (no state backend, or afloat is stopping): a restart will not see it", "task", task)
		return
	}
	c.saving.Add(1)
	go func() {
		defer c.saving.Done()
		ctx, cancel := context.WithTimeout(context.Background(), decisionTimeout)
		defer cancel()
		err := st.SaveCanary(ctx, state.Canary{Task: task, Fingerprint: fingerprint, State: string(d.State), At: d.At, By: d.By, Reasons: d.Reasons})
		if err != nil {
			c.log.Error("canary decision not kept: a restart or another replica will not see it", "task", task, "err", err)
		}
	}()
}

// decisionTimeout bounds the save of one canary decision.
const decisionTimeout = 5 * time.Second

// decisions is what the engine keeps its canaries' decisions in: made once, and a reload's
// runtime holds its previous one's (inherit).
func (b *builder) decisions() cascade.CanaryDecisions {
	if b.rt.decisions == nil {
		b.rt.decisions = &canaryDecisions{log: b.log}
	}
	return b.rt.decisions
}
