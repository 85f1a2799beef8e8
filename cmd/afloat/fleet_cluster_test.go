package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
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
