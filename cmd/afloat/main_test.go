package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const exampleConfig = "../../examples/afloat.yaml"

func TestCheckExampleConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check", "-c", exampleConfig}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "ok") {
		t.Fatalf("stdout %q", out.String())
	}
}

func writeConfig(t *testing.T, yaml string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "afloat.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var testFiles = map[string]string{
	"schemas/mod.json":       `{"type":"object","properties":{"allowed":{"type":"boolean"}},"required":["allowed"],"additionalProperties":false}`,
	"prompts/mod/a.v1.tmpl":  "--- system\nModerate.\n--- user\n{{.text}}\n",
	"prompts/mod/b.v1.tmpl":  "--- user\nModerate: {{.text}}\n",
	"prompts/chat/a.v1.tmpl": "--- user\n{{.text}}\n",
}

func TestCheckReportsEveryError(t *testing.T) {
	path := writeConfig(t, `
providers:
  a: {type: sim}
  b: {type: sim}
tasks:
  moderation:
    criticality: critical
    on_exhausted: heuristic
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}, {provider: b, prompt: prompts/mod/b.v1.tmpl}]
  summary:
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
  lonely:
    criticality: enrichment
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
`, testFiles)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check", "-c", path}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	stderr := errOut.String()
	for _, want := range []string{"tasks.moderation", "fail", "tasks.summary", "criticality"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(out.String(), "tasks.lonely") || !strings.Contains(out.String(), "single tier") {
		t.Errorf("no single-tier warning:\n%s", out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"bogus"}, {"check", "-nope"}, {"serve", "-x"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// syncWriter lets the test read what serve printed while it runs.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
	w  io.Writer
	// wrote is broadcast on every write, for waitFor (reload_test.go); nil until one waits.
	wrote *sync.Cond
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.wrote != nil {
		s.wrote.Broadcast()
	}
	if s.w != nil {
		return s.w.Write(p)
	}
	return len(p), nil
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeAnswersAndShutsDownGracefully(t *testing.T) {
	path := writeConfig(t, `
server:
  admin_token: adm-test-5e1c9d0b7a34
tenants:
  acme: {keys: ["ck-acme-test-77a1"]}
providers:
  slow: {type: sim, latency: {p50: 300ms, p95: 310ms}}
  backup: {type: sim}
tasks:
  moderation:
    criticality: critical
    budget: 5s
    schema: schemas/mod.json
    cascade: [{provider: slow, prompt: prompts/mod/a.v1.tmpl}, {provider: backup, prompt: prompts/mod/b.v1.tmpl}]
`, testFiles)
	pr, pw := io.Pipe()
	stdout := &syncWriter{w: pw}
	stderr := &syncWriter{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-c", path, "-listen", "127.0.0.1:0", "-grace", "5s"}, stdout, stderr)
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v; stderr %s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	base := strings.TrimSpace(strings.TrimPrefix(line, "afloat listening on "))

	call := func() (int, map[string]any) {
		req, _ := http.NewRequest("POST", base+"/v1/tasks/moderation", strings.NewReader(`{"input": {"text": "hello"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer ck-acme-test-77a1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		var env map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env
	}
	if status, env := call(); status != 200 || env["source"] != "model" {
		t.Fatalf("call: %d %v", status, env)
	}
	// A call in flight when the shutdown starts still gets its answer.
	inflight := make(chan int, 1)
	go func() {
		status, _ := call()
		inflight <- status
	}()
	// Start the shutdown once the call is in the provider (the admin API says so).
	for deadline := time.Now().Add(5 * time.Second); inFlight(t, base) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the call never reached the provider")
		}
	}
	cancel()
	select {
	case status := <-inflight:
		if status != 200 {
			t.Fatalf("the call in flight got %d during shutdown", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight never finished")
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d; stderr %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	logs := stderr.String()
	if !strings.Contains(logs, "shutting down") || strings.Contains(logs, "ck-acme-test-77a1") || strings.Contains(logs, "adm-test-5e1c9d0b7a34") {
		t.Fatalf("logs:\n%s", logs)
	}
}

func TestServeRefusesOpenNonLoopback(t *testing.T) {
	path := writeConfig(t, `
providers:
  a: {type: sim}
tasks:
  moderation:
    criticality: critical
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}]
`, testFiles)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "-c", path, "-listen", "0.0.0.0:0"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "without tenants") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

// inFlight reads the calls in flight to provider "slow" from the admin API.
func inFlight(t *testing.T, base string) int {
	req, _ := http.NewRequest("GET", base+"/admin/status", nil)
	req.Header.Set("Authorization", "Bearer adm-test-5e1c9d0b7a34")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Providers map[string]struct {
			InFlight int `json:"in_flight"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Providers["slow"].InFlight
}
