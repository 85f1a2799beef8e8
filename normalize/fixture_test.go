package normalize

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFixture(t *testing.T) {
	tests := []struct {
		name, want string
		check      func(Fixture) bool
		err        string
	}{
		{"accept", "# a comment\nnote: clean\nlang: ru\nsteps: locate repair\n\n{\"a\": 1}\n",
			func(f Fixture) bool {
				return f.Reject == "" && string(f.Want) == `{"a": 1}` && f.CheckSteps && f.Steps == StepLocate|StepRepair && f.Lang == "ru" && f.Note == "clean"
			}, ""},
		{"reject", "reject: schema\ndetail: /a\ndetail: maximum\n",
			func(f Fixture) bool {
				return f.Reject == "schema" && len(f.Details) == 2 && f.Want == nil && !f.CheckSteps
			}, ""},
		{"null result", "null\n", func(f Fixture) bool { return string(f.Want) == "null" }, ""},
		{"finish", "finish: length\nreject: truncated\ndetail: token limit\n",
			func(f Fixture) bool { return f.Finish == "length" && f.Reject == StageTruncated }, ""},
		{"no finish is unknown", "{}\n", func(f Fixture) bool { return f.Finish == "" }, ""},
		{"unknown finish", "finish: max_tokens\n{}\n", nil, `unknown finish reason "max_tokens"`},
		{"no result", "note: x\n", nil, "needs its expected result"},
		{"both", "reject: schema\n{}\n", nil, "no expected result"},
		{"unknown stage", "reject: parse\n", nil, `unknown stage "parse"`},
		{"unknown key", "expect: ok\n{}\n", nil, `unknown key "expect"`},
		{"detail without reject", "detail: x\n{}\n", nil, "goes with reject"},
		{"bad steps", "steps: fix\n{}\n", nil, `unknown step "fix"`},
		{"bad JSON", "{\"a\": }\n", nil, "not valid JSON"},
		{"stray line", "hello\n{}\n", nil, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFixture("case", "out", tt.want)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil || !tt.check(f) {
				t.Fatalf("fixture %+v, err %v", f, err)
			}
		})
	}
}

func TestLoadFixtures(t *testing.T) {
	write := func(dir string, files map[string]string) {
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	write(dir, map[string]string{"b.out": "x", "b.want": "reject: extract\n", "a.out": "{}", "a.want": "{}\n", "README.md": "ignored"})
	fs, err := LoadFixtures(dir)
	if err != nil || len(fs) != 2 || fs[0].Name != "a" || fs[1].Name != "b" || fs[1].Output != "x" {
		t.Fatalf("fixtures %+v, err %v", fs, err)
	}

	lone := t.TempDir()
	write(lone, map[string]string{"a.out": "{}"})
	if _, err := LoadFixtures(lone); err == nil || !strings.Contains(err.Error(), "a.want is missing") {
		t.Fatalf("lone .out: %v", err)
	}
	lone = t.TempDir()
	write(lone, map[string]string{"a.want": "{}"})
	if _, err := LoadFixtures(lone); err == nil || !strings.Contains(err.Error(), "a.out is missing") {
		t.Fatalf("lone .want: %v", err)
	}
	if _, err := LoadFixtures(filepath.Join(dir, "nope")); !os.IsNotExist(err) {
		t.Fatalf("missing folder: %v", err)
	}
	if got := FixtureDir("prompts/triage/gigachat-pro.v3.tmpl"); got != "prompts/triage/gigachat-pro.v3.fixtures" {
		t.Fatalf("FixtureDir = %q", got)
	}
}

func TestRunFixture(t *testing.T) {
	c, err := Compile("triage", []byte(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	valid := `{"department":"sales","is_urgent":0.5,"urgency_score":1}`
	tests := []struct {
		name, out, want, problem string
	}{
		{"accepted as expected", "```json\n" + valid + "\n```", "steps: locate\n{\"urgency_score\": 1.0, \"department\": \"sales\", \"is_urgent\": 0.50}", ""},
		{"wrong accept", valid, "reject: schema\n", "accepted as"},
		{"wrong stage", "no json", "reject: schema\n", "rejected at extract, want at schema"},
		{"detail missing", `{"department":"sales"}`, "reject: schema\ndetail: /is_urgent\n", `no detail contains "/is_urgent"`},
		{"rejected, want accept", "no json", valid, "rejected at extract"},
		{"other result", valid, `{"department":"billing","is_urgent":0.5,"urgency_score":1}`, "result"},
		{"other steps", valid, "steps: repair\n" + valid, "steps none, want repair"},
		{"finish stop completes a number", valid[:len(valid)-1], "finish: stop\nsteps: repair\n" + valid, ""},
		{"finish length truncates", valid[:len(valid)-1], "finish: length\nreject: truncated\ndetail: token limit\n", ""},
		{"no finish: the number may be cut", valid[:len(valid)-1], "steps: repair\n" + valid, "rejected at repair"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFixture(tt.name, tt.out, tt.want)
			if err != nil {
				t.Fatal(err)
			}
			r := c.RunFixture(f)
			if r.Pass != (tt.problem == "") || !strings.Contains(r.Problem, tt.problem) {
				t.Fatalf("pass %v, problem %q; want %q", r.Pass, r.Problem, tt.problem)
			}
		})
	}
}
