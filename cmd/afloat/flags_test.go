package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/gateway"
	"github.com/afloat-dev/afloat/review"
)

// flagsGateway starts a gateway in process over moderationDown, with its flag store.
func flagsGateway(t *testing.T) (string, *flags.Memory) {
	t.Helper()
	f, err := config.Load(writeConfig(t, moderationDown, testFiles))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(config.BuildOptions{Review: review.NewMemory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Engine: rt.Engine, Tasks: rt.Tasks, Flags: rt.Flags, AdminToken: cliAdmin})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return srv.URL, rt.Flags
}

// TestFlagsCommand: afloat flags get|set|kill|unkill change the running gateway's flags by
// PATCH, each printing the flags in force after it.
func TestFlagsCommand(t *testing.T) {
	target, store := flagsGateway(t)
	type taskFlags struct {
		Kill       bool     `json:"kill"`
		Blocklist  []string `json:"blocklist"`
		RolloutPct int      `json:"rollout_pct"`
	}
	type doc struct {
		Kill  bool                 `json:"kill"`
		Tasks map[string]taskFlags `json:"tasks"`
	}
	steps := []struct {
		name string
		args []string
		kill bool
		mod  taskFlags
	}{
		{"get", []string{"get"}, false, taskFlags{Blocklist: []string{}, RolloutPct: 100}},
		{"global kill", []string{"kill"}, true, taskFlags{Blocklist: []string{}, RolloutPct: 100}},
		{"global unkill", []string{"unkill"}, false, taskFlags{Blocklist: []string{}, RolloutPct: 100}},
		{"task kill", []string{"kill", "--task", "moderation"}, false, taskFlags{Kill: true, Blocklist: []string{}, RolloutPct: 100}},
		{"rollout and blocklist", []string{"set", "--task", "moderation", "--rollout", "30", "--blocklist", "acme, globex"}, false, taskFlags{Kill: true, Blocklist: []string{"acme", "globex"}, RolloutPct: 30}},
		{"task unkill keeps the rest", []string{"unkill", "--task=moderation"}, false, taskFlags{Blocklist: []string{"acme", "globex"}, RolloutPct: 30}},
		{"merge patch", []string{"set", `{"kill": true, "tasks": {"moderation": {"blocklist": null}}}`}, true, taskFlags{Blocklist: []string{}, RolloutPct: 30}},
		{"task merge patch", []string{"set", "--task", "moderation", `{"rollout_pct": null}`}, true, taskFlags{Blocklist: []string{}, RolloutPct: 100}},
		{"clear the blocklist", []string{"set", "--task", "moderation", "--blocklist", "a", "--blocklist", ""}, true, taskFlags{Blocklist: []string{}, RolloutPct: 100}},
		{"get one task", []string{"get", "--task", "moderation"}, true, taskFlags{Blocklist: []string{}, RolloutPct: 100}},
	}
	for _, st := range steps {
		var out, errb bytes.Buffer
		args := append([]string{"flags"}, st.args...)
		args = append(args, "--target", target, "--admin-token", cliAdmin)
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", st.name, code, errb.String())
		}
		var d doc
		if err := json.Unmarshal(out.Bytes(), &d); err != nil {
			t.Fatalf("%s: output %q: %v", st.name, out.String(), err)
		}
		if d.Kill != st.kill || !reflect.DeepEqual(d.Tasks["moderation"], st.mod) {
			t.Fatalf("%s: printed %s, want kill %v and moderation %+v", st.name, out.String(), st.kill, st.mod)
		}
		// What it printed is in force in the gateway.
		cur, _ := store.Flags(context.Background())
		if cur.Kill != st.kill || cur.Tasks["moderation"].Kill != st.mod.Kill || cur.Tasks["moderation"].Rollout() != st.mod.RolloutPct {
			t.Fatalf("%s: the store holds %+v", st.name, cur)
		}
	}
}

func TestFlagsCommandRefuses(t *testing.T) {
	target, _ := flagsGateway(t)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown task", []string{"kill", "--task", "nope"}, 1, "unknown_task"},
		{"bad rollout from the gateway", []string{"set", `{"tasks": {"moderation": {"rollout_pct": 300}}}`}, 1, "invalid_flags"},
		{"wrong token", []string{"get", "--admin-token", "wrong"}, 1, "401"},
		{"nothing to set", []string{"set"}, 2, "nothing to set"},
		{"rollout without a task", []string{"set", "--rollout", "5"}, 2, "--task"},
		{"rollout out of range", []string{"set", "--task", "moderation", "--rollout", "101"}, 2, "0 to 100"},
		{"patch and flags", []string{"set", "--task", "moderation", "--rollout", "5", `{}`}, 2, "not both"},
		{"not an object", []string{"set", `[1]`}, 2, "JSON object"},
		{"unknown command", []string{"toggle"}, 2, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"flags"}, tt.args...)
			args = append(args, "--target", target)
			if !strings.Contains(strings.Join(tt.args, " "), "--admin-token") {
				args = append(args, "--admin-token", cliAdmin)
			}
			if code := run(context.Background(), args, &out, &errb); code != tt.code || !strings.Contains(errb.String(), tt.msg) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), tt.code, tt.msg)
			}
		})
	}
}
