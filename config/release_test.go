package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/canary"
)

const releases = `
providers:
  primary: {type: sim}
  backup: {type: sim}
  mini: {type: sim}
tasks:
  triage:
    criticality: enrichment
    schema: triage.json
    cascade:
      - {provider: primary, prompt: prompts/primary.v1.tmpl}
      - {provider: backup, prompt: prompts/backup.v1.tmpl}
    cache: {ttl: 24h}
    canary: {prompt: prompts/primary.v2.tmpl, share: 10%}
`

// TestCacheAndCanaryKeys: a task's cache and canary are read with their defaults, and each
// wrong value is refused at its path.
func TestCacheAndCanaryKeys(t *testing.T) {
	f := mustParse(t, releases)
	c, k := f.Task("triage").Cache, f.Task("triage").Canary
	if c.TTL != 24*time.Hour || c.MaxEntries != 100000 || c.Serve != "on_error" || c.AllowCritical {
		t.Errorf("cache %+v; want ttl 24h, max_entries 100000, serve on_error", c)
	}
	if k.Share != 0.1 || k.Tier != 0 || k.By != "tenant" || k.Window != 30*time.Minute || k.MinCalls != 200 ||
		k.RollbackIf != (CanaryThresholds{ViolationRate: 0.02, FailureRate: 0.05, ReaskRate: 0.05, P95: 0.25, Cost: 0.25}) {
		t.Errorf("canary %+v; want share 0.1, tier 0, by tenant, window 30m, min_calls 200, the default thresholds", k)
	}
	if !filepath.IsAbs(k.Prompt) {
		t.Errorf("canary prompt %q is not resolved against the config's folder", k.Prompt)
	}
	written := mustParse(t, strings.Replace(releases, "share: 10%}", "share: 0.25, by: request, window: 1h, min_calls: 50, rollback_if: {violation_rate: 1%, p95: 50%}}", 1))
	if k := written.Task("triage").Canary; k.Share != 0.25 || k.By != "request" || k.MinCalls != 50 || k.RollbackIf.ViolationRate != 0.01 || k.RollbackIf.P95 != 0.5 || k.RollbackIf.ReaskRate != 0.05 {
		t.Errorf("canary %+v: the written values are not read", k)
	}

	for _, c := range []struct{ from, to, path, msg string }{
		{"cache: {ttl: 24h}", "cache: {max_entries: 10}", "tasks.triage.cache.ttl", "required"},
		{"cache: {ttl: 24h}", "cache: {ttl: 24h, serve: sometimes}", "tasks.triage.cache.serve", "want on_error or always_fresh"},
		{"cache: {ttl: 24h}", "cache: {ttl: 24h, max_entries: 0}", "tasks.triage.cache.max_entries", "at least 1"},
		{"criticality: enrichment", "criticality: critical", "tasks.triage.cache", "allow_critical"},
		{"share: 10%}", "share: 150%}", "tasks.triage.canary.share", "outside"},
		{"share: 10%}", "share: ten}", "tasks.triage.canary.share", "invalid share"},
		{"{prompt: prompts/primary.v2.tmpl, share: 10%}", "{prompt: prompts/primary.v2.tmpl}", "tasks.triage.canary.share", "required"},
		{"{prompt: prompts/primary.v2.tmpl, share: 10%}", "{share: 10%}", "tasks.triage.canary", "name the candidate"},
		{"{prompt: prompts/primary.v2.tmpl, share: 10%}", "{provider: primary, share: 10%}", "tasks.triage.canary.provider", "the tier's provider already"},
		{"{prompt: prompts/primary.v2.tmpl, share: 10%}", "{provider: nobody, share: 10%}", "tasks.triage.canary.provider", ""},
		{"share: 10%}", "share: 10%, tier: 2}", "tasks.triage.canary.tier", "tiers 0 to 1"},
		{"share: 10%}", "share: 10%, by: user}", "tasks.triage.canary.by", "want tenant or request"},
		{"share: 10%}", "share: 10%, rollback_if: {violation_rate: 200%}}", "tasks.triage.canary.rollback_if", "at most 100%"},
	} {
		bad := strings.Replace(releases, c.from, c.to, 1)
		_, err := Parse([]byte(bad), "/cfg", noEnv)
		if err == nil || findError(asErrors(t, err), c.path, c.msg) == nil {
			t.Errorf("%s: error %v; want %s: %s", c.to, err, c.path, c.msg)
		}
	}
	allowed := strings.Replace(strings.Replace(releases, "criticality: enrichment", "criticality: critical\n    on_exhausted: block", 1), "cache: {ttl: 24h}", "cache: {ttl: 24h, allow_critical: true}", 1)
	if f := mustParse(t, allowed); !f.Task("triage").Cache.AllowCritical {
		t.Error("allow_critical is not read")
	}
	fresh := strings.Replace(allowed, "allow_critical: true}", "allow_critical: true, serve: always_fresh}", 1)
	if _, err := Parse([]byte(fresh), "/cfg", noEnv); err == nil || findError(asErrors(t, err), "tasks.triage.cache.serve", "use on_error") == nil {
		t.Errorf("a critical task's always_fresh cache: %v; want it refused", err)
	}

	route := "providers:\n  p: {type: sim}\nroutes:\n  chat: {criticality: assistance, cascade: [p], cache: {ttl: 1h}, canary: {provider: p, share: 10%}}\n"
	_, err := Parse([]byte(route), "/cfg", noEnv)
	if err == nil || findError(asErrors(t, err), "routes.chat.canary", "not for routes yet") == nil {
		t.Errorf("a route's canary: %v; want it refused as not for routes yet", err)
	}
	if findError(asErrors(t, err), "routes.chat.cache", "") != nil {
		t.Errorf("a route's cache was refused: %v", err)
	}
	if f := mustParse(t, strings.Replace(route, ", canary: {provider: p, share: 10%}", "", 1)); f.Route("chat").Cache.MaxEntries != 100000 {
		t.Errorf("a route's cache: %+v", f.Route("chat").Cache)
	}
}

// loadAndBuild loads the config at path and builds it; the caller closes the runtime.
func loadAndBuild(t *testing.T, path string) *Runtime {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// releaseTree writes the releases config and its files, and returns the config's path.
func releaseTree(t *testing.T, config string) string {
	t.Helper()
	dir := writeTree(t, map[string]string{
		"afloat.yaml": config, "triage.json": triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt, "prompts/primary.v2.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	return filepath.Join(dir, "afloat.yaml")
}

// A built task has its cache and its canary, and a reload that leaves them as they were keeps
// the cache (and what it holds); one that changes the cache's bound starts a new cache.
func TestCacheAndCanaryBuiltAndReloaded(t *testing.T) {
	path := releaseTree(t, releases)
	rt := loadAndBuild(t, path)
	inForce := rt
	t.Cleanup(func() { _ = inForce.Close() })
	st, ok := rt.Tasks["triage"].Canary()
	if !ok || st.State != canary.Running || st.Share != 0.1 || st.CandidateVersion != "triage/primary/v2" || st.IncumbentVersion != "triage/primary/v1" {
		t.Fatalf("canary %+v, %v", st, ok)
	}
	store := rt.caches["tasks.triage"].store
	if store == nil {
		t.Fatal("the task has no cache")
	}

	next, _, err := rt.Reload(path, func(*Runtime) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	inForce = next
	if next.caches["tasks.triage"].store != store {
		t.Fatal("a reload that left the cache as it was started a new one")
	}
	if err := os.WriteFile(path, []byte(strings.Replace(releases, "cache: {ttl: 24h}", "cache: {ttl: 24h, max_entries: 10}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	third, _, err := next.Reload(path, func(*Runtime) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	inForce = third
	if third.caches["tasks.triage"].store == store {
		t.Fatal("a new max_entries kept the old cache")
	}
}

// check explains why a critical task may not have a cache, on the key's line.
func TestCheckExplainsCriticalCache(t *testing.T) {
	path := releaseTree(t, strings.Replace(releases, "criticality: enrichment", "criticality: critical\n    on_exhausted: block", 1))
	_, err := Load(path)
	e := findError(asErrors(t, err), "tasks.triage.cache", "a critical task fails closed")
	if e == nil || e.Line == 0 {
		t.Fatalf("error %v; want tasks.triage.cache explained, with its line", err)
	}
}

// A canary the engine refuses (its candidate is the incumbent, or reads a field the calls
// need not carry) is reported on the canary's key.
func TestCanaryRefusedOnItsKey(t *testing.T) {
	for _, c := range []struct{ canary, prompt, msg string }{
		{"canary: {prompt: prompts/primary.v1.tmpl, share: 10%}", triagePrompt, "is the tier's incumbent"},
		{"canary: {prompt: prompts/primary.v2.tmpl, share: 10%}", "--- user\n{{.subject}} {{.customer}}\n", `reads "customer"`},
	} {
		dir := writeTree(t, map[string]string{
			"afloat.yaml": strings.Replace(releases, "canary: {prompt: prompts/primary.v2.tmpl, share: 10%}", c.canary, 1), "triage.json": triageSchema,
			"prompts/primary.v1.tmpl": triagePrompt, "prompts/primary.v2.tmpl": c.prompt, "prompts/backup.v1.tmpl": triagePrompt,
		})
		f, err := Load(filepath.Join(dir, "afloat.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Build(BuildOptions{})
		if err == nil || findError(asErrors(t, err), "tasks.triage.canary", c.msg) == nil {
			t.Errorf("%s: %v; want tasks.triage.canary: …%s…", c.canary, err, c.msg)
		}
	}
}

// A canary's decision survives a restart, also one taken after a config reload: it is kept
// in the state backend (here the local file beside the review queue), Close waits for its
// save, and the same canary built again starts decided.
func TestCanaryDecisionSurvivesARestart(t *testing.T) {
	path := releaseTree(t, releases)
	first := loadAndBuild(t, path)
	rt, _, err := first.Reload(path, func(*Runtime) error { return nil }) // the runtime in force after a reload closes it all
	if err != nil {
		t.Fatal(err)
	}
	_ = first.Close()
	if err := rt.Tasks["triage"].SetCanary(canary.RolledBack, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil { // waits for the decision's save
		t.Fatal(err)
	}
	again := loadAndBuild(t, path)
	t.Cleanup(func() { _ = again.Close() })
	st, _ := again.Tasks["triage"].Canary()
	if st.State != canary.RolledBack || st.Decision == nil || st.Decision.By != "alice" {
		t.Fatalf("after a restart: %+v; want alice's rollback", st.Status)
	}
}
