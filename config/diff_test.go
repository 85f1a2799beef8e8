package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompare: a change is reported at its key path, with its values only where they tell no
// secret; entities added and removed are one change each; a prompt edited in place is a
// content change; a restart key is flagged.
func TestCompare(t *testing.T) {
	files := map[string]string{"triage.json": triageSchema, "prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt}
	old := `
server: {admin_token: adm-compare-old-4f1e9a7c}
tenants:
  acme: {keys: [ck-compare-old-7d2b]}
providers:
  primary: {type: openai, model: m1, base_url: "http://127.0.0.1:9/v1", api_key: sk-old-secret-1}
  backup: {type: sim}
tasks:
  triage:
    criticality: enrichment
    schema: triage.json
    cascade:
      - {provider: primary, prompt: prompts/primary.v1.tmpl}
      - {provider: backup, prompt: prompts/backup.v1.tmpl}
routes:
  chat: {criticality: assistance, cascade: [primary]}
`
	next := strings.NewReplacer("sk-old-secret-1", "sk-new-secret-2", "model: m1", "model: m2",
		"ck-compare-old-7d2b", "ck-compare-new-8e3c", "adm-compare-old-4f1e9a7c", "adm-compare-new-5a2f0b8d",
		"routes:\n  chat: {criticality: assistance, cascade: [primary]}\n", "").Replace(old)
	a, b := writeTree(t, files), writeTree(t, files)
	for dir, text := range map[string]string{a: old, b: next} {
		if err := os.WriteFile(filepath.Join(dir, "afloat.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(b, "prompts/backup.v1.tmpl"), []byte(triagePrompt+"Be brief.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	from, err := Load(filepath.Join(a, "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	to, err := Load(filepath.Join(b, "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := Compare(from, to).String()
	for _, want := range []string{
		"! server.admin_token (needs a restart)\n",
		"~ tenants.acme.keys\n",
		"~ providers.primary.model: m1 → m2\n",
		"~ providers.primary.api_key\n",
		"~ providers.primary: settings changed: a fresh breaker, bulkhead, retry budget and latency estimates\n",
		"~ tasks.triage.cascade[1].prompt: content\n",
		"- routes.chat: removed\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	for _, secret := range []string{"sk-old", "sk-new", "ck-compare", "adm-compare"} {
		if strings.Contains(got, secret) {
			t.Errorf("diff shows a credential (%s):\n%s", secret, got)
		}
	}
	if strings.Contains(got, "providers.backup") || strings.Contains(got, "schema") {
		t.Errorf("diff reports what did not change:\n%s", got)
	}

	same, err := Load(filepath.Join(writeTree(t, map[string]string{
		"afloat.yaml": old, "triage.json": triageSchema, "prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	}), "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if d := Compare(from, same); len(d.Changes) != 0 || from.Version() != same.Version() || from.Version() == to.Version() {
		t.Fatalf("the same files in another folder: %s, versions %s %s (other %s)", d, from.Version(), same.Version(), to.Version())
	}
}
