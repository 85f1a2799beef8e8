package main

import (
	"errors"
	"strings"
	"testing"
)

const canaryTestdata = "testdata/prompts-canary/"

// canaryRows returns the comparison's rows by arm, their fields joined by one space.
func canaryRows(out string) map[string]string {
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 7 && (f[0] == "incumbent" || f[0] == "candidate") {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	return rows
}

// TestPromptsTestCanary: a canary's candidate runs its fixtures beside the incumbent's, and
// the run fails when the canary's rule would roll the candidate back.
func TestPromptsTestCanary(t *testing.T) {
	for _, tc := range []struct {
		config               string
		incumbent, candidate string
		verdict              string
		summary              string
		fails                bool
		stderr               []string
	}{
		{
			config:    "rollback.yaml",
			incumbent: "incumbent a v1 4 4 0.0% 1",
			candidate: "candidate a v2 10 7 30.0% 5",
			verdict:   "candidate would be rolled back: violation rate 30.0% vs 0.0% (+30.0 points > 2.0)",
			summary:   "4 passed, 0 failed; 0 prompt(s) without fixtures; canary candidates: 1 would be rolled back, 0 would hold",
			fails:     true,
			stderr: []string{
				"FAIL moderation/a/v2/08-why-spam (canary candidate): rejected at schema",
				"FAIL moderation/a/v2/09-why-fine (canary candidate)",
				"FAIL moderation/a/v2/10-why-fraud (canary candidate)",
			},
		},
		{
			// The threshold is the config's: 30 points tolerate the same candidate.
			config:    "tolerant.yaml",
			incumbent: "incumbent a v1 4 4 0.0% 1",
			candidate: "candidate a v2 10 7 30.0% 5",
			verdict:   "candidate holds: violation rate 30.0% vs 0.0% (+30.0 points <= 30.0)",
			summary:   "canary candidates: 0 would be rolled back, 1 would hold",
			stderr:    []string{"FAIL moderation/a/v2/08-why-spam (canary candidate)"},
		},
		{
			config:    "holds.yaml",
			incumbent: "incumbent a v1 4 4 0.0% 1",
			candidate: "candidate a v3 5 5 0.0% 2",
			verdict:   "candidate holds: violation rate 0.0% vs 0.0% (+0.0 points <= 2.0)",
			summary:   "4 passed, 0 failed; 0 prompt(s) without fixtures; canary candidates: 0 would be rolled back, 1 would hold",
		},
	} {
		t.Run(tc.config, func(t *testing.T) {
			out, errOut, err := runPrompts(t, "test", "-c", canaryTestdata+tc.config)
			if tc.fails != errors.Is(err, errFailed) || (!tc.fails && err != nil) {
				t.Fatalf("err %v, want failure %v\nstdout:\n%s\nstderr:\n%s", err, tc.fails, out, errOut)
			}
			if !strings.Contains(out, "canary of moderation, tier 0:") {
				t.Errorf("no comparison:\n%s", out)
			}
			rows := canaryRows(out)
			if rows["incumbent"] != tc.incumbent || rows["candidate"] != tc.candidate {
				t.Errorf("rows\n%q\n%q\nwant\n%q\n%q\n%s", rows["incumbent"], rows["candidate"], tc.incumbent, tc.candidate, out)
			}
			for _, want := range []string{tc.verdict + "\n", tc.summary} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			if len(tc.stderr) == 0 && errOut != "" {
				t.Errorf("stderr:\n%s", errOut)
			}
		})
	}

	// -run narrows both arms alike: without the candidate's three lapses it holds.
	out, errOut, err := runPrompts(t, "test", "-c", canaryTestdata+"rollback.yaml", "-run", "/0[1-7]-|/clean$|/spam$")
	if err != nil || canaryRows(out)["candidate"] != "candidate a v2 7 7 0.0% 4" || !strings.Contains(out, "candidate holds: ") {
		t.Fatalf("-run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	// A filter that selects no fixture of the task drops its comparison.
	if out, _, err := runPrompts(t, "test", "-c", canaryTestdata+"rollback.yaml", "-run", "^triage/"); err != nil || strings.Contains(out, "canary of") {
		t.Fatalf("-run ^triage/: %v\n%s", err, out)
	}
}

// TestPromptsTestCanaryUnrecorded: a candidate without fixtures of its own gets no verdict,
// and fails the run under -strict only. A candidate that differs by its provider alone has
// none: the fixtures beside the tier's template are the tier's provider's outputs.
func TestPromptsTestCanaryUnrecorded(t *testing.T) {
	path := canaryTestdata + "unrecorded.yaml"
	out, errOut, err := runPrompts(t, "test", "-c", path)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	for _, want := range []string{
		"canary of moderation, tier 0:",
		"no verdict for the candidate: no fixtures beside prompts/mod/a.v4.tmpl: record some\n",
		"canary of moderation-b, tier 0:",
		"no verdict: the candidate has no fixtures of its own: those beside prompts/mod/a.v1.tmpl are a's outputs; record b's beside a template of its own (canary.prompt)\n",
		"8 passed, 0 failed; 2 prompt(s) without fixtures; canary candidates: 0 would be rolled back, 0 would hold",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"candidate a v4 0 0 - -", "candidate b v1 0 0 - -"} {
		if !containsFields(out, want) {
			t.Errorf("no row %q:\n%s", want, out)
		}
	}
	if _, _, err := runPrompts(t, "test", "-c", path, "-strict"); !errors.Is(err, errFailed) {
		t.Fatalf("-strict: %v", err)
	}
}

// containsFields reports whether some line of out has the fields of want.
func containsFields(out, want string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == want {
			return true
		}
	}
	return false
}

// TestPromptsTestCanaryBroken: a candidate whose fixtures do not load fails the run, and a
// task whose schema does not compile gets no verdict (its tiers fail already).
func TestPromptsTestCanaryBroken(t *testing.T) {
	files := map[string]string{
		"schemas/mod.json":                 `{"type":"object"}`,
		"schemas/bad.json":                 `{"type": 3}`,
		"prompts/mod/a.v1.tmpl":            "--- user\n{{.text}}\n",
		"prompts/mod/a.v1.fixtures/x.out":  "{}",
		"prompts/mod/a.v1.fixtures/x.want": "{}\n",
		"prompts/mod/a.v2.tmpl":            "--- user\n{{.text}}\n",
		"prompts/mod/a.v2.fixtures/y.out":  "{}",
	}
	path := writeConfig(t, `
providers:
  a: {type: sim}
tasks:
  mod:
    criticality: enrichment
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
    canary: {prompt: prompts/mod/a.v2.tmpl, share: 10%}
  other:
    criticality: enrichment
    schema: schemas/bad.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
    canary: {prompt: prompts/mod/a.v2.tmpl, share: 10%}
`, files)
	out, errOut, err := runPrompts(t, "test", "-c", path)
	if !errors.Is(err, errFailed) {
		t.Fatalf("err %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	for _, want := range []string{
		"no verdict for the candidate: the fixtures beside prompts/mod/a.v2.tmpl do not load\n",
		"canary of other, tier 0:",
		"no verdict: the task's schema does not compile\n",
		"1 passed, 2 failed;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "FAIL mod/a/v2/a.v2.fixtures (canary candidate): fixture ") || !strings.Contains(errOut, "y.want is missing") {
		t.Errorf("stderr:\n%s", errOut)
	}
}
