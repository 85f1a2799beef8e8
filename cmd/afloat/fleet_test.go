package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisURL returns the Redis of the integration tests (AFLOAT_REDIS_URL, which .ci/run sets),
// skipping the test without it, or failing it under CI=true.
func redisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("AFLOAT_REDIS_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("AFLOAT_REDIS_URL is not set, and CI=true: the Redis integration tests must run")
		}
		t.Skip("AFLOAT_REDIS_URL is not set: skipping the Redis integration test")
	}
	return u
}

// redisPrefix returns a key prefix of the test's own, and removes its keys when the test ends.
func redisPrefix(t *testing.T, url string) string {
	t.Helper()
	prefix := fmt.Sprintf("afloat-test-%x:", rand.Uint64())
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	if err := c.Ping(t.Context()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis at %s: %v", url, err)
		}
		t.Skipf("redis at %s does not answer: %v", url, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		_ = c.Close()
	})
	return prefix
}

// fleetConfig is triageConfig over a dead primary and a good backup, with its state in Redis
// under prefix.
func fleetConfig(url, prefix string, primary, backup string) string {
	return fmt.Sprintf("state:\n  backend: redis\n  redis: {url: %q, prefix: %q}\n", url, prefix) +
		triageConfig("2s", []string{"primary", "backup"},
			map[string]string{"primary": primary, "backup": backup},
			map[string]string{"primary": ", probe: off, retry: {max: 0}"})
}

// TestFleetSharesBreakersFlagsAndFaults runs three gateways over one Redis, the primary dead:
// 60 calls spread over them reach the primary no more than the trip threshold plus one probe
// in total; a fourth gateway that took no call reports the breaker open too; a kill switch
// set through one gateway applies on another within a second; a fault injected through one
// applies on all.
func TestFleetSharesBreakersFlagsAndFaults(t *testing.T) {
	url := redisURL(t)
	prefix := redisPrefix(t, url)
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{status: http.StatusServiceUnavailable} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	fleetScenario(t, fleetConfig(url, prefix, primary.URL, backup.URL), primary, backup)
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
			// Within a second it shows the fault too. The two are not read in one step: on
			// the Redis Cluster a gateway was seen answering with the heuristic while its
			// status still showed no fault (2 runs in about 30; its cause is not found).
			waitUntil(t, time.Second, fmt.Sprintf("gateway %d to show the backup's fault", i), func() bool {
				return strings.Contains(faultOf(t, g, "backup"), `"unavailable"`)
			})
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

// faultOf returns the fault of provider in the gateway's /admin/status, as JSON.
func faultOf(t *testing.T, g *liveServe, provider string) string {
	t.Helper()
	code, b, err := g.do("GET", "/admin/status", scenarioAdmin, "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /admin/status: %d %s %v", code, b, err)
	}
	var doc struct {
		Providers map[string]struct {
			Fault json.RawMessage `json:"fault"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return string(doc.Providers[provider].Fault)
}
