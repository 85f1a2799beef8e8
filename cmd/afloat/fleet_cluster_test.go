package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFleetClusterSharesBreakersFlagsAndFaults is TestFleetSharesBreakersFlagsAndFaults over
// a Redis Cluster of three masters of the test's own (state.redis.cluster: true, the three
// nodes as seed addresses): each breaker's keys and the flags live in one slot each, pushed
// changes cross the nodes, and the fleet acts as one.
func TestFleetClusterSharesBreakersFlagsAndFaults(t *testing.T) {
	t.Parallel()
	nodes := startRedisCluster(t, 3)
	url := fmt.Sprintf("redis://%s?addr=%s&addr=%s", nodes[0].addr(), nodes[1].addr(), nodes[2].addr())
	prefix := fmt.Sprintf("afloat-cluster-%x:", rand.Uint64())
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{status: http.StatusServiceUnavailable} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := fmt.Sprintf("state:\n  backend: redis\n  redis: {url: %q, cluster: true, prefix: %q}\n", url, prefix) +
		triageConfig("2s", []string{"primary", "backup"},
			map[string]string{"primary": primary.URL, "backup": backup.URL},
			map[string]string{"primary": ", probe: off, retry: {max: 0}"})
	fleetScenario(t, cfg, primary, backup)

	// The state is in the cluster, spread by slot: say where each key landed.
	holders := map[string][]string{}
	for _, n := range nodes {
		c := n.client()
		keys, err := c.Keys(t.Context(), prefix+"*").Result()
		if err != nil {
			t.Fatalf("KEYS on %s: %v", n.addr(), err)
		}
		for _, k := range keys {
			holders[strings.TrimPrefix(k, prefix)] = append(holders[strings.TrimPrefix(k, prefix)], n.addr())
		}
	}
	for _, key := range []string{"{primary}:breaker", "{state}:flags"} {
		if len(holders[key]) != 1 {
			t.Errorf("key %s%s is held by %v, want one node of the cluster", prefix, key, holders[key])
		}
	}
	t.Logf("keys by node: %v", holders)
}

// fleetScenario is the scenario of TestFleetSharesBreakersFlagsAndFaults for a fleet config
// over a dead primary and a good backup (fleetConfig's shape) with any Redis: three gateways
// take 60 calls, which reach the primary no more than the trip threshold plus one probe in
// total; a fourth that took none reports the breaker open too; a kill switch and a fault set
// through one gateway apply on all.
func fleetScenario(t *testing.T, cfg string, primary, backup *mockUpstream) {
	t.Helper()
	fleet := []*liveServe{
		startServe(t, cfg, "primary", "backup"),
		startServe(t, cfg, "primary", "backup"),
		startServe(t, cfg, "primary", "backup"),
	}
	observer := startServe(t, cfg, "primary", "backup")
	all := append(fleet[:len(fleet):len(fleet)], observer)

	const calls, threshold = 60, 5 // the default consecutive_failures
	for i := range calls {
		env := fleet[i%len(fleet)].mustTriage("Не работает оплата", "ошибка 500")
		if env.Source != "model" || env.provider() != "backup" {
			t.Fatalf("call %d: %v, want the backup's answer", i, env)
		}
	}
	if n := primary.hits.Load(); n < threshold || n > threshold+1 {
		t.Errorf("the primary was called %d times over the fleet, want %d (the trip threshold, not %d×%d)", n, threshold, len(fleet), threshold)
	}
	for i, g := range all {
		if st := g.status()["primary"].Breaker; st != "open" {
			t.Errorf("gateway %d reports the primary's breaker %q, want open", i, st)
		}
	}
	if got := backup.hits.Load(); got != calls {
		t.Errorf("the backup was called %d times, want %d", got, calls)
	}

	t.Run("kill switch on one applies on another within a second", func(t *testing.T) {
		patchFlags(t, fleet[0], `{"tasks": {"triage": {"kill": true}}}`)
		d := waitUntil(t, time.Second, "the kill switch set on gateway 0 to apply on gateway 1", func() bool {
			return fleet[1].mustTriage("Вопрос по счёту", "проверьте").reason() == "kill_switch"
		})
		t.Logf("the kill switch applied on another gateway %v after it was set", d.Round(time.Microsecond))
		for i, g := range all {
			if env := g.mustTriage("Вопрос по счёту", "проверьте"); env.reason() != "kill_switch" {
				t.Errorf("gateway %d answers %v, want reason kill_switch", i, env)
			}
		}
		var doc struct {
			Tasks map[string]struct{ Kill bool } `json:"tasks"`
		}
		if b := patchFlags(t, fleet[2], `{"tasks": {"triage": {"kill": false}}}`); json.Unmarshal([]byte(b), &doc) != nil || doc.Tasks["triage"].Kill {
			t.Errorf("PATCH answered %s, want the kill switch off", b)
		}
	})

	t.Run("a fault injected on one applies on all", func(t *testing.T) {
		code, b, err := fleet[1].do("PUT", "/admin/faults/backup", scenarioAdmin, `{"mode": "unavailable", "status": 502, "ttl": "1m"}`)
		if err != nil || code != http.StatusOK {
			t.Fatalf("PUT /admin/faults/backup: %d %s %v", code, b, err)
		}
		for i, g := range all {
			waitUntil(t, time.Second, fmt.Sprintf("the fault set on gateway 1 to apply on gateway %d", i), func() bool {
				return g.mustTriage("Вопрос по счёту", "проверьте").Source == "heuristic"
			})
			if f := faultOf(t, g, "backup"); !strings.Contains(f, `"unavailable"`) {
				t.Errorf("gateway %d shows the backup's fault as %s", i, f)
			}
		}
		if code, b, err := fleet[2].do("DELETE", "/admin/faults/backup", scenarioAdmin, ""); err != nil || code != http.StatusOK {
			t.Fatalf("DELETE /admin/faults/backup: %d %s %v", code, b, err)
		}
		for i, g := range all {
			waitUntil(t, 2*time.Second, fmt.Sprintf("the fault cleared on gateway 2 to clear on gateway %d", i), func() bool {
				return faultOf(t, g, "backup") == "null"
			})
		}
	})
}
