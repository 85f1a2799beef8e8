package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// minimal is a valid config without files on disk: enough for Load, not for Build.
const minimal = `
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

// noEnv is an environment with nothing set.
func noEnv(string) (string, bool) { return "", false }

// envOf is an environment holding vars.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// markedLine returns the 1-based line of text that holds the comment "# here".
func markedLine(t *testing.T, text string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "# here") {
			return i + 1
		}
	}
	t.Fatal("no line marked # here")
	return 0
}

// asErrors returns err's Errors, failing the test when err is not one.
func asErrors(t *testing.T, err error) Errors {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not Errors", err, err)
	}
	return errs
}

// findError returns the error at path whose message holds msg, or nil.
func findError(errs Errors, path, msg string) *Error {
	for _, e := range errs {
		if e.Path == path && strings.Contains(e.Msg, msg) {
			return e
		}
	}
	return nil
}

func mustParse(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse([]byte(text), "/cfg", noEnv)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return f
}

const triageSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
  },
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false
}`

const triagePrompt = "--- system\nTriage the ticket as JSON.\n--- user\n{{.subject}}\n{{.message}}\n"

// writeTree writes files (path → content) under a new folder and returns the folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// buildTree writes the config and the files of minimal beside it, and builds it on clk.
func buildTree(t *testing.T, config string, clk clockwork.Clock) *Runtime {
	t.Helper()
	dir := writeTree(t, map[string]string{
		"afloat.yaml":             config,
		"triage.json":             triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt,
		"prompts/backup.v1.tmpl":  triagePrompt,
	})
	f, err := Load(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	rt, err := f.Build(BuildOptions{Clock: clk})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// drive advances clk in small steps, whenever the call has waiters timers pending, until done
// is closed. waiters counts the call's deadline and what it waits on besides: 3 while a sim
// provider with a latency answers (deadline, attempt timeout, latency), 2 while a retry
// backs off (deadline, backoff).
func drive(t *testing.T, clk *clockwork.FakeClock, waiters int, done <-chan struct{}) {
	t.Helper()
	for step := 0; ; step++ {
		select {
		case <-done:
			return
		default:
		}
		if step > 100000 {
			t.Fatal("the call never ended")
		}
		// waiters while an attempt runs; one fewer while a retry waits out its backoff.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		blocked := clk.BlockUntilContext(ctx, waiters) == nil
		cancel()
		if !blocked {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			blocked = clk.BlockUntilContext(ctx, waiters-1) == nil
			cancel()
		}
		if blocked {
			clk.Advance(10 * time.Millisecond)
		}
	}
}
