package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKillSwitchSurvivesKill9: on a single gateway (state.backend local), a kill switch, a
// blocklist and an injected fault set through the admin API are in force again after the
// process is killed with SIGKILL and started on the same files; the fault keeps its expiry.
func TestKillSwitchSurvivesKill9(t *testing.T) {
	bin := buildAfloat(t, "builds and runs the afloat binary")
	files := map[string]string{"data/.keep": ""}
	for k, v := range testFiles {
		files[k] = v
	}
	cfg := writeConfig(t, strings.Replace(durableConfig, "providers:\n", "state: {backend: local}\nproviders:\n", 1), files)

	gw := startGateway(t, bin, cfg)
	if status, body := gw.call("PATCH", "/admin/flags", durableAdmin, `{"tasks": {"moderation": {"kill": true, "blocklist": ["t-blocked"]}}}`); status != http.StatusOK {
		t.Fatalf("PATCH /admin/flags: %d %s", status, body)
	}
	if status, body := gw.call("PUT", "/admin/faults/down", durableAdmin, `{"mode": "timeout", "ttl": "1h"}`); status != http.StatusOK {
		t.Fatalf("PUT /admin/faults/down: %d %s", status, body)
	}
	before := faultExpiry(t, gw)
	gw.kill9()

	gw = startGateway(t, bin, cfg)
	status, body := gw.call("GET", "/admin/flags", durableAdmin, "")
	var doc struct {
		Tasks map[string]struct {
			Kill      bool     `json:"kill"`
			Blocklist []string `json:"blocklist"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || status != http.StatusOK {
		t.Fatalf("GET /admin/flags: %d %s", status, body)
	}
	if m := doc.Tasks["moderation"]; !m.Kill || len(m.Blocklist) != 1 || m.Blocklist[0] != "t-blocked" {
		t.Errorf("after kill -9 the flags are %s, want moderation killed with blocklist [t-blocked]", body)
	}
	status, body = gw.call("POST", "/v1/tasks/moderation", durableClient, `{"input": {"text": "hello"}}`)
	if !strings.Contains(string(body), `"kill_switch"`) {
		t.Errorf("after kill -9 a call answers %d %s, want reason kill_switch", status, body)
	}
	if after := faultExpiry(t, gw); !after.Equal(before) {
		t.Errorf("after kill -9 the fault expires at %v, want %v (as set)", after, before)
	}
	gw.kill9()
}

// faultExpiry returns when the fault of the provider "down" clears itself, from /admin/status.
func faultExpiry(t *testing.T, gw *gatewayProc) time.Time {
	t.Helper()
	status, body := gw.call("GET", "/admin/status", durableAdmin, "")
	var doc struct {
		Providers map[string]struct {
			Fault *struct {
				Mode      string    `json:"mode"`
				ExpiresAt time.Time `json:"expires_at"`
			} `json:"fault"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || status != http.StatusOK {
		t.Fatalf("GET /admin/status: %d %s", status, body)
	}
	f := doc.Providers["down"].Fault
	if f == nil || f.Mode != "timeout" || f.ExpiresAt.IsZero() {
		t.Fatalf("the fault of down in /admin/status: %s", body)
	}
	return f.ExpiresAt
}
