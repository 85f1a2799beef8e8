package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func runPrompts(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = prompts(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestPromptsTestShippedConfigs: the example's and the demo's prompts pass their fixtures,
// and every prompt of them has some.
func TestPromptsTestShippedConfigs(t *testing.T) {
	for _, path := range []string{exampleConfig, "demo/afloat.yaml"} {
		t.Run(path, func(t *testing.T) {
			out, errOut, err := runPrompts(t, "test", "-c", path, "-strict")
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			if strings.Contains(out, "FAIL") || !strings.Contains(out, " 0 failed; 0 prompt(s) without fixtures") {
				t.Fatalf("stdout:\n%s", out)
			}
			for _, want := range []string{"TASK", "triage", "moderation", "pass", "recorded-clean", "extract", "schema"} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

var promptsFiles = map[string]string{
	"schemas/mod.json":      `{"type":"object","properties":{"allowed":{"type":"boolean"}},"required":["allowed"],"additionalProperties":false}`,
	"prompts/mod/a.v1.tmpl": "--- system\nModerate.\n--- user\n{{.text}}\n",
	"prompts/mod/b.v4.tmpl": "--- user\nModerate: {{.text}}\n",
	// a: one passing fixture, one wrong accept, one refused at the wrong stage.
	"prompts/mod/a.v1.fixtures/ok.out":          "Ответ:\n```json\n{\"Allowed\": \"да\"}\n```",
	"prompts/mod/a.v1.fixtures/ok.want":         "steps: locate rename coerce\n{\"allowed\": true}\n",
	"prompts/mod/a.v1.fixtures/lenient.out":     `{"allowed": true, "why": "fine"}`,
	"prompts/mod/a.v1.fixtures/lenient.want":    "{\"allowed\": true}\n",
	"prompts/mod/a.v1.fixtures/wrongstage.out":  `Não posso avaliar.`,
	"prompts/mod/a.v1.fixtures/wrongstage.want": "reject: schema\n",
	// b has no fixtures.
}

const promptsConfig = `
providers:
  a: {type: sim}
  b: {type: openai, model: m, base_url: "${UPSTREAM_URL}", api_key: "${UPSTREAM_KEY}"}
tasks:
  moderation:
    criticality: critical
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}, {provider: b, prompt: prompts/mod/b.v4.tmpl}]
`

func TestPromptsTestReportsFailures(t *testing.T) {
	t.Setenv("UPSTREAM_KEY", "sk-not-printed")
	path := writeConfig(t, promptsConfig, promptsFiles)
	out, errOut, err := runPrompts(t, "test", "-c", path)
	if !errors.Is(err, errFailed) {
		t.Fatalf("err %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 6 {
			rows[f[3]] = strings.Join(f, " ")
		}
	}
	for fixture, want := range map[string]string{
		"ok":         "moderation a v1 ok pass -",
		"lenient":    "moderation a v1 lenient FAIL schema",
		"wrongstage": "moderation a v1 wrongstage FAIL extract",
		"-":          "moderation b v4 - no fixtures -",
	} {
		if rows[fixture] != want {
			t.Errorf("row %q = %q, want %q\n%s", fixture, rows[fixture], want, out)
		}
	}
	for _, want := range []string{"FAIL moderation/a/v1/lenient: rejected at schema", "'why' not allowed", "rejected at extract, want at schema"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "1 passed, 2 failed; 1 prompt(s) without fixtures") {
		t.Errorf("summary:\n%s", out)
	}
	if strings.Contains(out+errOut, "sk-not-printed") {
		t.Error("a credential reached the output")
	}

	// -run narrows the fixtures; -strict fails on a prompt without fixtures.
	if out, errOut, err := runPrompts(t, "test", "-c", path, "-run", "/ok$"); err != nil || !strings.Contains(out, "1 passed, 0 failed; 0 prompt(s)") {
		t.Fatalf("-run: %v\n%s%s", err, out, errOut)
	}
	if _, _, err := runPrompts(t, "test", "-c", path, "-run", "^moderation/b/"); err != nil {
		t.Fatalf("-run without -strict: %v", err)
	}
	if _, _, err := runPrompts(t, "test", "-c", path, "-run", "^moderation/b/", "-strict"); !errors.Is(err, errFailed) {
		t.Fatalf("-strict: %v", err)
	}
}

func TestPromptsTestBrokenFiles(t *testing.T) {
	files := map[string]string{
		"schemas/mod.json":                  `{"type":"object"}`,
		"prompts/mod/a.v1.tmpl":             "--- user\n{{.text}}\n",
		"prompts/mod/a.v1.fixtures/x.out":   "{}",
		"prompts/mod/a.v1.fixtures/x.want":  "expect: nothing\n",
		"schemas/bad.json":                  `{"type": 3}`,
		"prompts/other/a.v2.tmpl":           "--- user\n{{.text}}\n",
		"prompts/other/a.v2.fixtures/y.out": "{}",
	}
	path := writeConfig(t, `
providers:
  a: {type: sim}
tasks:
  mod:
    criticality: enrichment
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
  other:
    criticality: enrichment
    schema: schemas/bad.json
    cascade: [{provider: a, prompt: prompts/other/a.v2.tmpl}]
`, files)
	out, errOut, err := runPrompts(t, "test", "-c", path)
	if !errors.Is(err, errFailed) {
		t.Fatalf("err %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{`unknown key "expect"`, "schema other: "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestPromptsUsage(t *testing.T) {
	path := writeConfig(t, promptsConfig, promptsFiles)
	for _, args := range [][]string{{}, {"run"}, {"test", "-nope"}, {"test", "-c", path, "extra"}, {"test", "-c", path, "-run", "("}} {
		if _, _, err := runPrompts(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: err %v, want errUsage", args, err)
		}
	}
	// A config that does not load is a failure, with its errors printed.
	bad := writeConfig(t, "tasks: {x: {criticality: sometimes}}\n", nil)
	_, errOut, err := runPrompts(t, "test", "-c", bad)
	if !errors.Is(err, errFailed) || !strings.Contains(errOut, "criticality") {
		t.Fatalf("err %v, stderr %s", err, errOut)
	}
	if _, _, err := runPrompts(t, "test", "-c", path+".missing"); !errors.Is(err, errFailed) {
		t.Fatalf("missing file: %v", err)
	}
}
