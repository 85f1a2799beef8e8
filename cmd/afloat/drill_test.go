package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// TestDrillWaitsOutARampUp: a drill run right after another finds the provider's breaker
// closed a moment ago and ramping up (breaker.ramp_up, 4s here): most calls then skip the
// provider as circuit_open, so that the healthy phase would measure the next tier and the
// fault reach too few calls to open a rate-based breaker. The second drill says that it
// waits, starts once the ramp-up is over, and passes.
func TestDrillWaitsOutARampUp(t *testing.T) {
	t.Parallel()
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL},
		map[string]string{"primary": ", probe: off, retry: {max: 0}", "backup": ", probe: off"})
	cfg = strings.Replace(cfg, "breaker: {recovery: 5m}", "breaker: {recovery: 300ms, max_recovery: 600ms, ramp_up: 4s}", 1)
	g := startServe(t, cfg, "primary", "backup")
	if code, rep, stderr := runDrillCmd(t, g, "--provider", "primary", "--mode", "unavailable"); code != 0 {
		t.Fatalf("the first drill exited %d (%+v); stderr:\n%s", code, rep.Checks, stderr)
	}
	_, body, err := g.do("GET", "/admin/status", scenarioAdmin, "")
	var st struct {
		Providers map[string]struct {
			RampUntil *time.Time `json:"ramp_until"`
		} `json:"providers"`
	}
	if err != nil || json.Unmarshal(body, &st) != nil {
		t.Fatalf("GET /admin/status: %v %s", err, body)
	}
	until := st.Providers["primary"].RampUntil
	if until == nil {
		t.Fatalf("the primary is not ramping up after the first drill: %s", body)
	}
	code, rep, stderr := runDrillCmd(t, g, "--provider", "primary", "--mode", "unavailable")
	for _, c := range rep.Checks {
		t.Logf("%-16s %-5v %s", c.Name, c.Passed, c.Figure)
	}
	if code != 0 || !rep.Passed {
		t.Errorf("the second drill exited %d, passed %v; stderr:\n%s", code, rep.Passed, stderr)
	}
	if !strings.Contains(stderr, "waiting") || !strings.Contains(stderr, "ramp-up") {
		t.Errorf("stderr %q does not say that the drill waits for the ramp-up", stderr)
	}
	if rep.StartedAt.Before(*until) {
		t.Errorf("the second drill started at %s, before the ramp-up's end %s", rep.StartedAt, until)
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

// TestDrillMalformedPasses: with the primary answering off the contract, the backup answers
// after the re-ask, and the breaker must stay closed (a contract violation never moves it):
// the drill passes, and says so in breaker_opened and metrics_moved.
func TestDrillMalformedPasses(t *testing.T) {
	t.Parallel()
	g := drillGateway(t, "")
	code, rep, stderr := runDrillCmd(t, g, "--provider", "primary", "--mode", "malformed")
	for _, c := range rep.Checks {
		t.Logf("%-16s %-5v %s", c.Name, c.Passed, c.Figure)
	}
	if code != 0 || !rep.Passed {
		t.Fatalf("drill exited %d, passed %v; stderr:\n%s", code, rep.Passed, stderr)
	}
	if c := checkOf(rep, "breaker_opened"); !strings.Contains(c.Figure, "stayed closed") {
		t.Errorf("breaker_opened: %s; want it to say the breaker stayed closed", c.Figure)
	}
}

// TestDrillRefusesABadStart: a provider outside the task's cascade, or one whose breaker is
// already open, is refused before any call (exit 1, the reason on stderr), and the fault is
// never set.
func TestDrillRefusesABadStart(t *testing.T) {
	t.Parallel()
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL}, nil)
	cfg = strings.Replace(cfg, "tasks:\n", "  spare: {type: sim}\ntasks:\n", 1)
	g := startServe(t, cfg, "primary", "backup")
	drill := func(provider string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"drill", "--target", g.base, "--admin-token", scenarioAdmin, "--task", "triage",
			"--provider", provider, "--mode", "unavailable", "--requests", "5"}, &stdout, &stderr)
		return code, stderr.String()
	}
	if code, stderr := drill("spare"); code != 1 || !strings.Contains(stderr, `provider "spare" is not in the cascade of "triage"`) {
		t.Errorf("a provider outside the cascade: exit %d, stderr %q", code, stderr)
	}
	if code, body, err := g.do("PUT", "/admin/breakers/primary", scenarioAdmin, `{"state": "open"}`); err != nil || code != http.StatusOK {
		t.Fatalf("PUT /admin/breakers/primary: %d %v %s", code, err, body)
	}
	if code, stderr := drill("primary"); code != 1 || !strings.Contains(stderr, `the breaker of "primary" is open before the drill`) {
		t.Errorf("a breaker open before the drill: exit %d, stderr %q", code, stderr)
	}
	if n := primary.hits.Load() + backup.hits.Load(); n != 0 {
		t.Errorf("%d calls reached the providers; want none", n)
	}
	if f := faultOf(t, g, "primary"); f != "null" {
		t.Errorf("fault %s; want none set", f)
	}
}

// TestDrillInterruptedIsNotRecorded: a drill stopped during the fault (its context ended, as
// by Ctrl-C) clears the fault, reports itself interrupted and failed, says why the breaker was
// not seen closed, and is not recorded: the task keeps no last drill.
func TestDrillInterruptedIsNotRecorded(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply {
		stop() // the first call the backup gets is one under the fault
		return upstreamReply{content: validTriage}
	})
	cfg := triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL},
		map[string]string{"primary": ", probe: off, retry: {max: 0}", "backup": ", probe: off"})
	g := startServe(t, cfg, "primary", "backup")
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"drill", "--target", g.base, "--admin-token", scenarioAdmin, "--task", "triage",
		"--provider", "primary", "--mode", "unavailable", "--duration", "1m", "--json"}, &stdout, &stderr)
	var rep drillReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, no JSON report: %v\n%s", code, err, stderr.String())
	}
	if code != 1 || !rep.Interrupted || rep.Passed || rep.Recorded != "not recorded (interrupted)" {
		t.Errorf("exit %d, interrupted %v, passed %v, recorded %q; want 1, true, false, not recorded", code, rep.Interrupted, rep.Passed, rep.Recorded)
	}
	if c := checkOf(rep, "breaker_closed"); !strings.Contains(c.Figure, "interrupted") {
		t.Errorf("breaker_closed: %s; want it to say the drill was interrupted", c.Figure)
	}
	if f := faultOf(t, g, "primary"); f != "null" {
		t.Errorf("fault %s after the drill; want it cleared", f)
	}
	_, body, err := g.do("GET", "/admin/status", scenarioAdmin, "")
	var st struct {
		Tasks map[string]struct {
			LastDrill json.RawMessage `json:"last_drill"`
		} `json:"tasks"`
	}
	if err != nil || json.Unmarshal(body, &st) != nil {
		t.Fatalf("GET /admin/status: %v %s", err, body)
	}
	if d := string(st.Tasks["triage"].LastDrill); d != "null" {
		t.Errorf("last_drill %s; want null", d)
	}
}

// TestDrillInterruptClearsTheFaultAtOnce: Ctrl-C clears the fault while a call under it is
// still in flight, not once the calls in flight have answered: the backup, holding the first
// call it gets under the fault, sees the drill's DELETE of the fault answered before it answers
// (the drill waits for the calls in flight, which its Ctrl-C does not cancel). The drill talks
// to the gateway through a proxy that tells when that DELETE was answered.
func TestDrillInterruptClearsTheFaultAtOnce(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cleared := make(chan struct{})
	var first atomic.Bool
	seen := make(chan bool, 1)
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply {
		if !first.CompareAndSwap(false, true) {
			return upstreamReply{content: validTriage}
		}
		stop() // Ctrl-C, while this call is in flight
		select {
		case <-cleared:
			seen <- true
		case <-time.After(time.Second): // under the backup's 2 s read timeout, which would end the call
			seen <- false
		}
		return upstreamReply{content: validTriage}
	})
	cfg := triageConfig("10s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL},
		map[string]string{"primary": ", probe: off, retry: {max: 0}", "backup": ", probe: off"})
	g := startServe(t, cfg, "primary", "backup")
	u, err := url.Parse(g.base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var once sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(w, r)
		if r.Method == http.MethodDelete && r.URL.Path == "/admin/faults/primary" {
			once.Do(func() { close(cleared) })
		}
	}))
	defer front.Close()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"drill", "--target", front.URL, "--admin-token", scenarioAdmin, "--task", "triage",
		"--provider", "primary", "--mode", "unavailable", "--duration", "1m", "--json"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d; want 1 (interrupted)\n%s", code, stderr.String())
	}
	select {
	case ok := <-seen:
		if !ok {
			t.Error("the fault was not cleared within 1 s of the interrupt while a call under it was in flight; want it cleared at once")
		}
	default:
		t.Fatal("the backup got no call under the fault")
	}
	if f := faultOf(t, g, "primary"); f != "null" {
		t.Errorf("fault %s after the drill; want it cleared", f)
	}
}

// TestDrillPassesOnARoute: the drill of a chat route (--route): the primary made
// unavailable, the backup answers with X-Afloat-Degraded, the breaker opens and closes.
func TestDrillPassesOnARoute(t *testing.T) {
	t.Parallel()
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: "hello"} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: "hello from the backup"} })
	cfg := triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": primary.URL, "backup": backup.URL},
		map[string]string{"primary": ", probe: off, retry: {max: 0}", "backup": ", probe: off"})
	cfg = strings.Replace(cfg, "breaker: {recovery: 5m}", "breaker: {recovery: 300ms, max_recovery: 600ms, ramp_up: 300ms}", 1)
	cfg += "routes:\n  chat:\n    criticality: assistance\n    budget: 2s\n    cascade: [primary, backup]\n"
	g := startServe(t, cfg, "primary", "backup")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"drill", "--target", g.base, "--admin-token", scenarioAdmin, "--route", "chat",
		"--provider", "primary", "--mode", "unavailable", "--duration", "2s", "--rate", "25", "--recover", "10s", "--json"}, &stdout, &stderr)
	var rep drillReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, no JSON report: %v\n%s", code, err, stderr.String())
	}
	for _, c := range rep.Checks {
		t.Logf("%-16s %-5v %s", c.Name, c.Passed, c.Figure)
	}
	if code != 0 || !rep.Passed || rep.Scope != "route:chat" {
		t.Fatalf("drill exited %d, passed %v, scope %s; stderr:\n%s", code, rep.Passed, rep.Scope, stderr.String())
	}
}

// TestDrillReadsARouteRefusalsCode: a route's error answer (OpenAI's shape) gives the
// report its code.
func TestDrillReadsARouteRefusalsCode(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error": {"code": "route_unavailable", "message": "no tier answered", "type": "api_error"}}`))
	}))
	defer gw.Close()
	d := &drillRun{o: drillOptions{target: gw.URL, route: "chat", provider: "primary"}, client: gw.Client(), path: "/v1/chat/completions", start: time.Now()}
	if c := d.call(context.Background(), "fault"); c.Status != 503 || c.Code != "route_unavailable" {
		t.Errorf("status %d, code %q; want 503 and the body's code", c.Status, c.Code)
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
		// The fault is checked as the gateway checks it, before any call.
		{"unknown mode", []string{"--mode", "explode"}, nil},
		{"error rate without its rate", []string{"--mode", "error_rate"}, nil},
		{"a delay the mode does not take", []string{"--mode", "unavailable", "--delay", "2s"}, nil},
		{"status out of range", []string{"--mode", "unavailable", "--status", "200"}, nil},
		{"duration and requests", []string{"--duration", "30s", "--requests", "10"}, nil},
		{"no time to recover", []string{"--recover", "0s"}, nil},
		{"a secret too short to search", []string{"--secret", "abc"}, nil},
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

// TestDrillStopsWhenTheHealthyCallsFail: a drill whose own calls are refused (an input the
// task does not take: 400 on every call) stops at the first refusal rather than after the
// healthy phase's 100 calls, says why with the gateway's message, and never injects the
// fault: it would judge a degradation it cannot see.
func TestDrillStopsWhenTheHealthyCallsFail(t *testing.T) {
	t.Parallel()
	g := drillGateway(t, "")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"drill", "--target", g.base, "--admin-token", scenarioAdmin, "--task", "triage",
		"--provider", "primary", "--mode", "unavailable", "--requests", "5", "--rate", "50", "--input", `{"nope": 1}`}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "failed before any fault (the first: 400 invalid_input: ") ||
		!strings.Contains(stderr.String(), "no fault was injected") {
		t.Errorf("exit %d, stderr %q; want 1 and the healthy calls' failure with its message", code, stderr.String())
	}
	m := regexp.MustCompile(`(\d+) of (\d+) calls failed`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr %q names no count of calls", stderr.String())
	}
	if made, _ := strconv.Atoi(m[2]); made > 20 {
		t.Errorf("%s calls made after the first refusal; want the phase to stop there (its 100 calls take 2s)", m[2])
	}
	if stdout.Len() != 0 {
		t.Errorf("a report on stdout: %s", stdout.String())
	}
	if f := faultOf(t, g, "primary"); f != "null" {
		t.Errorf("fault %s; want none set", f)
	}
}

// TestDrillMainPathCountsRefusals: a 4xx during the fault fails main_path as a 5xx does.
func TestDrillMainPathCountsRefusals(t *testing.T) {
	calls := []drillCall{
		{Phase: "healthy", At: 0, Status: 200, Source: "model", Provider: "primary", Latency: 5 * time.Millisecond},
		{Phase: "fault", At: time.Second, Status: 200, Source: "heuristic", Degraded: true, Reason: "circuit_open"},
		{Phase: "fault", At: 2 * time.Second, Status: 401, Code: "invalid_api_key"},
	}
	var r drillReport
	r.check(drillOptions{task: "triage", provider: "primary", fault: map[string]any{"mode": "unavailable"}}, "enrichment", calls, -1, -1, -1, drillMetrics{}, drillMetrics{}, nil)
	if c := checkOf(r, "main_path"); c.Passed || !strings.Contains(c.Figure, "1 of 2 calls during the fault failed") || !strings.Contains(c.Figure, "401") {
		t.Errorf("main_path %v: %s; want it failed by the 401", c.Passed, c.Figure)
	}
}

// TestDrillPartialFaultLetsTheProviderAnswer: under a partial fault (an error rate under 1,
// flap) the provider's own whole answers between the failures are right, not unmarked
// degradation; under a whole one (an error rate of 1, unavailable) they fail degraded_marked.
func TestDrillPartialFaultLetsTheProviderAnswer(t *testing.T) {
	calls := []drillCall{
		{Phase: "healthy", At: 0, Status: 200, Source: "model", Provider: "primary", Latency: 5 * time.Millisecond},
		{Phase: "fault", At: time.Second, Status: 200, Source: "model", Provider: "primary"},
		{Phase: "fault", At: 2 * time.Second, Status: 200, Source: "model", Provider: "backup", Degraded: true},
		{Phase: "fault", At: 3 * time.Second, Status: 200, Source: "heuristic", Degraded: true, Reason: "circuit_open"},
	}
	for _, tc := range []struct {
		fault map[string]any
		pass  bool
	}{
		{map[string]any{"mode": "error_rate", "rate": 0.5}, true},
		{map[string]any{"mode": "flap", "down": "2s", "up": "2s"}, true},
		{map[string]any{"mode": "error_rate", "rate": 1.0}, false},
		{map[string]any{"mode": "unavailable"}, false},
	} {
		var r drillReport
		r.check(drillOptions{task: "triage", provider: "primary", fault: tc.fault}, "enrichment", slices.Clone(calls), -1, -1, -1, drillMetrics{}, drillMetrics{}, nil)
		if c := checkOf(r, "degraded_marked"); c.Passed != tc.pass {
			t.Errorf("fault %v: degraded_marked %v (%s); want %v", tc.fault, c.Passed, c.Figure, tc.pass)
		}
		// A breaker that a partial error rate left closed: the figure says why it may be so.
		hint := strings.Contains(checkOf(r, "breaker_opened").Figure, "under the breaker's threshold")
		if want := tc.fault["mode"] == "error_rate" && tc.fault["rate"] != 1.0; hint != want {
			t.Errorf("fault %v: breaker_opened %q; want the threshold hint %v", tc.fault, checkOf(r, "breaker_opened").Figure, want)
		}
	}
}

// TestDrillPrepareNamesWhatIsMissing: an unknown task or route is named as such before the
// provider is looked at; a half-open breaker is let through (the healthy calls close it), an
// open one is not.
func TestDrillPrepareNamesWhatIsMissing(t *testing.T) {
	st := &drillStatus{}
	if err := json.Unmarshal([]byte(`{"providers": {"primary": {"breaker": "closed", "tasks": {"triage": {}}}},
		"tasks": {"triage": {"inputs": ["subject"], "criticality": "enrichment"}}, "routes": {}}`), st); err != nil {
		t.Fatal(err)
	}
	prepare := func(o drillOptions) error { _, _, err := (&drillRun{o: o}).prepare(st); return err }
	if err := prepare(drillOptions{task: "nosuch", provider: "primary"}); err == nil || !strings.Contains(err.Error(), `the gateway has no task "nosuch" (it has triage)`) {
		t.Errorf("an unknown task: %v", err)
	}
	if err := prepare(drillOptions{route: "nosuch", provider: "primary"}); err == nil || !strings.Contains(err.Error(), `the gateway has no route "nosuch"`) {
		t.Errorf("an unknown route: %v", err)
	}
	p := st.Providers["primary"]
	p.Breaker = "half-open"
	st.Providers["primary"] = p
	if err := prepare(drillOptions{task: "triage", provider: "primary"}); err != nil {
		t.Errorf("a half-open breaker: %v; want the drill let through", err)
	}
	p.Breaker = "open"
	st.Providers["primary"] = p
	if err := prepare(drillOptions{task: "triage", provider: "primary"}); err == nil || !strings.Contains(err.Error(), "is open before the drill") {
		t.Errorf("an open breaker: %v", err)
	}
}
