package config

import (
	"time"

	"github.com/afloat-dev/afloat"
)

// Defaults of a task's cache and canary.
const (
	defaultCacheEntries   = 100000
	defaultCanaryWindow   = 30 * time.Minute
	defaultCanaryMinCalls = 200
)

// cache checks a task's or route's answer cache at path and fills its defaults in.
func (v *validator) cache(path string, c *Cache, crit afloat.Criticality) {
	if c == nil {
		return
	}
	if !v.written(path + ".ttl") {
		v.errorf(path+".ttl", "required: the age past which a kept answer is no longer served (24h, say)")
	}
	v.positive(path+".ttl", c.TTL)
	if !v.written(path + ".max_entries") {
		c.MaxEntries = defaultCacheEntries
	}
	v.atLeast(path+".max_entries", c.MaxEntries, 1)
	switch c.Serve {
	case "":
		c.Serve = "on_error"
	case "on_error", "always_fresh":
	default:
		v.errorf(path+".serve", "unknown %q (want on_error or always_fresh)", c.Serve)
	}
	switch {
	case crit == afloat.Critical && !c.AllowCritical:
		v.errorf(path, "a critical task fails closed: a cached verdict was judged on an earlier call, and the same words may mean something else today (a new slur, a scam that reuses a template); set allow_critical: true to serve it anyway when no model can judge")
	case crit == afloat.Critical && c.Serve == "always_fresh":
		v.errorf(path+".serve", "a critical task serves a cached verdict only when no model can judge the call, never instead of asking one: use on_error")
	}
}

// canary checks a task's canary and fills its defaults in.
func (v *validator) canary(t *Task) {
	c, path := t.Canary, "tasks."+t.Name+".canary"
	if c == nil {
		return
	}
	switch {
	case c.Tier < 0 || c.Tier >= len(t.Cascade):
		v.errorf(path+".tier", "%d: the cascade has tiers 0 to %d", c.Tier, len(t.Cascade)-1)
	case c.Prompt == "" && c.Provider == "":
		v.errorf(path, "name the candidate: a prompt (a template file), a provider, or both")
	case c.Prompt == "" && c.Provider == t.Cascade[c.Tier].Provider:
		v.errorf(path+".provider", "%s is the tier's provider already: name another, or a prompt", c.Provider)
	}
	if c.Provider != "" {
		v.knownProvider(path+".provider", c.Provider)
	}
	if c.Prompt != "" {
		c.Prompt = v.resolvePath(c.Prompt)
	}
	if !v.written(path + ".share") {
		v.errorf(path+".share", "required: the candidate's share of the tier's calls at the start (10%%, say)")
	} else if c.Share <= 0 || c.Share > 1 {
		v.errorf(path+".share", "%v is outside (0%%, 100%%]: write a percentage such as 10%% or a fraction such as 0.1", c.Share)
	}
	switch c.By {
	case "":
		c.By = "tenant"
	case "tenant", "request":
	default:
		v.errorf(path+".by", "unknown %q (want tenant or request)", c.By)
	}
	if !v.written(path + ".window") {
		c.Window = defaultCanaryWindow
	}
	v.positive(path+".window", c.Window)
	if !v.written(path + ".min_calls") {
		c.MinCalls = defaultCanaryMinCalls
	}
	v.atLeast(path+".min_calls", c.MinCalls, 1)
	th, tp := &c.RollbackIf, path+".rollback_if"
	for _, s := range []struct {
		key string
		v   *Share
		def Share
	}{{"violation_rate", &th.ViolationRate, 0.02}, {"failure_rate", &th.FailureRate, 0.05}, {"reask_rate", &th.ReaskRate, 0.05},
		{"p95", &th.P95, 0.25}, {"cost", &th.Cost, 0.25}} {
		if !v.written(tp + "." + s.key) {
			*s.v = s.def
		}
	}
	if th.ViolationRate > 1 || th.FailureRate > 1 || th.ReaskRate > 1 {
		v.errorf(tp, "violation_rate, failure_rate and reask_rate are points of a share: at most 100%%")
	}
}

// taskOnly refuses on a route what only a task has yet.
func (v *validator) taskOnly(r *Route) {
	path := "routes." + r.Name
	if r.Canary != nil {
		v.errorf(path+".canary", "not for routes yet: a canary compares a task's contract violations, and a route's answers have no contract unless the client sends a schema")
	}
}
