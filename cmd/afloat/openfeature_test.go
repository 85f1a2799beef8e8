package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeFlagsFromOFREP: with flags.openfeature, a kill switch flipped in the team's flag
// system (a local OFREP server) turns the task off within the refresh interval, and flipped
// back turns it on; keys the flag system does not know leave the admin API's flags in force.
func TestServeFlagsFromOFREP(t *testing.T) {
	t.Parallel()
	var killed atomic.Bool
	var auth atomic.Value
	ofrep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		key := strings.TrimPrefix(r.URL.Path, "/ofrep/v1/evaluate/flags/")
		w.Header().Set("Content-Type", "application/json")
		if key != "afloat.triage.kill" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"key": key, "errorCode": "FLAG_NOT_FOUND"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"key": key, "value": killed.Load(), "reason": "STATIC"})
	}))
	t.Cleanup(ofrep.Close)
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := "flags:\n  openfeature: {provider: ofrep, endpoint: \"" + ofrep.URL + "\", refresh: 50ms, headers: {Authorization: \"Bearer flags-token-123456\"}}\n" +
		triageConfig("2s", []string{"primary"}, map[string]string{"primary": primary.URL}, nil)
	g := startServe(t, cfg, "primary")

	waitReason := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			env := g.mustTriage("Не работает оплата", "ошибка 500")
			if env.reason() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("5s after the flag system changed, the task answers %v, want reason %q", env, want)
			}
		}
	}
	waitReason("")
	killed.Store(true)
	waitReason("kill_switch")
	killed.Store(false)
	waitReason("")
	if got, _ := auth.Load().(string); got != "Bearer flags-token-123456" {
		t.Errorf("the flag system got Authorization %q", got)
	}
	// The admin API's kill switch still applies beside the flag system's.
	if code, b, err := g.do("PATCH", "/admin/flags", scenarioAdmin, `{"tasks": {"triage": {"kill": true}}}`); err != nil || code != http.StatusOK {
		t.Fatalf("PATCH: %d %s %v", code, b, err)
	}
	waitReason("kill_switch")
}
