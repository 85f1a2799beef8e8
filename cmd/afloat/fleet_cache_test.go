package main

import (
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
