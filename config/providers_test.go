package config

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/provider/anthropic"
	"github.com/afloat-dev/afloat/provider/gigachat"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/afloat-dev/afloat/provider/yandex"
)

// TestBuildProviderTypes: every HTTP provider type builds its adapter, ca_file included.
func TestBuildProviderTypes(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	config := `
providers:
  gigachat-pro:
    type: gigachat
    model: GigaChat-Pro
    auth_key: a2V5
    scope: GIGACHAT_API_B2B
    auth_url: https://127.0.0.1:9443/api/v2/oauth
    ca_file: certs/root.pem
  yandexgpt: {type: yandex, model_uri: "gpt://b1g/yandexgpt/latest", api_key: k}
  yandex-iam: {type: yandex, model_uri: "gpt://b1g/yandexgpt/latest", iam_token: t, folder_id: b1g}
  claude: {type: anthropic, model: claude-sonnet-4-5, api_key: k, headers: {anthropic-beta: x}}
  t-lite: {type: openai, base_url: "http://127.0.0.1:8000/v1", model: t-lite, dialect: llamacpp}
  yandex-openai: {type: openai, base_url: "https://llm.api.cloud.yandex.net/v1", model: "gpt://b1g/yandexgpt/latest",
                  api_key: k, dialect: yandex, headers: {OpenAI-Project: b1g}}
tasks:
  triage:
    criticality: enrichment
    schema: triage.json
    cascade:
      - {provider: gigachat-pro, prompt: prompts/p.v1.tmpl}
      - {provider: yandexgpt, prompt: prompts/p.v1.tmpl}
      - {provider: yandex-iam, prompt: prompts/p.v1.tmpl}
      - {provider: claude, prompt: prompts/p.v1.tmpl}
      - {provider: t-lite, prompt: prompts/p.v1.tmpl}
      - {provider: yandex-openai, prompt: prompts/p.v1.tmpl}
`
	dir := writeTree(t, map[string]string{
		"afloat.yaml": config, "triage.json": triageSchema, "prompts/p.v1.tmpl": triagePrompt,
		"certs/root.pem": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})),
	})
	f, err := Load(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(BuildOptions{Clock: clockwork.NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	want := map[string]any{
		"gigachat-pro": &gigachat.Client{}, "yandexgpt": &yandex.Client{}, "yandex-iam": &yandex.Client{},
		"claude": &anthropic.Client{}, "t-lite": &openai.Client{}, "yandex-openai": &openai.Client{},
	}
	for name, w := range want {
		fp := rt.Faults[name]
		if fp == nil {
			t.Errorf("%s: not built", name)
			continue
		}
		if got := reflect.TypeOf(fp.Inner()); got != reflect.TypeOf(w) {
			t.Errorf("%s: adapter %v, want %T", name, got, w)
		}
	}
}

// TestProviderTypeKeys: each type takes its own keys; dialect only for openai.
func TestProviderTypeKeys(t *testing.T) {
	tests := []struct {
		name, provider, path, msg string
	}{
		{"dialect on anthropic", "{type: anthropic, model: m, api_key: k, dialect: ollama}", "providers.p.dialect", "does not apply to provider type anthropic"},
		{"unknown dialect", "{type: openai, model: m, dialect: lmstudio}", "providers.p.dialect", `unknown dialect "lmstudio"`},
		{"gigachat without auth key", "{type: gigachat, model: m}", "providers.p.auth_key", "required"},
		{"gigachat headers", "{type: gigachat, model: m, auth_key: k, headers: {a: b}}", "providers.p.headers", "does not apply"},
		{"yandex without credentials", "{type: yandex, model_uri: gpt://f/m}", "providers.p.api_key", "api_key, or iam_token with folder_id"},
		{"anthropic without key", "{type: anthropic, model: m}", "providers.p.api_key", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := "providers:\n  p: " + tt.provider + "\n"
			_, err := Parse([]byte(config), "/cfg", noEnv)
			if err == nil {
				t.Fatal("parsed without error")
			}
			if e := findError(asErrors(t, err), tt.path, tt.msg); e == nil {
				t.Errorf("no error at %s saying %q; got:\n%v", tt.path, tt.msg, err)
			}
			if strings.Contains(err.Error(), "a2V5") {
				t.Error("an error quotes a credential")
			}
		})
	}
}
