package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpExitsZero: "afloat <command> -h" prints the command's usage on stdout and exits 0,
// for every command.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-h"}, {"serve", "-c", "x.yaml", "--help"}, {"check", "-h"}, {"check", "-help"},
		{"demo", "-h"}, {"review", "-h"}, {"review", "list", "-h"}, {"review", "show", "rv_1", "-h"},
		{"prompts", "-h"}, {"prompts", "test", "-h"}, {"version", "-h"}, {"-h"}, {"help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), args, &out, &errOut)
			if code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			if !strings.Contains(out.String(), "Usage") || errOut.Len() > 0 {
				t.Errorf("stdout %q\nstderr %q: want the usage on stdout only", out.String(), errOut.String())
			}
		})
	}
}

// TestStrayArgumentRefused: a positional argument a command does not take is refused, named,
// with exit 2, never ignored.
func TestStrayArgumentRefused(t *testing.T) {
	for _, args := range [][]string{
		{"check", "-c", exampleConfig, "extra"}, {"check", "--offline", "extra"},
		{"demo", "extra"}, {"version", "extra"}, {"prompts", "test", "extra"},
		{"review", "list", "extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), args, &out, &errOut)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(errOut.String(), `"extra"`) {
				t.Errorf("stderr %q: want the argument named", errOut.String())
			}
		})
	}
}

// TestCheckRefusesUndeclaredInput: check and serve both refuse a template that reads a
// field the task's input schema does not declare.
func TestCheckRefusesUndeclaredInput(t *testing.T) {
	files := map[string]string{
		"schemas/mod.json":      testFiles["schemas/mod.json"],
		"prompts/mod/a.v1.tmpl": "--- user\nModerate: {{.text}} {{.body}}\n",
	}
	path := writeConfig(t, `
providers:
  a: {type: sim}
tasks:
  moderation:
    criticality: critical
    input: {text: {type: string}}
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
`, files)
	for _, cmd := range []string{"check", "serve"} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{cmd, "-c", path}, &out, &errOut)
		if code != 1 || !strings.Contains(errOut.String(), `tasks.moderation.cascade[0].prompt: reads "body"`) {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %s", cmd, code, out.String(), errOut.String())
		}
	}
}

// TestCheckOfflineSeeds: the seeds' config passes check --offline with none of its
// variables set, and check names the ones it gave placeholders.
func TestCheckOfflineSeeds(t *testing.T) {
	for _, n := range []string{"GIGACHAT_AUTH_KEY", "GIGACHAT_SCOPE", "GIGACHAT_CA_FILE", "YANDEX_FOLDER_ID",
		"YANDEX_API_KEY", "TLITE_API_KEY", "AFLOAT_ADMIN_TOKEN"} {
		t.Setenv(n, "")
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
	const seeds = "../../examples/seeds/afloat.yaml"
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check", "-c", seeds}, &out, &errOut); code != 1 {
		t.Fatalf("check without credentials: exit %d, want 1", code)
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"check", "--offline", "-c", seeds}, &out, &errOut); code != 0 {
		t.Fatalf("check --offline: exit %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
	}
	if want := "placeholders for GIGACHAT_AUTH_KEY, YANDEX_API_KEY, YANDEX_FOLDER_ID"; !strings.Contains(out.String(), want) {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
}

// TestCheckOpenAccessOffLoopback: check refuses what serve refuses: no tenants off loopback.
func TestCheckOpenAccessOffLoopback(t *testing.T) {
	path := writeConfig(t, `
server: {listen: 0.0.0.0:8080}
providers:
  a: {type: sim}
tasks:
  moderation:
    criticality: critical
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
`, testFiles)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check", "-c", path}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "line 2: server.listen:") {
		t.Fatalf("exit %d\nstderr %s", code, errOut.String())
	}
}

// TestVersionText: the revision, its dirty mark, the commit time and the Go version come
// from the build info; what it lacks is left out.
func TestVersionText(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
	}}
	got := versionText(bi)
	for _, want := range []string{"afloat v1.2.3\n", "revision abc123 (dirty)\n", "2026-01-02T03:04:05Z", "go1.99 " + runtime.GOOS} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	bare := versionText(&debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}})
	if strings.Contains(bare, "revision") || !strings.HasPrefix(bare, "afloat (devel)\n") {
		t.Errorf("without VCS settings: %q", bare)
	}
}

// TestVersionStamped builds the binary as a user does (go build, VCS stamping on) and runs
// `afloat version`: it names the checked-out revision and the Go version.
func TestVersionStamped(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to stamp", err)
	}
	bin := buildAfloat(t, "builds the afloat binary", "-buildvcs=true")
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("afloat version: %v\n%s", err, out)
	}
	got := string(out)
	if want := "revision " + strings.TrimSpace(string(head)); !strings.Contains(got, want) {
		t.Errorf("%q lacks %q", got, want)
	}
	if !strings.Contains(got, "go       "+runtime.Version()) || strings.Contains(got, "dev\n") {
		t.Errorf("%q: want the Go version and no \"dev\"", got)
	}
}
