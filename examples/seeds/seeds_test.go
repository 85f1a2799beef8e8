package seeds

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/normalize"
)

// setEnv sets the seeds' variables, with a CA file of a throwaway certificate.
func setEnv(t *testing.T) {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	srv.Close()
	ca := filepath.Join(t.TempDir(), "root.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIGACHAT_AUTH_KEY", "c2VlZHMtY2xpZW50OnNlZWRzLXNlY3JldA==")
	t.Setenv("GIGACHAT_CA_FILE", ca)
	t.Setenv("YANDEX_FOLDER_ID", "b1gseedsfolder")
	t.Setenv("YANDEX_API_KEY", "AQVNseeds-key")
}

// TestSeedsConfigChecks: with its variables set, the config passes `afloat check` without a
// warning of its own, and its tiers are the seeds' cascade.
func TestSeedsConfigChecks(t *testing.T) {
	setEnv(t)
	warnings, err := config.Check("afloat.yaml")
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	for _, w := range warnings {
		// This build may still keep the review queue in memory (another issue's work).
		if !strings.Contains(w, "review.store") {
			t.Errorf("warning: %s", w)
		}
	}
	f, err := config.Load("afloat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	task := f.Task("triage")
	var tiers []string
	for _, tr := range task.Cascade {
		tiers = append(tiers, tr.Provider+" "+filepath.Base(tr.Prompt))
	}
	want := []string{"gigachat-pro gigachat-pro.v3.tmpl", "yandexgpt yandexgpt.v2.tmpl", "t-lite t-lite.v1.tmpl"}
	if strings.Join(tiers, ", ") != strings.Join(want, ", ") {
		t.Errorf("triage tiers = %q, want %q", tiers, want)
	}
	if p := f.Provider("yandexgpt"); p.ModelURI != "gpt://b1gseedsfolder/yandexgpt/latest" {
		t.Errorf("model_uri = %q", p.ModelURI)
	}
	if p := f.Provider("t-lite"); p.BaseURL != "http://127.0.0.1:8000/v1" || p.Dialect != "vllm" {
		t.Errorf("t-lite = %s (%s)", p.BaseURL, p.Dialect)
	}
	if p := f.Provider("gigachat-pro"); p.Scope != "GIGACHAT_API_PERS" || p.CAFile != os.Getenv("GIGACHAT_CA_FILE") {
		t.Errorf("gigachat-pro scope, ca_file = %q, %q", p.Scope, p.CAFile)
	}
}

// TestSeedsConfigNamesMissingVariables: without its credentials the config is refused,
// naming each variable.
func TestSeedsConfigNamesMissingVariables(t *testing.T) {
	for _, v := range []string{"GIGACHAT_AUTH_KEY", "YANDEX_FOLDER_ID", "YANDEX_API_KEY"} {
		t.Run(v, func(t *testing.T) {
			setEnv(t)
			os.Unsetenv(v) // restored by setEnv's t.Setenv
			_, err := config.Check("afloat.yaml")
			if err == nil || !strings.Contains(err.Error(), v) {
				t.Fatalf("check = %v, want an error naming %s", err, v)
			}
		})
	}
}

// TestSeedsPromptFixtures: each of the seeds' three prompts has recorded-style fixtures (what
// GigaChat, YandexGPT and T-Lite return for a ticket), and each passes through the task's
// contract as expected; `afloat prompts test -c examples/seeds/afloat.yaml` runs the same.
func TestSeedsPromptFixtures(t *testing.T) {
	setEnv(t)
	f, err := config.Load("afloat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	task := f.Task("triage")
	schema, err := os.ReadFile(task.Schema)
	if err != nil {
		t.Fatal(err)
	}
	contract, err := normalize.Compile("triage", schema, normalize.WithSynonyms(task.Synonyms))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range task.Cascade {
		fixtures, err := normalize.LoadFixtures(normalize.FixtureDir(tr.Prompt))
		if err != nil {
			t.Fatal(err)
		}
		if len(fixtures) < 2 {
			t.Errorf("%s: %d fixtures, want at least 2", filepath.Base(tr.Prompt), len(fixtures))
		}
		for _, fx := range fixtures {
			if r := contract.RunFixture(fx); !r.Pass {
				t.Errorf("%s/%s: %s", filepath.Base(tr.Prompt), fx.Name, r.Problem)
			}
		}
	}
}
