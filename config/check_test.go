package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckExample: the example passes `afloat check` with no environment variable set and
// no warning.
func TestCheckExample(t *testing.T) {
	warnings, err := Check(examplePath)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q, want none", warnings)
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
			name:   "ramp_up not applied",
			config: "defaults:\n  breaker: {ramp_up: 1m}\n" + minimal,
			want:   "line 2: defaults.breaker.ramp_up: is not applied by this build",
		},
		{
			name:   "write timeout not applied",
			config: strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, timeouts: {write: 2s}}", 1),
			want:   "providers.primary.timeouts.write: is not applied by this build",
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
