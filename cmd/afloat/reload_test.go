package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	reloadAdmin = "adm-reload-3f9a1c7e5b20"
	reloadKey   = "ck-acme-reload-51c0"
)

// reloadConfig is a gateway whose task moderation has the tiers of cascade; extra goes under
// providers: after a and b.
func reloadConfig(extra, cascade string) string {
	return `
server:
  admin_token: ` + reloadAdmin + `
tenants:
  acme: {keys: ["` + reloadKey + `"]}
providers:
  a: {type: sim}
  b: {type: sim}
` + extra + `
tasks:
  moderation:
    criticality: assistance
    schema: schemas/mod.json
    cascade: ` + cascade + "\n"
}

const twoTiers = `[{provider: a, prompt: prompts/mod/a.v1.tmpl}, {provider: b, prompt: prompts/mod/b.v1.tmpl}]`

// rewrite replaces the config file at path, and writes files beside it.
func rewrite(t *testing.T, path, yaml string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}

// adminCall sends an admin request and decodes the JSON answer into out (when not nil).
func adminCall(t *testing.T, base, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+reloadAdmin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// answer is what one call to the moderation task got.
type answer struct {
	status        int
	source        string
	provider      string
	promptVersion string
	err           error
}

func moderate(base string) answer {
	req, _ := http.NewRequest("POST", base+"/v1/tasks/moderation", strings.NewReader(`{"input": {"text": "hello"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+reloadKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var env struct {
		Source        string  `json:"source"`
		Provider      *string `json:"provider"`
		PromptVersion *string `json:"prompt_version"`
	}
	err = json.NewDecoder(resp.Body).Decode(&env)
	a := answer{status: resp.StatusCode, source: env.Source, err: err}
	if env.Provider != nil {
		a.provider = *env.Provider
	}
	if env.PromptVersion != nil {
		a.promptVersion = *env.PromptVersion
	}
	return a
}

// statusDoc is the part of /admin/status a reload shows in.
type statusDoc struct {
	Providers map[string]struct {
		Breaker string     `json:"breaker"`
		Since   *time.Time `json:"since"`
	} `json:"providers"`
	Config struct {
		Version    string    `json:"version"`
		LoadedAt   time.Time `json:"loaded_at"`
		LastReload *struct {
			OK     bool     `json:"ok"`
			Errors []string `json:"errors"`
		} `json:"last_reload"`
	} `json:"config"`
}

// waitFor returns once what was written holds want; it fails the test after 10s.
func (s *syncWriter) waitFor(t *testing.T, want string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote == nil {
		s.wrote = sync.NewCond(&s.mu)
	}
	timedOut := false
	timer := time.AfterFunc(10*time.Second, func() {
		s.mu.Lock()
		timedOut = true
		s.wrote.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	for !strings.Contains(s.b.String(), want) {
		if timedOut {
			t.Fatalf("no %q in:\n%s", want, s.b.String())
		}
		s.wrote.Wait()
	}
}

// TestReloadUnderTraffic: while clients keep calling, a reload adds a tier and a provider and
// gives tier 1 a new prompt version. Every call before, during and after it is answered by a
// model; the call after the reload's answer already runs on the new config; the breaker
// forced open before stays open, from the same moment, and /admin/status names the new
// version.
func TestReloadUnderTraffic(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, reloadConfig("", twoTiers), testFiles)
	s := startOpsServe(t, "-c", path)
	if code := adminCall(t, s.base, "PUT", "/admin/breakers/a", `{"state": "open"}`, nil); code != 200 {
		t.Fatalf("forcing a open: %d", code)
	}
	var before statusDoc
	adminCall(t, s.base, "GET", "/admin/status", "", &before)
	if before.Providers["a"].Breaker != "open" || before.Providers["a"].Since == nil || before.Config.Version == "" {
		t.Fatalf("status before the reload: %+v", before)
	}

	answers := make(chan answer, 1024)
	stop := make(chan struct{})
	var clients sync.WaitGroup
	for range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				answers <- moderate(s.base)
			}
		}()
	}
	failed := func(a answer) bool { return a.err != nil || a.status != 200 || a.source != "model" }
	var bad []answer
	take := func(n int) {
		for range n {
			if a := <-answers; failed(a) {
				bad = append(bad, a)
			}
		}
	}
	take(20) // traffic is flowing

	rewrite(t, path, reloadConfig("  c: {type: sim}",
		`[{provider: a, prompt: prompts/mod/a.v1.tmpl}, {provider: b, prompt: prompts/mod/b.v2.tmpl}, {provider: c, prompt: prompts/mod/c.v1.tmpl}]`),
		map[string]string{"prompts/mod/b.v2.tmpl": "--- user\nModerate, v2: {{.text}}\n", "prompts/mod/c.v1.tmpl": "--- user\n{{.text}}\n"})
	var res struct {
		Version, Previous string
		Changes           []struct{ Path, Kind, Detail string }
	}
	drain := make(chan struct{})
	go func() { // the clients never wait on the test while it reloads
		defer close(drain)
		take(20)
	}()
	if code := adminCall(t, s.base, "POST", "/admin/reload", "", &res); code != 200 {
		t.Fatalf("reload: %d %+v", code, res)
	}
	<-drain
	if got := moderate(s.base); failed(got) || got.provider != "b" || got.promptVersion != "moderation/b/v2" {
		t.Fatalf("the call after the reload: %+v, want b's answer with prompt moderation/b/v2", got)
	}
	take(20) // traffic goes on over the new config
	close(stop)
	go func() { clients.Wait(); close(answers) }()
	for a := range answers {
		if failed(a) {
			bad = append(bad, a)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d calls failed around the reload, first %+v", len(bad), bad[0])
	}

	if res.Previous != before.Config.Version || res.Version == res.Previous {
		t.Fatalf("reload answered versions %q → %q; the status said %q before", res.Previous, res.Version, before.Config.Version)
	}
	var changes []string
	for _, c := range res.Changes {
		changes = append(changes, c.Kind+" "+c.Path+" "+c.Detail)
	}
	for _, want := range []string{"added providers.c ", "changed tasks.moderation.cascade[1].prompt version v1 → v2", "added tasks.moderation.cascade[2] provider c"} {
		if !strings.Contains(strings.Join(changes, "\n")+"\n", want+"\n") && !strings.Contains(strings.Join(changes, "\n"), want) {
			t.Errorf("the reload's changes lack %q: %q", want, changes)
		}
	}
	var after statusDoc
	adminCall(t, s.base, "GET", "/admin/status", "", &after)
	if a := after.Providers["a"]; a.Breaker != "open" || a.Since == nil || !a.Since.Equal(*before.Providers["a"].Since) {
		t.Fatalf("a's breaker after the reload: %+v, want open since %v as before", a, before.Providers["a"].Since)
	}
	if _, ok := after.Providers["c"]; !ok {
		t.Fatal("the status lacks the provider the reload added")
	}
	if after.Config.Version != res.Version || after.Config.LastReload == nil || !after.Config.LastReload.OK {
		t.Fatalf("status config after the reload: %+v", after.Config)
	}
	_, metrics := getURL(t, s.base+"/metrics")
	for _, want := range []string{`afloat_circuit_state{provider="a"} 2`, `afloat_circuit_state{provider="c"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestReloadRefusedChangesNothing: a reload of a file whose template does not parse, or
// that changes a key only a restart applies, answers 422 with the problems, says so in
// /admin/status and the log, and leaves the config in force as it was.
func TestReloadRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, reloadConfig("", twoTiers), testFiles)
	s := startOpsServe(t, "-c", path)
	var before statusDoc
	adminCall(t, s.base, "GET", "/admin/status", "", &before)

	for _, tc := range []struct {
		name, yaml string
		files      map[string]string
		want       string
	}{
		{"broken template", reloadConfig("", `[{provider: a, prompt: prompts/mod/a.v2.tmpl}, {provider: b, prompt: prompts/mod/b.v1.tmpl}]`),
			map[string]string{"prompts/mod/a.v2.tmpl": "--- user\n{{.text\n"}, "tasks.moderation.cascade[0].prompt"},
		{"needs a restart", reloadConfig("", twoTiers) + "review: {claim_ttl: 1m}\n", nil, "review.claim_ttl: changed, and a reload does not apply it"},
	} {
		rewrite(t, path, tc.yaml, tc.files)
		var res struct {
			Error struct {
				Code   string   `json:"code"`
				Errors []string `json:"errors"`
			} `json:"error"`
		}
		if code := adminCall(t, s.base, "POST", "/admin/reload", "", &res); code != 422 || res.Error.Code != "invalid_config" {
			t.Fatalf("%s: reload answered %d %+v, want 422 invalid_config", tc.name, code, res)
		}
		if !strings.Contains(strings.Join(res.Error.Errors, "\n"), tc.want) {
			t.Fatalf("%s: the errors %q do not name %s", tc.name, res.Error.Errors, tc.want)
		}
		var st statusDoc
		adminCall(t, s.base, "GET", "/admin/status", "", &st)
		if st.Config.Version != before.Config.Version || st.Config.LastReload == nil || st.Config.LastReload.OK ||
			!strings.Contains(strings.Join(st.Config.LastReload.Errors, "\n"), tc.want) {
			t.Fatalf("%s: status config %+v, want version %s and a failed last reload", tc.name, st.Config, before.Config.Version)
		}
		if got := moderate(s.base); got.status != 200 || got.promptVersion != "moderation/a/v1" {
			t.Fatalf("%s: the call after the refused reload: %+v, want a's answer with moderation/a/v1", tc.name, got)
		}
	}
	s.stderr.waitFor(t, "config reload refused: nothing changed")
}

// TestReloadOnSIGHUP: SIGHUP to afloat serve reloads its config file: the task's tiers in
// their new order, and a route the reload added with its model aliases. It runs alone (not
// in parallel): the signal goes to the whole test process.
func TestReloadOnSIGHUP(t *testing.T) {
	path := writeConfig(t, reloadConfig("", twoTiers), testFiles)
	s := startOpsServe(t, "-c", path)
	rewrite(t, path, reloadConfig("", `[{provider: b, prompt: prompts/mod/b.v1.tmpl}, {provider: a, prompt: prompts/mod/a.v1.tmpl}]`)+
		"routes:\n  support: {criticality: assistance, cascade: [a, b], models: [gpt-4o-mini]}\n", nil)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	s.stderr.waitFor(t, `"msg":"config reloaded"`)
	if got := moderate(s.base); got.status != 200 || got.provider != "b" || got.promptVersion != "moderation/b/v1" {
		t.Fatalf("after SIGHUP: %+v, want b (now tier 0) to answer", got)
	}
	req, _ := http.NewRequest("POST", s.base+"/v1/chat/completions", strings.NewReader(`{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+reloadKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the alias the reload added: %d %s", resp.StatusCode, body)
	}
	var st statusDoc
	adminCall(t, s.base, "GET", "/admin/status", "", &st)
	if st.Config.LastReload == nil || !st.Config.LastReload.OK {
		t.Fatalf("status after SIGHUP: %+v", st.Config)
	}
}

// TestCheckDiff: check --diff validates the new file and prints what a reload from the old
// one would change, key by key, prompt versions and files edited in place included; a change
// that takes a restart makes it exit 1, as a reload would refuse it.
func TestCheckDiff(t *testing.T) {
	t.Parallel()
	old := writeConfig(t, reloadConfig("", twoTiers), testFiles)
	files := map[string]string{"prompts/mod/b.v2.tmpl": "--- user\nModerate, v2: {{.text}}\n", "prompts/mod/c.v1.tmpl": "--- user\n{{.text}}\n",
		"schemas/mod.json": `{"type":"object","properties":{"allowed":{"type":"boolean"},"why":{"type":"string"}},"required":["allowed"]}`}
	for k, v := range testFiles {
		if _, ok := files[k]; !ok {
			files[k] = v
		}
	}
	next := writeConfig(t, reloadConfig("  c: {type: sim, latency: {p50: 10ms, p95: 20ms}}",
		`[{provider: b, prompt: prompts/mod/a.v1.tmpl}, {provider: b, prompt: prompts/mod/b.v2.tmpl}, {provider: c, prompt: prompts/mod/c.v1.tmpl}]`)+"    budget: 3s\n", files)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check", "-c", next, "--diff", old}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"+ providers.c: added\n",
		"~ tasks.moderation.budget: 10s → 3s\n",
		"~ tasks.moderation.schema: content\n",
		"~ tasks.moderation.cascade[0].provider: a → b\n",
		"~ tasks.moderation.cascade[1].prompt: version v1 → v2\n",
		"+ tasks.moderation.cascade[2]: provider c\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("check --diff lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "providers.a") || strings.Contains(got, "providers.b") {
		t.Errorf("check --diff reports the providers that did not change:\n%s", got)
	}

	restart := writeConfig(t, reloadConfig("", twoTiers)+"state: {on_failure: fail}\n", testFiles)
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"check", "-c", restart, "--diff", old}, &out, &errOut); code != 1 {
		t.Fatalf("a change that takes a restart: exit %d, want 1\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "! state.on_failure: local → fail (needs a restart)") || !strings.Contains(errOut.String(), "restart") {
		t.Fatalf("check --diff did not say what takes a restart:\nstdout: %s\nstderr: %s", out.String(), errOut.String())
	}
}
