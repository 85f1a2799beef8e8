package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
	"github.com/afloat-dev/afloat/review"
)

const (
	cliAdmin  = "adm-cli-3f8a1c6e2d"
	cliAlice  = "op-alice-cli-7b2e9d4a"
	cliBob    = "op-bob-cli-1c5f8e3b"
	cliClient = "ck-acme-cli-4d9b2a7e"
)

// moderationDown is a config whose critical task's only provider always fails: every call
// queues an item.
const moderationDown = `
defaults: {retry: {max: 0}}
providers:
  down: {type: sim, error_rate: 1}
tasks:
  moderation:
    criticality: critical
    schema: schemas/mod.json
    cascade: [{provider: down, prompt: prompts/mod/a.v1.tmpl}]
`

// reviewGateway starts a gateway in process over moderationDown and queues n items through
// its task API; it returns the gateway's URL and the review ids.
func reviewGateway(t *testing.T, n int) (string, []string) {
	t.Helper()
	f, err := config.Load(writeConfig(t, moderationDown, testFiles))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(config.BuildOptions{Review: review.NewMemory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Engine: rt.Engine, Tasks: rt.Tasks, Review: rt.Review,
		AdminToken: cliAdmin, Operators: map[string]string{"alice": cliAlice, "bob": cliBob},
		Tenants: map[string][]string{"acme": {cliClient}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	var ids []string
	for range n {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tasks/moderation", strings.NewReader(`{"input": {"text": "you are all idiots"}}`))
		req.Header.Set("Authorization", "Bearer "+cliClient)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			ReviewID string `json:"review_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusAccepted || env.ReviewID == "" {
			t.Fatalf("moderation call: %d, %v, %+v", resp.StatusCode, err, env)
		}
		ids = append(ids, env.ReviewID)
	}
	return srv.URL, ids
}

func TestReviewCommand(t *testing.T) {
	for _, k := range []string{"AFLOAT_TARGET", "AFLOAT_ADMIN_TOKEN", "AFLOAT_OPERATOR"} {
		t.Setenv(k, "")
	}
	target, ids := reviewGateway(t, 3)
	a, b, c := ids[0], ids[1], ids[2]
	answer := filepath.Join(t.TempDir(), "answer.json")
	if err := os.WriteFile(answer, []byte(`{"allowed": false}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	as := func(token string, args ...string) []string {
		return append(args, "--target", target, "--admin-token", token)
	}
	steps := []struct {
		name   string
		args   []string
		err    error
		stdout []string // each must appear
		stderr []string
	}{
		{"list", as(cliAlice, "list"), nil, []string{"ID", "STATUS", a + "  moderation  acme    pending", b, c}, nil},
		{"list a page", as(cliAlice, "list", "--limit", "2"), nil, []string{a, b, "more: afloat review list --cursor "}, nil},
		{"show, flags after the id", append([]string{"show", a}, "--target", target, "--admin-token", cliBob), nil,
			[]string{"id:", a, `{"text":"you are all idiots"}`, `"outcome":"unavailable"`, "moderation/down/v1"}, nil},
		{"admin claims for alice", as(cliAdmin, "claim", a, "--operator", "alice"), nil, []string{a + " claimed by alice"}, nil},
		{"bob cannot claim it", as(cliBob, "claim", a), errFailed, nil, []string{"refused (409 review_conflict)", "claimed by alice"}},
		{"an answer off the schema", as(cliAlice, "resolve", a, "--result", `{"allowed": "no"}`), errFailed, nil,
			[]string{"refused (400 invalid_result)", "at /allowed", "the item is unchanged"}},
		{"resolve from a file", as(cliAlice, "resolve", a, "--result-file", answer), nil, []string{a + ` resolved by alice: {"allowed":false}`}, nil},
		{"bob rejects b", as(cliBob, "reject", b, "--reason", "a test message"), nil, []string{b + " rejected by bob: a test message"}, nil},
		{"resolving the rejected b", as(cliAlice, "resolve", b, "--result", `{"allowed": true}`), errFailed, nil, []string{"409", "already rejected by bob"}},
		{"list resolved", as(cliAlice, "list", "--status", "resolved"), nil, []string{a, "alice"}, nil},
		{"unknown id", as(cliAlice, "show", "rv_nope"), errFailed, nil, []string{"404 unknown_review"}},
		{"wrong token", as("nope", "list"), errFailed, nil, []string{"401", "check --admin-token"}},
		{"admin writes as nobody", as(cliAdmin, "claim", c), errFailed, nil, []string{"operator_required"}},
		{"no command", nil, errUsage, nil, []string{"Usage: afloat review"}},
		{"unknown command", []string{"approve"}, errUsage, nil, []string{`unknown command "approve"`}},
		{"no id", as(cliAlice, "claim"), errUsage, nil, []string{"takes one review id"}},
		{"two answers", as(cliAlice, "resolve", c, "--result", "{}", "--result-file", answer), errUsage, nil, []string{"not both"}},
		{"no answer", as(cliAlice, "resolve", c), errUsage, nil, []string{"--result JSON or --result-file"}},
		{"an answer that is not JSON", as(cliAlice, "resolve", c, "--result", "{allowed"), errUsage, nil, []string{"not valid JSON"}},
		{"a reject without a reason", as(cliAlice, "reject", c), errUsage, nil, []string{"--reason is required"}},
		{"a bad target", []string{"list", "--target", "127.0.0.1:1", "--admin-token", "x"}, errUsage, nil, []string{"--target"}},
		{"an unknown flag", as(cliAlice, "list", "--colour"), errUsage, nil, []string{"colour"}},
	}
	for _, s := range steps {
		var out, errOut bytes.Buffer
		err := reviewCmd(s.args, &out, &errOut)
		if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
			t.Fatalf("%s: err %v, want %v\nstdout: %s\nstderr: %s", s.name, err, s.err, out.String(), errOut.String())
		}
		for _, want := range s.stdout {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: stdout lacks %q:\n%s", s.name, want, out.String())
			}
		}
		for _, want := range s.stderr {
			if !strings.Contains(errOut.String(), want) {
				t.Errorf("%s: stderr lacks %q:\n%s", s.name, want, errOut.String())
			}
		}
		if testing.Verbose() {
			t.Logf("%s:\n%s%s", s.name, out.String(), errOut.String())
		}
		for _, secret := range []string{cliAdmin, cliAlice, cliBob} {
			if strings.Contains(out.String()+errOut.String(), secret) {
				t.Errorf("%s: a token reached the output", s.name)
			}
		}
	}

	// --json prints the gateway's document, for scripts.
	var out bytes.Buffer
	if err := reviewCmd([]string{"show", a, "--json", "--target", target, "--admin-token", cliAlice}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc["status"] != "resolved" || doc["operator"] != "alice" {
		t.Fatalf("show --json: %v\n%s", err, out.String())
	}
}
