package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// drillGateway is a gateway over a healthy primary and backup mock whose breakers probe
// soon (recovery 300ms) and ramp up briefly, so that a drill sees them open and close
// within seconds; extra is more of the primary's YAML flow mapping.
func drillGateway(t *testing.T, extra string) *liveServe {
	t.Helper()
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL},
		map[string]string{"primary": ", probe: off, retry: {max: 0}" + extra, "backup": ", probe: off"})
	cfg = strings.Replace(cfg, "breaker: {recovery: 5m}", "breaker: {recovery: 300ms, max_recovery: 600ms, ramp_up: 300ms}", 1)
	return startServe(t, cfg, "primary", "backup")
}

// simDrillGateway is drillGateway over simulated providers (type: sim).
func simDrillGateway(t *testing.T) *liveServe {
	t.Helper()
	cfg := triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": "http://unused", "backup": "http://unused"}, nil)
	for _, p := range []string{"primary", "backup"} {
		cfg = strings.Replace(cfg, fmt.Sprintf("%s: {type: openai, base_url: %q, model: mock-%s}", p, "http://unused/v1", p),
			p+": {type: sim, latency: {p50: 5ms, p95: 10ms}, probe: off, retry: {max: 0}}", 1)
	}
	cfg = strings.Replace(cfg, "breaker: {recovery: 5m}", "breaker: {recovery: 300ms, max_recovery: 600ms, ramp_up: 300ms}", 1)
	if !strings.Contains(cfg, "type: sim") {
		t.Fatalf("config not rewritten:\n%s", cfg)
	}
	return startServe(t, cfg, "primary", "backup")
}

// runDrillCmd runs afloat drill against g and returns its exit code and JSON report.
func runDrillCmd(t *testing.T, g *liveServe, args ...string) (int, drillReport, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	all := append([]string{"drill", "--target", g.base, "--admin-token", scenarioAdmin, "--task", "triage",
		"--duration", "2s", "--rate", "25", "--recover", "10s", "--json"}, args...)
	code := run(context.Background(), all, &stdout, &stderr)
	var rep drillReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("drill exited %d with no JSON report: %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout.String(), stderr.String())
	}
	return code, rep, stderr.String()
}

func checkOf(rep drillReport, name string) drillCheck {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return drillCheck{Name: name, Figure: "missing"}
}

// TestDrillPassesOnAHealthyGateway: the primary made unavailable, the backup answers,
// the breaker opens and fails fast, then closes and the primary answers again: every
// check passes, the fault is cleared, and the drill is recorded in /admin/status.
func TestDrillPassesOnAHealthyGateway(t *testing.T) {
	t.Parallel()
	g := drillGateway(t, "")
	code, rep, stderr := runDrillCmd(t, g, "--provider", "primary", "--mode", "unavailable", "--status", "502")
	for _, c := range rep.Checks {
		t.Logf("%-16s %-5v %s", c.Name, c.Passed, c.Figure)
	}
	if code != 0 || !rep.Passed {
		t.Fatalf("drill exited %d, passed %v; stderr:\n%s", code, rep.Passed, stderr)
	}
	names := []string{"main_path", "degraded_marked", "breaker_opened", "fail_fast", "metrics_moved", "no_credentials", "breaker_closed", "primary_back"}
	for _, n := range names {
		if c := checkOf(rep, n); !c.Passed {
			t.Errorf("check %s: %s", n, c.Figure)
		}
	}
	if f := faultOf(t, g, "primary"); f != "null" {
		t.Errorf("the fault is still set after the drill: %s", f)
	}
	code2, body, err := g.do("GET", "/admin/status", scenarioAdmin, "")
	var st struct {
		Tasks map[string]struct {
			LastDrill *struct {
				Provider string `json:"provider"`
				Mode     string `json:"mode"`
				Passed   bool   `json:"passed"`
			} `json:"last_drill"`
			DrillStale bool `json:"drill_stale"`
		} `json:"tasks"`
	}
	if err != nil || code2 != http.StatusOK || json.Unmarshal(body, &st) != nil {
		t.Fatalf("GET /admin/status: %d %v %s", code2, err, body)
	}
	if d := st.Tasks["triage"].LastDrill; d == nil || !d.Passed || d.Provider != "primary" || d.Mode != "unavailable" || st.Tasks["triage"].DrillStale {
		t.Errorf("last_drill %+v (stale %v), want the passing drill of primary", d, st.Tasks["triage"].DrillStale)
	}
	if age := g.metric("afloat_drill_age_seconds", map[string]string{"task": "triage"}); age < 0 || age > 60 {
		t.Errorf("afloat_drill_age_seconds %v, want a few seconds", age)
	}
}

// TestDrillPassesOverSimulatedProviders: the same drill over type: sim providers.
func TestDrillPassesOverSimulatedProviders(t *testing.T) {
	t.Parallel()
	g := simDrillGateway(t)
	code, rep, stderr := runDrillCmd(t, g, "--provider", "primary", "--mode", "unavailable")
	if code != 0 || !rep.Passed {
		for _, c := range rep.Checks {
			t.Logf("%-16s %-5v %s", c.Name, c.Passed, c.Figure)
		}
		t.Fatalf("drill exited %d, passed %v; stderr:\n%s", code, rep.Passed, stderr)
	}
}

// TestDrillFailsWithoutABreaker: with the primary's breaker disabled the drill fails, and
// names breaker_opened and fail_fast.
func TestDrillFailsWithoutABreaker(t *testing.T) {
	t.Parallel()
	g := drillGateway(t, ", breaker: {enabled: false}")
	code, rep, _ := runDrillCmd(t, g, "--provider", "primary", "--mode", "timeout")
	if code != 1 || rep.Passed {
		t.Fatalf("drill exited %d, passed %v; want a failure", code, rep.Passed)
	}
	for _, n := range []string{"breaker_opened", "fail_fast"} {
		if c := checkOf(rep, n); c.Passed {
			t.Errorf("check %s passed (%s), want it failed", n, c.Figure)
		}
	}
}

// TestDrillFailsWhenTheFaultChangesNothing: drilling the backup while the primary answers
// everything changes nothing: the breaker never opens and answers are not degraded.
func TestDrillFailsWhenTheFaultChangesNothing(t *testing.T) {
	t.Parallel()
	g := drillGateway(t, "")
	code, rep, _ := runDrillCmd(t, g, "--provider", "backup", "--mode", "unavailable", "--recover", "1s")
	if code != 1 || rep.Passed {
		t.Fatalf("drill exited %d, passed %v; want a failure", code, rep.Passed)
	}
	for _, n := range []string{"breaker_opened", "degraded_marked"} {
		if c := checkOf(rep, n); c.Passed {
			t.Errorf("check %s passed (%s), want it failed", n, c.Figure)
		}
	}
}

// TestDrillFlags: the fault flags become the fault's JSON fields (DESIGN §6), only those
// given; bad uses are refused with the usage.
func TestDrillFlags(t *testing.T) {
	base := []string{"--admin-token", scenarioAdmin, "--task", "triage", "--provider", "primary"}
	tests := []struct {
		name string
		args []string
		want map[string]any // nil: refused
	}{
		{"unavailable", []string{"--mode", "unavailable", "--status", "502"}, map[string]any{"mode": "unavailable", "status": 502}},
		{"flap", []string{"--mode", "flap", "--down", "2s", "--up", "3s"}, map[string]any{"mode": "flap", "down": "2s", "up": "3s"}},
		{"rate limited", []string{"--mode", "rate_limited", "--retry-after", "1m"}, map[string]any{"mode": "rate_limited", "retry_after": "1m0s"}},
		{"stream cut", []string{"--mode", "stream_cut", "--after-chunks", "2"}, map[string]any{"mode": "stream_cut", "after_chunks": 2}},
		{"error rate", []string{"--mode", "error_rate", "--error-rate", "0.5"}, map[string]any{"mode": "error_rate", "rate": 0.5}},
		{"no scope", []string{"--task", "", "--mode", "timeout"}, nil},
		{"task and route", []string{"--route", "chat"}, nil},
		{"zero rate", []string{"--rate", "0"}, nil},
		{"stray argument", []string{"now"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			o, err := parseDrill(append(slices.Clone(base), tc.args...), &stderr)
			if tc.want == nil {
				if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "Usage: afloat drill") {
					t.Errorf("err %v, stderr %q; want errUsage with the usage", err, stderr.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			if !maps.Equal(o.fault, tc.want) {
				t.Errorf("fault %v, want %v", o.fault, tc.want)
			}
		})
	}
}

// TestDrillCountsCachedAnswersAsDegraded: an answer from the task's answer cache during the
// fault is marked degraded and keeps the main path (it names the provider that gave it
// earlier, the drilled one included).
func TestDrillCountsCachedAnswersAsDegraded(t *testing.T) {
	var r drillReport
	calls := []drillCall{
		{Phase: "healthy", At: 0, Status: 200, Source: "model", Provider: "primary", Latency: 5 * time.Millisecond},
		{Phase: "fault", At: time.Second, Status: 200, Source: "cache", Degraded: true, Provider: "primary", Reason: "circuit_open"},
		{Phase: "fault", At: 2 * time.Second, Status: 200, Source: "heuristic", Degraded: true, Reason: "circuit_open"},
	}
	r.check(drillOptions{task: "triage", provider: "primary"}, "enrichment", calls, -1, -1, -1, drillMetrics{}, drillMetrics{}, nil)
	for _, n := range []string{"main_path", "degraded_marked"} {
		if c := checkOf(r, n); !c.Passed {
			t.Errorf("%s with a cached answer during the fault: %s", n, c.Figure)
		}
	}
	if r.Figures.Sources["cache"] != 1 {
		t.Errorf("sources %v, want the cached answer counted", r.Figures.Sources)
	}
}
