package gateway

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/afloat-dev/afloat/flags"
)

func pct(n int) *int { return &n }

// flagEnv is a gateway whose config staged triage at 10% rollout.
func flagEnv(t *testing.T) *env {
	return newEnv(t, func(c *Config) {
		if err := c.Flags.Set(context.Background(), &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: pct(10)}}}); err != nil {
			t.Fatal(err)
		}
	})
}

func (e *env) patchFlags(body string) (int, flags.Document, string) {
	e.t.Helper()
	code, _, b := e.do("PATCH", "/admin/flags", adminToken, body)
	var d flags.Document
	if code == http.StatusOK {
		d = decode[flags.Document](e.t, b)
	}
	return code, d, string(b)
}

// TestPatchFlagsMerges: PATCH /admin/flags merges a JSON Merge Patch into the document in
// force (what it leaves out stays), null puts a key back to the config's default, and the
// answer is the document now in force, as GET shows it.
func TestPatchFlagsMerges(t *testing.T) {
	e := flagEnv(t)
	steps := []struct {
		name, patch string
		kill        bool
		triage      flags.TaskFlags
	}{
		{"blocklist", `{"tasks": {"triage": {"blocklist": ["t1", "t2"]}}}`, false, flags.TaskFlags{Blocklist: []string{"t1", "t2"}, RolloutPct: pct(10)}},
		{"global kill keeps the task's flags", `{"kill": true}`, true, flags.TaskFlags{Blocklist: []string{"t1", "t2"}, RolloutPct: pct(10)}},
		{"rollout", `{"tasks": {"triage": {"rollout_pct": 50}}}`, true, flags.TaskFlags{Blocklist: []string{"t1", "t2"}, RolloutPct: pct(50)}},
		{"null rollout takes the config's", `{"tasks": {"triage": {"rollout_pct": null}}}`, true, flags.TaskFlags{Blocklist: []string{"t1", "t2"}, RolloutPct: pct(10)}},
		{"task kill", `{"kill": false, "tasks": {"triage": {"kill": true}}}`, false, flags.TaskFlags{Kill: true, Blocklist: []string{"t1", "t2"}, RolloutPct: pct(10)}},
		{"null task takes the config's", `{"tasks": {"triage": null}}`, false, flags.TaskFlags{Blocklist: []string{}, RolloutPct: pct(10)}},
		{"empty patch", `{}`, false, flags.TaskFlags{Blocklist: []string{}, RolloutPct: pct(10)}},
	}
	for _, st := range steps {
		code, d, body := e.patchFlags(st.patch)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", st.name, code, body)
		}
		if d.Kill != st.kill || !reflect.DeepEqual(d.Tasks["triage"], st.triage) {
			t.Fatalf("%s: kill %v triage %+v, want %v %+v (%s)", st.name, d.Kill, d.Tasks["triage"], st.kill, st.triage, body)
		}
		if m := d.Tasks["moderation"]; m.Kill || m.Rollout() != 100 || len(d.Tasks) != 4 {
			t.Fatalf("%s: the other tasks changed: %s", st.name, body)
		}
		_, _, got := e.do("GET", "/admin/flags", adminToken, "")
		if strings.TrimSpace(string(got)) != strings.TrimSpace(body) {
			t.Fatalf("%s: PATCH answered %s, GET %s", st.name, body, got)
		}
	}
	// The engine reads what PATCH wrote.
	e.patchFlags(`{"tasks": {"triage": {"kill": true}}}`)
	if d, _ := e.flags.Flags(context.Background()); d.Allow("triage", "acme") {
		t.Fatal("the store still allows triage after a PATCH killed it")
	}
}

// TestPatchFlagsRefuses: a task the config does not know, a value out of range, an unknown
// key and a body that is no JSON object are 400, and change nothing.
func TestPatchFlagsRefuses(t *testing.T) {
	e := flagEnv(t)
	_, _, before := e.do("GET", "/admin/flags", adminToken, "")
	for _, tt := range []struct{ patch, code string }{
		{`{"tasks": {"nope": {"kill": true}}}`, "unknown_task"},
		{`{"kill": true, "tasks": {"triage": {"rollout_pct": 150}}}`, "invalid_flags"},
		{`{"tasks": {"triage": {"rollout": 5}}}`, "invalid_flags"},
		{`{"tasks": {"triage": {"rollout_pct": 5.5}}}`, "invalid_flags"},
		{`{"tasks": {"triage": 5}}`, "invalid_flags"},
		{`{"tasks": 5}`, "invalid_flags"},
		{`{"kill": "yes"}`, "invalid_flags"},
		{`{"flag": true}`, "invalid_flags"},
		{`[{"kill": true}]`, "invalid_request"},
		{`null`, "invalid_request"},
		{`{"kill": true`, "invalid_request"},
	} {
		code, _, body := e.patchFlags(tt.patch)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"`+tt.code+`"`) {
			t.Errorf("PATCH %s: %d %s, want 400 %s", tt.patch, code, body, tt.code)
		}
	}
	if _, _, after := e.do("GET", "/admin/flags", adminToken, ""); string(after) != string(before) {
		t.Fatalf("a refused patch changed the flags: %s, was %s", after, before)
	}
	if code, hdr, _ := e.do("DELETE", "/admin/flags", adminToken, ""); code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, PUT, PATCH" {
		t.Fatalf("DELETE /admin/flags: %d Allow %q", code, hdr.Get("Allow"))
	}
}

// TestPatchFlagsConcurrent: PATCHes of different tasks at once all land.
func TestPatchFlagsConcurrent(t *testing.T) {
	e := flagEnv(t)
	names := []string{"triage", "moderation", "gate", "support-agent"}
	var wg sync.WaitGroup
	for range 5 {
		for _, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.patchFlags(`{"tasks": {"` + name + `": {"kill": true}}}`)
			}()
		}
	}
	wg.Wait()
	_, _, b := e.do("GET", "/admin/flags", adminToken, "")
	d := decode[flags.Document](t, b)
	for _, name := range names {
		if !d.Tasks[name].Kill {
			t.Errorf("the kill of %s was lost: %s", name, b)
		}
	}
}
