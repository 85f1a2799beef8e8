package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTemplateReadsUndeclaredInput: a template that reads a field its task's input schema
// does not declare fails every call at run time, so Check reports it at the tier's prompt and
// Build (serve) refuses it; without an input schema the templates' fields are the inputs, and
// the same template passes.
func TestTemplateReadsUndeclaredInput(t *testing.T) {
	const backup = "--- user\n{{.subject}} {{.message}}\n{{.body}}\n"
	tests := []struct {
		name, input string
		wantErr     bool
	}{
		{"undeclared field", "    input: {subject: {type: string}, message: {type: string}}\n", true},
		{"declared field", "    input: {subject: {type: string}, message: {type: string}, body: {type: string}}\n", false},
		{"no input schema", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{
				"afloat.yaml":             minimal + tc.input,
				"triage.json":             triageSchema,
				"prompts/primary.v1.tmpl": triagePrompt,
				"prompts/backup.v1.tmpl":  backup,
			})
			path := filepath.Join(dir, "afloat.yaml")
			_, err := Check(path)
			f, lerr := Load(path)
			if lerr != nil {
				t.Fatalf("load: %v", lerr)
			}
			rt, berr := f.Build(BuildOptions{})
			_ = rt.Close()
			if !tc.wantErr {
				if err != nil || berr != nil {
					t.Fatalf("check: %v; build: %v", err, berr)
				}
				return
			}
			if err == nil || berr == nil {
				t.Fatalf("check: %v; build: %v; want both to refuse the template", err, berr)
			}
			for _, e := range []error{err, berr} {
				got := findError(asErrors(t, e), "tasks.triage.cascade[1].prompt", `"body"`)
				if got == nil {
					t.Fatalf("no error at tasks.triage.cascade[1].prompt naming body: %v", e)
				}
				// Line 11 is minimal's backup tier.
				if got.Line != 11 || !strings.Contains(got.Msg, "does not declare") {
					t.Errorf("error %v, want line 11 saying the input does not declare it", got)
				}
			}
		})
	}
}

// TestCheckOpenAccessOffLoopback: serve refuses open access (no tenants) anywhere but on
// loopback, so check reports it at server.listen.
func TestCheckOpenAccessOffLoopback(t *testing.T) {
	tests := []struct {
		name, server string
		wantErr      bool
	}{
		{"every interface", "server: {listen: 0.0.0.0:8080}\n", true},
		{"empty host", "server: {listen: \":8080\"}\n", true},
		{"public address", "server: {listen: 192.0.2.1:8080}\n", true},
		{"loopback", "server: {listen: 127.0.0.1:8080}\n", false},
		{"localhost", "server: {listen: localhost:8080}\n", false},
		{"left out", "", false},
		{"tenants", "server: {listen: 0.0.0.0:8080}\ntenants: {acme: {keys: [k-1234567890abcdef]}}\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{
				"afloat.yaml":             tc.server + minimal,
				"triage.json":             triageSchema,
				"prompts/primary.v1.tmpl": triagePrompt,
				"prompts/backup.v1.tmpl":  triagePrompt,
			})
			_, err := Check(filepath.Join(dir, "afloat.yaml"))
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("check passed open access off loopback")
			}
			e := findError(asErrors(t, err), "server.listen", "no tenants")
			if e == nil || e.Line != 1 {
				t.Fatalf("no error at server.listen, line 1: %v", err)
			}
		})
	}
}

// unsetEnv unsets each variable for the test, restoring it after.
func unsetEnv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "")
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckOfflineSeeds: the seeds' config needs real credentials for Check; CheckOffline
// passes it with none set, and names the variables it gave placeholders.
func TestCheckOfflineSeeds(t *testing.T) {
	unsetEnv(t, "GIGACHAT_AUTH_KEY", "GIGACHAT_SCOPE", "GIGACHAT_CA_FILE", "YANDEX_FOLDER_ID",
		"YANDEX_API_KEY", "TLITE_API_KEY", "AFLOAT_ADMIN_TOKEN")
	const seeds = "../examples/seeds/afloat.yaml"
	if _, err := Check(seeds); err == nil {
		t.Fatal("check passed the seeds without credentials: the offline test proves nothing")
	}
	warnings, placeholders, err := CheckOffline(seeds)
	if err != nil {
		t.Fatalf("check offline: %v", err)
	}
	if want := []string{"GIGACHAT_AUTH_KEY", "YANDEX_API_KEY", "YANDEX_FOLDER_ID"}; !slices.Equal(placeholders, want) {
		t.Errorf("placeholders %q, want %q", placeholders, want)
	}
	t.Logf("warnings: %q", warnings)
}

// TestCheckOfflineCredentials: an offline check gives each unset variable a placeholder of
// its own, so credentials from distinct variables pass the rule that no two credentials are
// equal, and two that write the same variable still break it.
func TestCheckOfflineCredentials(t *testing.T) {
	unsetEnv(t, "AFLOAT_T_ADMIN", "AFLOAT_T_ACME", "AFLOAT_T_BETA")
	tests := []struct {
		name, betaKey string
		wantErr       bool
	}{
		{"distinct variables", "${AFLOAT_T_BETA}", false},
		{"one variable twice", "${AFLOAT_T_ACME}", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config := "server: {admin_token: \"${AFLOAT_T_ADMIN}\"}\n" +
				"tenants:\n  acme: {keys: [\"${AFLOAT_T_ACME}\"]}\n  beta: {keys: [\"" + tc.betaKey + "\"]}\n" + minimal
			dir := writeTree(t, map[string]string{
				"afloat.yaml":             config,
				"triage.json":             triageSchema,
				"prompts/primary.v1.tmpl": triagePrompt,
				"prompts/backup.v1.tmpl":  triagePrompt,
			})
			_, placeholders, err := CheckOffline(filepath.Join(dir, "afloat.yaml"))
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("check offline: %v", err)
				}
				if len(placeholders) != 3 {
					t.Errorf("placeholders %q, want the three variables", placeholders)
				}
				return
			}
			if findError(asErrors(t, err), "tenants.beta.keys[0]", "is also a key of tenant acme") == nil {
				t.Fatalf("want tenants.beta.keys[0] reported as tenant acme's key: %v", err)
			}
		})
	}
}

// TestOfflineEnv: a variable the environment has keeps its value; one written without a
// default gets the placeholder and is named; one written only with a default keeps the
// default.
func TestOfflineEnv(t *testing.T) {
	config := `
server:
  admin_token: ${ADMIN:-}
providers:
  primary: {type: sim}
  backup: {type: openai, base_url: "${BASE}", model: m, api_key: "${KEY:-none}"}
tasks:
  triage:
    criticality: enrichment
    schema: ${SCHEMA}
    cascade:
      - {provider: primary, prompt: prompts/primary.v1.tmpl}
      - {provider: backup, prompt: prompts/backup.v1.tmpl}
# ${IN_A_COMMENT}
`
	env := OfflineEnv([]byte(config), envOf(map[string]string{"SCHEMA": "triage.json"}))
	f, err := Parse([]byte(config), "/cfg", env.Lookup)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if got := env.Placeholders(); !slices.Equal(got, []string{"BASE"}) {
		t.Errorf("placeholders %q, want [BASE]", got)
	}
	if p := f.Provider("backup"); p.BaseURL != Placeholder+"/BASE" || p.APIKey != "none" {
		t.Errorf("base_url %q, api_key %q: want the placeholder and the default", p.BaseURL, p.APIKey)
	}
	if f.Server.AdminToken != "" || !strings.HasSuffix(f.Task("triage").Schema, "triage.json") {
		t.Errorf("admin_token %q, schema %q", f.Server.AdminToken, f.Task("triage").Schema)
	}
}
