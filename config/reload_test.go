package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
)

const reloadBefore = `
providers:
  primary: {type: sim}
  backup: {type: sim}
tasks:
  triage:
    criticality: enrichment
    schema: triage.json
    cascade:
      - {provider: primary, prompt: prompts/primary.v1.tmpl}
      - {provider: backup, prompt: prompts/backup.v1.tmpl}
`

// reloadAfter changes backup's settings, adds a provider and a task staged at 10%, and
// gives triage's tier 0 a new prompt version.
const reloadAfter = `
providers:
  primary: {type: sim}
  backup: {type: sim, max_in_flight: 7}
  third: {type: sim}
tasks:
  triage:
    criticality: enrichment
    schema: triage.json
    cascade:
      - {provider: primary, prompt: prompts/primary.v2.tmpl}
      - {provider: backup, prompt: prompts/backup.v1.tmpl}
  summary:
    criticality: enrichment
    schema: triage.json
    rollout_pct: 10
    cascade:
      - {provider: third, prompt: prompts/backup.v1.tmpl}
      - {provider: primary, prompt: prompts/primary.v2.tmpl}
`

// TestReloadKeepsWhatWasOpened: a reload builds over the runtime in force: the review store,
// state backend, registry and the flags in force are the same objects; the unchanged
// provider keeps its breaker (open) and fault injector; the changed one gets a new breaker
// but keeps its fault; the new task takes its rollout_pct. A reload whose serve fails leaves
// the old runtime in force with its flag defaults; once replaced, the old runtime refuses to
// reload and its Close closes nothing the new one uses.
func TestReloadKeepsWhatWasOpened(t *testing.T) {
	ctx := context.Background()
	dir := writeTree(t, map[string]string{
		"afloat.yaml": reloadBefore, "triage.json": triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt, "prompts/primary.v2.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	path := filepath.Join(dir, "afloat.yaml")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inForce := rt
	t.Cleanup(func() { _ = inForce.Close() })
	if err := rt.State.Set(ctx, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.State.SetFault(ctx, "backup", fault.Fault{Mode: fault.ModeTimeout}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Engine.Breaker("primary").Force(ctx, breaker.StateOpen); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(reloadAfter), 0o644); err != nil {
		t.Fatal(err)
	}

	errRefused := errors.New("the gateway refused it")
	if _, _, err := rt.Reload(path, func(*Runtime) error { return errRefused }); !errors.Is(err, errRefused) {
		t.Fatalf("reload whose serve failed: %v", err)
	}
	if d, _ := rt.Flags.Flags(ctx); d.Tasks["summary"].RolloutPct != nil {
		t.Fatalf("a reload that failed left the new task's flags in force: %+v", d.Tasks)
	}
	if rt.Engine.Breaker("primary").State(ctx) != breaker.StateOpen {
		t.Fatal("a reload that failed changed the breaker in force")
	}

	var served *Runtime
	next, diff, err := rt.Reload(path, func(n *Runtime) error { served = n; return nil })
	if err != nil {
		t.Fatal(err)
	}
	inForce = next
	if served != next {
		t.Fatal("serve was not given the runtime Reload returned")
	}
	if next.Review != rt.Review || next.State != rt.State || next.Registry != rt.Registry || next.Metrics != rt.Metrics || next.Flags != rt.Flags {
		t.Fatal("the reload opened stores or a registry of its own")
	}
	if next.Engine.Breaker("primary") != rt.Engine.Breaker("primary") || next.Faults["primary"] != rt.Faults["primary"] {
		t.Fatal("the unchanged provider did not keep its breaker and fault injector")
	}
	if next.Engine.Breaker("primary").State(ctx) != breaker.StateOpen {
		t.Fatal("the breaker forced open is not open after the reload")
	}
	if next.Engine.Breaker("backup") == rt.Engine.Breaker("backup") {
		t.Fatal("backup's max_in_flight changed and it kept its breaker")
	}
	if next.Faults["backup"].Fault().Mode != fault.ModeTimeout {
		t.Fatal("the changed provider lost the fault injected into it")
	}
	if err := next.State.SetFault(ctx, "third", fault.Fault{Mode: fault.ModeMalformed}); err != nil {
		t.Fatalf("the state backend does not know the provider the reload added: %v", err)
	}
	d, _ := next.Flags.Flags(ctx)
	if !d.Tasks["triage"].Kill || d.Tasks["summary"].Rollout() != 10 {
		t.Fatalf("flags after the reload: %+v; want triage still killed and summary at 10%%", d.Tasks)
	}
	if !strings.Contains(diff.String(), "+ providers.third: added\n") || !strings.Contains(diff.String(), "~ tasks.triage.cascade[0].prompt: version v1 → v2\n") {
		t.Fatalf("diff:\n%s", diff)
	}
	if _, err := next.Registry.Gather(); err != nil {
		t.Fatalf("the registry after the reload: %v", err)
	}

	if _, _, err := rt.Reload(path, func(*Runtime) error { return nil }); !errors.Is(err, ErrNotInForce) {
		t.Fatalf("reloading a replaced runtime: %v", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := next.Review.Ping(ctx); err != nil {
		t.Fatalf("closing the replaced runtime closed the review store: %v", err)
	}
	if err := next.State.Set(ctx, &flags.Document{}); err != nil {
		t.Fatalf("closing the replaced runtime closed the state backend: %v", err)
	}
}

// TestReloadRefusesRestartKeys: a file that changes a key only a restart applies is refused,
// every such key named, and the runtime in force stays.
func TestReloadRefusesRestartKeys(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"afloat.yaml": reloadBefore, "triage.json": triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	path := filepath.Join(dir, "afloat.yaml")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if err := os.WriteFile(path, []byte("server: {listen: \"127.0.0.1:9999\"}\ntelemetry: {otlp: {endpoint: \"http://127.0.0.1:4318\"}}\n"+reloadBefore), 0o644); err != nil {
		t.Fatal(err)
	}
	called := false
	_, diff, err := rt.Reload(path, func(*Runtime) error { called = true; return nil })
	errs := asErrors(t, err)
	if called || findError(errs, "server.listen", "restart") == nil || findError(errs, "telemetry.otlp.endpoint", "restart") == nil {
		t.Fatalf("served %v; errors %v", called, errs)
	}
	if len(diff.Restart()) != 2 {
		t.Fatalf("restart changes %+v", diff.Restart())
	}
	if _, _, err := rt.Reload(filepath.Join(dir, "missing.yaml"), func(*Runtime) error { return nil }); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}
