package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// needTool returns the path of a command the test needs. Without it the test skips, or
// fails when CI=true: CI must run it.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed, and CI=true: CI must run the Node SDK test (%v)", name, err)
	}
	t.Skipf("%s is not installed: skipping the Node SDK test (CI=true makes this a failure)", name)
	return ""
}

// installOpenAI installs testdata's package.json (the pinned `openai` package) and scripts into
// a temporary folder and returns it. An install that fails skips the test, unless CI=true.
func installOpenAI(t *testing.T, npm string) string {
	t.Helper()
	return installPackage(t, npm, "openai", "testdata", "package.json", "package-lock.json", "stream.mjs", "api.mjs", "aliases.mjs")
}

// installPackage copies the files of the folder src (a package.json pinning pkg, its
// package-lock.json, and the scripts) into a temporary folder, installs there from the npm
// registry what the lockfile names, each package checked against its integrity hash (npm ci),
// and returns the folder. An install that fails skips the test, unless CI=true.
func installPackage(t *testing.T, npm, pkg, src string, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npm install of the %s package failed: %v\n%s", pkg, err, out)
		}
		t.Skipf("npm install of the %s package failed (no registry?): %v\n%s", pkg, err, out)
	}
	return dir
}

// runNode runs a script of dir with node and env, and decodes the one JSON object it prints
// into v. A script that exits non-zero has put its error in that object; the caller reads it.
func runNode(t *testing.T, node, dir, script string, v any, env ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), v); err != nil {
		t.Fatalf("node %s: %v; stdout %q, stderr:\n%s", script, runErr, stdout.String(), stderr.String())
	}
	if runErr != nil {
		return fmt.Errorf("node %s: %w; stderr:\n%s", script, runErr, stderr.String())
	}
	return nil
}

// nodeResult is what stream.mjs prints.
type nodeResult struct {
	Iterated *struct {
		Text         string   `json:"text"`
		FinishReason string   `json:"finish_reason"`
		Chunks       int      `json:"chunks"`
		IDs          []string `json:"ids"`
	} `json:"iterated"`
	Helper *struct {
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
		Choices      int    `json:"choices"`
	} `json:"helper"`
	Error string `json:"error"`
}

// TestNodeOpenAIReadsContinuedStream: the official Node `openai` package reads a stream
// afloat continued on the backup as one completion, both by iterating its chunks and through
// its ChatCompletionStream helper (finalChatCompletion): the primary's 40 tokens then the
// backup's continuation, finish reason stop, no exception.
func TestNodeOpenAIReadsContinuedStream(t *testing.T) {
	node := needTool(t, "node")
	npm := needTool(t, "npm")
	dir := installOpenAI(t, npm)
	base, backup := rescued(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "stream.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AFLOAT_BASE_URL="+base+"/v1", "AFLOAT_MODEL="+route)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res nodeResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("node stream.mjs: %v; stdout %q, stderr:\n%s", runErr, stdout.String(), stderr.String())
	}
	if res.Error != "" || runErr != nil {
		t.Fatalf("the openai package threw reading the continued stream: %s (%v); read so far %+v; stderr:\n%s", res.Error, runErr, res.Iterated, stderr.String())
	}
	if it := res.Iterated; it == nil || it.Text != want || it.FinishReason != "stop" || len(it.IDs) != 1 {
		t.Errorf("iterating the chunks gave %+v; want the text %q, finish reason stop, one completion id", it, want)
	}
	if h := res.Helper; h == nil || h.Text != want || h.FinishReason != "stop" || h.Choices != 1 {
		t.Errorf("finalChatCompletion gave %+v; want one choice, the text %q, finish reason stop", h, want)
	}
	wantContinuation(t, backup, 2)
}

// nodeAPIResult is what api.mjs prints.
type nodeAPIResult struct {
	Models []string       `json:"models"`
	Errors []nodeAPIError `json:"errors"`
	Error  string         `json:"error"`
}

type nodeAPIError struct {
	Class  string  `json:"class"`
	Status int     `json:"status"`
	Type   string  `json:"type"`
	Code   string  `json:"code"`
	Param  *string `json:"param"`
}

// TestNodeOpenAIListsRoutesAndReadsErrors: the Node `openai` package lists the routes with
// models.list(), and reads afloat's errors as its APIError subclasses with OpenAI's type,
// code and param.
func TestNodeOpenAIListsRoutesAndReadsErrors(t *testing.T) {
	node := needTool(t, "node")
	npm := needTool(t, "npm")
	dir := installOpenAI(t, npm)
	base := tenanted(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "api.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AFLOAT_BASE_URL="+base+"/v1", "AFLOAT_MODEL="+route, "AFLOAT_KEY="+tenantKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res nodeAPIResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("node api.mjs: %v; stdout %q, stderr:\n%s", runErr, stdout.String(), stderr.String())
	}
	if res.Error != "" || runErr != nil {
		t.Fatalf("api.mjs failed: %s (%v); stderr:\n%s", res.Error, runErr, stderr.String())
	}
	if !slices.Equal(res.Models, tenantedRoutes) {
		t.Errorf("models.list() gave %v, want the routes %v", res.Models, tenantedRoutes)
	}
	model := "model"
	wantErrs := []nodeAPIError{
		{Class: "AuthenticationError", Status: 401, Type: "authentication_error", Code: "unauthorized"},
		{Class: "NotFoundError", Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: &model},
		{Class: "AuthenticationError", Status: 401, Type: "authentication_error", Code: "unauthorized"},
	}
	if len(res.Errors) != len(wantErrs) {
		t.Fatalf("errors %+v, want %d", res.Errors, len(wantErrs))
	}
	for i, w := range wantErrs {
		g := res.Errors[i]
		if g.Class != w.Class || g.Status != w.Status || g.Type != w.Type || g.Code != w.Code || (g.Param == nil) != (w.Param == nil) || (g.Param != nil && *g.Param != *w.Param) {
			t.Errorf("error %d: %+v (param %v), want %+v (param %v)", i, g, g.Param, w, w.Param)
		}
	}
}
