package main

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestFleetSharesTheAnswerCache runs two gateways over one Redis with a cache on triage: a
// ticket one of them answered is answered from the cache by the other once every provider is
// down, as source cache with when it was given; a ticket no one answered gets the heuristic.
func TestFleetSharesTheAnswerCache(t *testing.T) {
	url := redisURL(t)
	prefix := redisPrefix(t, url)
	var down atomic.Bool
	reply := func(int, chatCall) upstreamReply {
		if down.Load() {
			return upstreamReply{status: http.StatusServiceUnavailable}
		}
		return upstreamReply{content: validTriage}
	}
	primary, backup := newMock(t, reply), newMock(t, reply)
	cfg := fleetConfig(url, prefix, primary.URL, backup.URL) + "    cache: {ttl: 1h}\n"
	a := startServe(t, cfg, "primary", "backup")
	b := startServe(t, cfg, "primary", "backup")

	if env := a.mustTriage("Вопрос по счёту", "пришёл счёт дважды"); env.Source != "model" {
		t.Fatalf("healthy: %v", env)
	}
	down.Store(true)
	var env envelope
	waitUntil(t, 2*time.Second, "gateway b to answer gateway a's ticket from the shared cache", func() bool {
		env = b.mustTriage("Вопрос по счёту", "пришёл счёт дважды")
		return env.Source == "cache"
	})
	if !env.Degraded || env.Result["is_urgent"] != 0.9 {
		t.Fatalf("b's cached answer: %v %v", env, env.Result)
	}
	if env := b.mustTriage("Другой вопрос", "совсем другой"); env.Source != "heuristic" {
		t.Fatalf("an unseen ticket: %v, want the heuristic", env)
	}
}

// TestFleetSharesCanaryDecisions: a canary rolled back through one gateway is rolled back on
// another over the same Redis within a second, and stays so for a gateway started after.
func TestFleetSharesCanaryDecisions(t *testing.T) {
	url := redisURL(t)
	prefix := redisPrefix(t, url)
	reply := func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} }
	primary, backup := newMock(t, reply), newMock(t, reply)
	cfg := fleetConfig(url, prefix, primary.URL, backup.URL) + "    canary: {provider: backup, share: 50%, by: request}\n"
	a := startServe(t, cfg, "primary", "backup")
	b := startServe(t, cfg, "primary", "backup")
	canaryState := func(g *liveServe) string {
		code, body, err := g.do("GET", "/admin/status", scenarioAdmin, "")
		var st struct {
			Tasks map[string]struct {
				Canary *struct {
					State string `json:"state"`
				} `json:"canary"`
			} `json:"tasks"`
		}
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &st) != nil || st.Tasks["triage"].Canary == nil {
			t.Fatalf("GET /admin/status: %d %v %s", code, err, body)
		}
		return st.Tasks["triage"].Canary.State
	}
	if s := canaryState(b); s != "running" {
		t.Fatalf("b's canary: %s", s)
	}
	code, body, err := a.do("PUT", "/admin/canaries/triage", scenarioAdmin, `{"state": "rolled_back"}`)
	if err != nil || code != http.StatusOK {
		t.Fatalf("PUT /admin/canaries/triage: %d %s %v", code, body, err)
	}
	waitUntil(t, time.Second, "the rollback through gateway a to apply on gateway b", func() bool { return canaryState(b) == "rolled_back" })
	c := startServe(t, cfg, "primary", "backup")
	if s := canaryState(c); s != "rolled_back" {
		t.Fatalf("a gateway started after the rollback: %s", s)
	}
}
