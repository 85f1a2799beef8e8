package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckExample: the example passes `afloat check` with no environment variable set, and
// it writes no key that this build does not apply (check would warn about it).
func TestCheckExample(t *testing.T) {
	warnings, err := Check(examplePath)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	// Drop a line here when the example stops writing its key or the key is applied.
	var want []string
	if len(warnings) != len(want) {
		t.Fatalf("warnings %q, want %q", warnings, want)
	}
	for i, w := range want {
		if !strings.HasSuffix(warnings[i], w) {
			t.Errorf("warning %q, want one ending %q", warnings[i], w)
		}
	}
}

// TestCheckBroken: Check reports errors of Load, of Build and of rendering in one run.
func TestCheckBroken(t *testing.T) {
	config := `
server:
  listen: 127.0.0.1:8080
  colour: blue
providers:
  primary: {type: sim}
  hosted: {type: gigachat, model: GigaChat-Pro, auth_key: k, ca_file: certs/none.pem}
tasks:
  triage:
    criticality: enrichment
    schema: triage.json
    input: {subject: {type: string}, message: {type: string}, tags: {type: array}}
    cascade:
      - {provider: primary, prompt: prompts/tags.v1.tmpl}
      - {provider: hosted, prompt: prompts/missing.v1.tmpl}
  moderation:
    schema: triage.json
    cascade: [{provider: primary, prompt: prompts/primary.v1.tmpl}]
routes:
  chat:
    criticality: assistance
    budget: forever
    cascade: [primary]
`
	dir := writeTree(t, map[string]string{
		"afloat.yaml":             config,
		"triage.json":             triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt,
		"prompts/tags.v1.tmpl":    "--- user\nFirst tag: {{index .tags 0}}\n{{.subject}} {{.message}}\n",
	})
	_, err := Check(filepath.Join(dir, "afloat.yaml"))
	if err == nil {
		t.Fatal("check passed a broken config")
	}
	errs := asErrors(t, err)
	want := []struct {
		path, msg string
		line      int
	}{
		{"server.colour", "unknown key", 4},
		{"providers.hosted.ca_file", "no such file", 7},
		{"tasks.triage.cascade[0].prompt", "rendering with a sample input", 14},
		{"tasks.triage.cascade[1].prompt", "no such file", 15},
		{"tasks.moderation.criticality", "explicit decision", 16},
		{"routes.chat.budget", "invalid duration", 22},
	}
	for _, w := range want {
		e := findError(errs, w.path, w.msg)
		if e == nil {
			t.Errorf("no error at %s saying %q", w.path, w.msg)
			continue
		}
		if e.Line != w.line {
			t.Errorf("%s on line %d, want %d", e, e.Line, w.line)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i := 1; i < len(errs); i++ {
		if errs[i].Line < errs[i-1].Line {
			t.Errorf("errors out of line order:\n%v", err)
			break
		}
	}
}

// TestCheckWarnings: Check warns about configs that work but may not do what was meant.
func TestCheckWarnings(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{
			name:   "single-tier task",
			config: strings.Replace(minimal, "      - {provider: backup, prompt: prompts/backup.v1.tmpl}\n", "", 1),
			want:   "tasks.triage: cascade has a single tier: when its provider fails, the task goes straight to its on_exhausted policy (heuristic)",
		},
		{
			name:   "single-tier route",
			config: minimal + "routes:\n  chat: {criticality: assistance, cascade: [primary]}\n",
			want:   "routes.chat: cascade has a single tier",
		},
		{
			name:   "unused heuristic",
			config: minimal + "    on_exhausted: unavailable\n    heuristic:\n      - {default: {department: null, is_urgent: 0, urgency_score: 0}}\n",
			want:   "tasks.triage.heuristic: rules are never used: on_exhausted is unavailable",
		},
		{
			name:   "review sla without review",
			config: minimal + "    review_sla: 10m\n",
			want:   "tasks.triage.review_sla: has no effect",
		},
		{
			name:   "write timeout not applied",
			config: strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, timeouts: {write: 2s}}", 1),
			want:   "providers.primary.timeouts.write: is not applied by this build",
		},
		{
			name:   "postgres settings of a sqlite store",
			config: "review:\n  store: sqlite\n  postgres: {url: \"postgres://localhost/afloat\"}\n" + minimal,
			want:   "line 3: review.postgres: is not used: review.store is sqlite",
		},
		{
			name:   "redis settings of local state",
			config: "state:\n  backend: local\n  on_failure: fail\n" + minimal,
			want:   "line 3: state.on_failure: is not used: state.backend is local, not redis",
		},
		{
			name:   "otlp settings without an endpoint",
			config: "telemetry:\n  otlp: {protocol: grpc}\n" + minimal,
			want:   "line 2: telemetry.otlp.protocol: has no effect without telemetry.otlp.endpoint",
		},
		{
			name:   "otlp insecure over http",
			config: "telemetry:\n  otlp: {endpoint: \"http://127.0.0.1:4318\", insecure: true}\n" + minimal,
			want:   "telemetry.otlp.insecure: has no effect: the endpoint's scheme decides",
		},
		{
			name:   "connect timeout of a sim provider",
			config: strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, timeouts: {connect: 1s}}", 1),
			want:   "providers.primary.timeouts.connect: has no effect on a sim provider",
		},
		{
			name:   "allow_critical on an enrichment task",
			config: minimal + "    cache: {ttl: 1h, allow_critical: true}\n",
			want:   "tasks.triage.cache.allow_critical: has no effect: the task is not critical",
		},
		{
			name:   "system_mode without system",
			config: minimal + "routes:\n  chat:\n    criticality: assistance\n    cascade:\n      - {provider: primary, system_mode: prepend}\n      - backup\n",
			want:   "routes.chat.cascade[0].system_mode: has no effect without system",
		},
		{
			name:   "postgres review store with local flags",
			config: "review: {store: postgres, postgres: {url: \"postgres://localhost/afloat\"}}\n" + minimal,
			want:   "line 1: review.store: postgres holds the review queue of the fleet, but state.backend local keeps each gateway's flags",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{
				"afloat.yaml": tc.config, "triage.json": triageSchema,
				"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
			})
			warnings, err := Check(filepath.Join(dir, "afloat.yaml"))
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			for _, w := range warnings {
				if strings.Contains(w, tc.want) {
					return
				}
			}
			t.Errorf("no warning %q in %q", tc.want, warnings)
		})
	}
}

// TestCheckUnappliedKeys: each key Load accepts but this build does not apply gets a warning
// naming its path and line; a file without them gets none.
func TestCheckUnappliedKeys(t *testing.T) {
	tests := []struct {
		name    string
		snippet string // prepended to minimal, with "# here" on the key's line
		path    string
	}{
		{"defaults.timeouts.pool", "defaults:\n  timeouts:\n    pool: 50ms  # here\n", "defaults.timeouts.pool"},
		{"providers.primary.timeouts.write", "", "providers.primary.timeouts.write"},
	}
	check := func(t *testing.T, config string) []string {
		t.Helper()
		dir := writeTree(t, map[string]string{
			"afloat.yaml": config, "triage.json": triageSchema,
			"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
		})
		warnings, err := Check(filepath.Join(dir, "afloat.yaml"))
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		return warnings
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config := tc.snippet + minimal
			if tc.snippet == "" {
				config = strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, timeouts: {write: 2s}}  # here", 1)
			}
			want := fmt.Sprintf("line %d: %s: is not applied by this build", markedLine(t, config), tc.path)
			warnings := check(t, config)
			if !slices.Contains(warnings, want) {
				t.Fatalf("no warning %q in %q", want, warnings)
			}
			if len(warnings) != 1 {
				t.Errorf("warnings %q, want only %q", warnings, want)
			}
		})
	}
	t.Run("memory is now local", func(t *testing.T) {
		config := "state:\n  backend: memory  # here\n" + minimal
		want := fmt.Sprintf("line %d: state.backend: memory is now called local (flags and faults persist in the SQLite file beside the review queue)", markedLine(t, config))
		if warnings := check(t, config); !slices.Equal(warnings, []string{want}) {
			t.Fatalf("warnings %q, want %q", warnings, want)
		}
	})
	t.Run("none", func(t *testing.T) {
		// The applied neighbours of those keys.
		config := `state: {backend: local}
drill: {max_age: 720h}
review: {store: sqlite, sqlite: {path: queue.db}, claim_ttl: 15m, retention: 720h,
  webhook: {url: "https://hooks.example/review", secret: whsec-5e1b9c3f7a2d8e46}}
alerts:
  evaluate_every: 10s
  fallback_share: {above: 0.3, for: 10m, window: 5m, min_calls: 20}
  primary_open: {for: 1m}
  contract_violation_rate: {above: 0.1, for: 5m, webhook: "https://hooks.example/alert", secret: s3cret}
  review_sla: {for: 0s}
  unusable: {}
  drill_stale: {for: 1h}
defaults:
  breaker: {recovery: 10s, unusable_cooldown: 1m, ramp_up: 1m}
  timeouts: {connect: 500ms, initial: 1s}
` + minimal
		if warnings := check(t, config); len(warnings) != 0 {
			t.Fatalf("warnings %q, want none", warnings)
		}
	})
}

func TestSampleValue(t *testing.T) {
	tests := []struct {
		name   string
		schema map[string]any
		want   any
	}{
		{"string", map[string]any{"type": "string"}, "sample f"},
		{"no type", map[string]any{}, "sample f"},
		{"integer", map[string]any{"type": "integer"}, 1},
		{"number", map[string]any{"type": "number"}, 1.5},
		{"boolean", map[string]any{"type": "boolean"}, true},
		{"nullable integer", map[string]any{"type": []any{"null", "integer"}}, 1},
		{"enum", map[string]any{"type": "string", "enum": []any{"low", "high"}}, "low"},
		{"const", map[string]any{"const": "fixed"}, "fixed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sampleValue("f", tc.schema); got != tc.want {
				t.Errorf("sample %v (%T), want %v", got, got, tc.want)
			}
		})
	}
}

// TestCheckReportsFileErrorsOfAnInvalidTask: a task with an error in the file itself still
// has its schema and templates read, so one run reports everything.
func TestCheckReportsFileErrorsOfAnInvalidTask(t *testing.T) {
	broken := strings.Replace(minimal, "criticality: enrichment", "criticality: important", 1)
	broken = strings.Replace(broken, "prompts/backup.v1.tmpl", "prompts/gone.v1.tmpl", 1)
	dir := writeTree(t, map[string]string{
		"afloat.yaml": broken, "triage.json": triageSchema, "prompts/primary.v1.tmpl": triagePrompt,
	})
	_, err := Check(filepath.Join(dir, "afloat.yaml"))
	errs := asErrors(t, err)
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Path)
	}
	joined := strings.Join(paths, " ")
	if !strings.Contains(joined, "tasks.triage.criticality") || !strings.Contains(joined, "tasks.triage.cascade[1].prompt") {
		t.Fatalf("errors at %v, want both the criticality and the missing prompt", paths)
	}
}

// TestDefaultsErrorsOnce: a bad value under defaults, which every provider inherits, is
// reported once, where defaults writes it, not again on each provider's line; a provider
// whose own section fails is reported at its own key; a bad alert once, at its key.
func TestDefaultsErrorsOnce(t *testing.T) {
	config := "defaults:\n  breaker: {failure_rate: 2}   # here\n  timeouts: {min: 5s, max: 1s}\n" +
		strings.Replace(minimal, "backup: {type: sim}", "backup: {type: sim, timeouts: {min: 3s, max: 2s}}", 1) +
		"alerts:\n  fallback_share: {above: 1.5}\n"
	dir := writeTree(t, map[string]string{
		"afloat.yaml": config, "triage.json": triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	_, err := Check(filepath.Join(dir, "afloat.yaml"))
	errs := asErrors(t, err)
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Path)
	}
	want := []string{"defaults.breaker.failure_rate", "defaults.timeouts", "providers.backup.timeouts", "alerts.fallback_share.above"}
	if !slices.Equal(paths, want) {
		t.Fatalf("errors at %q, want %q:\n%v", paths, want, err)
	}
	if line := markedLine(t, config); errs[0].Line != line || errs[1].Line != line+1 {
		t.Errorf("lines %d and %d, want %d and %d", errs[0].Line, errs[1].Line, line, line+1)
	}
	if !strings.Contains(errs[2].Msg, "min 3s exceeds max 2s") {
		t.Errorf("backup's error %q, want its own values", errs[2].Msg)
	}
}

// TestSchemaErrorAtItsKey: a schema file that is not JSON is reported at the task's schema
// key, naming the file.
func TestSchemaErrorAtItsKey(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"afloat.yaml": minimal, "triage.json": `{"type": "object",`,
		"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	_, err := Check(filepath.Join(dir, "afloat.yaml"))
	e := findError(asErrors(t, err), "tasks.triage.schema", "triage.json: ")
	if e == nil || e.Line != 8 { // minimal's schema: line
		t.Fatalf("want an error at tasks.triage.schema, line 8, naming triage.json: %v", err)
	}
}
