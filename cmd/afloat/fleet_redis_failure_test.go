package main

// What a fleet does when its Redis fails (shared/DESIGN.md §6, state.on_failure): each test
// runs its own redis-server (redisproc_test.go), so that killing or pausing it leaves the
// shared one of the other tests alone, and two gateways over it under traffic. With
// on_failure local no call fails and none waits on the dead Redis for more than about the
// command timeout; the outage shows in /admin/status, /readyz and /metrics; the fleet shares
// its state again once Redis answers, without a restart. With on_failure fail the gateways
// refuse calls while Redis is down, and take them again once it is back.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ownRedisConfig is triageConfig over primary and backup, with its state in the test's own
// Redis at url; stateKeys are more keys of state.redis's flow mapping (", timeout: 50ms"),
// onFailure is state.on_failure ("" leaves it out).
func ownRedisConfig(url, stateKeys, onFailure, primary, backup string) string {
	state := fmt.Sprintf("state:\n  backend: redis\n  redis: {url: %q%s}\n", url, stateKeys)
	if onFailure != "" {
		state += "  on_failure: " + onFailure + "\n"
	}
	return state + triageConfig("2s", []string{"primary", "backup"},
		map[string]string{"primary": primary, "backup": backup},
		map[string]string{"primary": ", probe: off, retry: {max: 0}"})
}

// TestFleetRedisKilledAndRestarted kills the fleet's Redis in the middle of traffic (the
// primary dead, so that the breakers matter) and starts it again on the same port, empty:
// every call is answered by the backup throughout, and no slower during the outage than ten
// times the healthy p99 plus a second; both gateways report the fallback (state_backend
// healthy false, fallback local; /readyz still 200; afloat_state_backend_healthy 0) and keep
// the fault they knew; each trips the primary's breaker on its own while Redis is down; once
// Redis answers they report healthy again and a kill switch set through one applies on the
// other.
func TestFleetRedisKilledAndRestarted(t *testing.T) {
	t.Parallel()
	srv := startRedisServer(t)
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{status: http.StatusServiceUnavailable} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := ownRedisConfig(srv.url(), "", "", primary.URL, backup.URL)
	fleet := []*liveServe{startServe(t, cfg, "primary", "backup"), startServe(t, cfg, "primary", "backup")}

	// A fault set before the outage, which the gateways must keep through it. (It is on the
	// dead primary, so that it changes no answer. A flag would do as well, were it not for
	// the bug of TestFleetRedisFlagsAfterRedisLostThem.)
	if code, b, err := fleet[0].do("PUT", "/admin/faults/primary", scenarioAdmin, `{"mode": "unavailable", "status": 502, "ttl": "1m"}`); err != nil || code != http.StatusOK {
		t.Fatalf("PUT /admin/faults/primary: %d %s %v", code, b, err)
	}
	waitUntil(t, 2*time.Second, "gateway 1 to see the fault set through gateway 0", func() bool {
		return strings.Contains(adminStatusOf(t, fleet[1]).fault("primary"), `"unavailable"`)
	})

	tr := startTraffic(fleet, 2, fromBackup)
	defer tr.halt()
	tr.waitCalls(t, time.Time{}, 200)

	killed := time.Now()
	srv.stop()
	fellBack := waitUntil(t, 3*time.Second, "every gateway to report the state backend unhealthy", func() bool {
		return !slices.ContainsFunc(fleet, func(g *liveServe) bool { return stateBackendOf(t, g)["healthy"] != false })
	})
	for i, g := range fleet {
		st := adminStatusOf(t, g)
		sb := st.StateBackend
		if sb["kind"] != "redis" || sb["fallback"] != "local" || sb["error"] == nil {
			t.Errorf("gateway %d: /admin/status state_backend %v, want kind redis, healthy false, an error, fallback local", i, sb)
		}
		code, ready := readyzOf(t, g)
		if code != http.StatusOK || ready.StateBackend["healthy"] != false {
			t.Errorf("gateway %d: /readyz %d %v, want 200 (on_failure local) with state_backend.healthy false", i, code, ready)
		}
		if v := gaugeOf(t, g, "afloat_state_backend_healthy"); v != 0 {
			t.Errorf("gateway %d: afloat_state_backend_healthy %v while Redis is down, want 0", i, v)
		}
		if f := st.fault("primary"); !strings.Contains(f, `"unavailable"`) {
			t.Errorf("gateway %d: the primary's fault is %s while Redis is down, want the last known (unavailable)", i, f)
		}
	}
	// Traffic goes on past one gate period (1s), so that the calls that try the dead Redis
	// again are measured too.
	tr.waitCalls(t, killed, 100)
	waitUntil(t, 5*time.Second, "the outage to outlast the gate's retry period", func() bool {
		return time.Since(killed) > 1500*time.Millisecond
	})
	restarted := time.Now()
	srv.restart()
	waitUntil(t, 5*time.Second, "every gateway to report the state backend healthy again", func() bool {
		return !slices.ContainsFunc(fleet, func(g *liveServe) bool { return stateBackendOf(t, g)["healthy"] != true })
	})
	rejoined := time.Now()
	tr.waitCalls(t, rejoined, 100)
	samples := tr.halt()

	for i, g := range fleet {
		if v := gaugeOf(t, g, "afloat_state_backend_healthy"); v != 1 {
			t.Errorf("gateway %d: afloat_state_backend_healthy %v after Redis came back, want 1", i, v)
		}
		if n := gaugeOf(t, g, "afloat_state_backend_failures_total"); n < 1 {
			t.Errorf("gateway %d: afloat_state_backend_failures_total %v after an outage, want at least 1", i, n)
		} else {
			t.Logf("gateway %d: afloat_state_backend_failures_total %v", i, n)
		}
	}
	wantEveryCall(t, samples)
	healthy := phase(samples, time.Time{}, killed)
	outage := phase(samples, killed, restarted)
	after := phase(samples, rejoined, time.Time{})
	t.Logf("fell back %v after the kill; rejoined %v after the restart began", fellBack.Round(time.Millisecond), rejoined.Sub(restarted).Round(time.Millisecond))
	t.Logf("latency healthy: %v", healthy)
	t.Logf("latency Redis down: %v", outage)
	t.Logf("latency after the rejoin: %v", after)
	if limit := 10*healthy.p99 + time.Second; outage.p99 >= limit {
		t.Errorf("p99 with Redis down %v, want under %v (10× the healthy p99 + 1s)", outage.p99, limit)
	}
	// Each gateway's own breaker trips while Redis is down: the primary is tried no more
	// than the trip threshold (5) per gateway, plus the calls in flight (two per gateway).
	outagePrimary := tried(samples, "primary", killed, restarted)
	t.Logf("calls that tried the primary: %d while Redis answered, %d while it was down, %d after it came back (empty)",
		tried(samples, "primary", time.Time{}, killed), outagePrimary, tried(samples, "primary", restarted, time.Time{}))
	if limit := len(fleet) * (5 + 2); outagePrimary > limit {
		t.Errorf("%d calls tried the primary while Redis was down, want at most %d: the local breakers did not trip", outagePrimary, limit)
	}

	// Shared state resumed: a kill switch set through one gateway applies on the other.
	set := time.Now()
	if doc := patchFlags(t, fleet[0], `{"tasks": {"triage": {"kill": true}}}`); !strings.Contains(doc, `"kill":true`) {
		t.Errorf("PATCH /admin/flags on gateway 0 answered %s, want the triage kill switch on", doc)
	}
	for i, g := range fleet {
		waitUntil(t, 2*time.Second, fmt.Sprintf("the kill switch to apply on gateway %d", i), func() bool {
			return g.mustTriage("Вопрос по счёту", "проверьте").reason() == "kill_switch"
		})
	}
	t.Logf("the kill switch set through gateway 0 applied on both %v after it was set", time.Since(set).Round(time.Microsecond))
	patchFlags(t, fleet[1], `{"tasks": {"triage": {"kill": false}}}`)
	for i, g := range fleet {
		waitUntil(t, 2*time.Second, fmt.Sprintf("the kill switch to clear on gateway %d", i), func() bool {
			return g.mustTriage("Вопрос по счёту", "проверьте").reason() != "kill_switch"
		})
	}
}

// TestFleetRedisFlagsAfterRedisLostThem: a kill switch is set (the flags' version 1), Redis
// is restarted empty, and the kill switch is cleared through the other gateway: both
// gateways must stop answering with the kill switch.
//
// An empty Redis numbers the flag document's versions anew: state.State puts every loaded
// document in force whatever its version, and saves again the flags in force into a store
// that lost them.
func TestFleetRedisFlagsAfterRedisLostThem(t *testing.T) {
	t.Parallel()
	srv := startRedisServer(t)
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := ownRedisConfig(srv.url(), "", "", primary.URL, backup.URL)
	fleet := []*liveServe{startServe(t, cfg, "primary", "backup"), startServe(t, cfg, "primary", "backup")}

	patchFlags(t, fleet[0], `{"tasks": {"triage": {"kill": true}}}`)
	for i, g := range fleet {
		waitUntil(t, 2*time.Second, fmt.Sprintf("the kill switch to apply on gateway %d", i), func() bool {
			return g.mustTriage("Оплата", "не проходит").reason() == "kill_switch"
		})
	}
	srv.stop()
	waitUntil(t, 3*time.Second, "every gateway to report the state backend unhealthy", func() bool {
		return !slices.ContainsFunc(fleet, func(g *liveServe) bool { return stateBackendOf(t, g)["healthy"] != false })
	})
	srv.restart()
	waitUntil(t, 5*time.Second, "every gateway to report the state backend healthy again", func() bool {
		return !slices.ContainsFunc(fleet, func(g *liveServe) bool { return stateBackendOf(t, g)["healthy"] != true })
	})

	if doc := patchFlags(t, fleet[1], `{"tasks": {"triage": {"kill": false}}}`); strings.Contains(doc, `"kill":true`) {
		t.Errorf("PATCH /admin/flags clearing the kill switch answered %s, want it off", doc)
	}
	for i, g := range fleet {
		waitUntil(t, 2*time.Second, fmt.Sprintf("the kill switch cleared after Redis lost the flags to apply on gateway %d", i), func() bool {
			return g.mustTriage("Оплата", "не проходит").reason() != "kill_switch"
		})
	}
}

// TestFleetRedisSlow pauses the fleet's Redis (CLIENT PAUSE ALL) while two gateways serve
// over a good primary, with state.redis.timeout 50ms: the calls in the pause are slowed by
// about the command timeout, not by the pause, and the gateways share their state again
// when it ends.
func TestFleetRedisSlow(t *testing.T) {
	t.Parallel()
	const (
		timeout = 50 * time.Millisecond
		pause   = 1500 * time.Millisecond
	)
	srv := startRedisServer(t)
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	cfg := ownRedisConfig(srv.url(), ", timeout: "+timeout.String(), "", primary.URL, backup.URL)
	fleet := []*liveServe{startServe(t, cfg, "primary", "backup"), startServe(t, cfg, "primary", "backup")}

	tr := startTraffic(fleet, 2, fromProvider("primary"))
	defer tr.halt()
	tr.waitCalls(t, time.Time{}, 200)

	paused := time.Now()
	if err := srv.client().Do(t.Context(), "client", "pause", pause.Milliseconds(), "all").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	fellBack := waitUntil(t, pause, "a gateway to report the state backend unhealthy in the pause", func() bool {
		return slices.ContainsFunc(fleet, func(g *liveServe) bool { return stateBackendOf(t, g)["healthy"] == false })
	})
	waitUntil(t, 2*pause, "the pause to end", func() bool { return time.Since(paused) > pause })
	rejoined := waitUntil(t, 5*time.Second, "every gateway to report the state backend healthy after the pause", func() bool {
		return !slices.ContainsFunc(fleet, func(g *liveServe) bool { return stateBackendOf(t, g)["healthy"] != true })
	})
	tr.waitCalls(t, time.Now(), 50)
	samples := tr.halt()

	wantEveryCall(t, samples)
	healthy := phase(samples, time.Time{}, paused)
	slow := phase(samples, paused, paused.Add(pause))
	t.Logf("a gateway reported the fallback %v into the pause; both rejoined %v after it", fellBack.Round(time.Millisecond), rejoined.Round(time.Millisecond))
	t.Logf("latency healthy: %v", healthy)
	t.Logf("latency Redis paused: %v", slow)
	// A call waits on at most a command or two before the gate shuts for a second; the
	// margin is for the race detector and a loaded machine, and is still well under the
	// pause, which a call that waited on Redis would show.
	if limit := 10*healthy.p99 + 4*timeout; slow.p99 >= limit {
		t.Errorf("p99 in the pause %v, want under %v (10× the healthy p99 + 4× the command timeout)", slow.p99, limit)
	}
	// The slowest call only shows that none waited out the pause: one call's scheduling on a
	// loaded machine is too noisy for a tighter bound.
	if slow.max >= pause*2/3 {
		t.Errorf("slowest call in the pause %v, want well under the pause %v (a call that waited on Redis)", slow.max, pause)
	}
}

// TestFleetRedisOnFailureFail: with state.on_failure fail, a gateway whose Redis is killed
// answers calls 503 state_unavailable with Retry-After, and /readyz 503, until Redis is
// started again; then it answers 200 again.
func TestFleetRedisOnFailureFail(t *testing.T) {
	t.Parallel()
	srv := startRedisServer(t)
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	g := startServe(t, ownRedisConfig(srv.url(), "", "fail", primary.URL, backup.URL), "primary", "backup")
	triageBody := `{"input": {"subject": "Оплата", "message": "не проходит"}}`

	if env := g.mustTriage("Оплата", "не проходит"); env.provider() != "primary" {
		t.Fatalf("with Redis up the gateway answers %v, want the primary's answer", env)
	}
	if code, ready := readyzOf(t, g); code != http.StatusOK || ready.StateBackend["healthy"] != true {
		t.Fatalf("/readyz with Redis up: %d %v", code, ready)
	}

	srv.stop()
	var (
		resp *http.Response
		body []byte
	)
	refused := waitUntil(t, 3*time.Second, "a call to be refused with Redis down", func() bool {
		resp, body = doRaw(t, g, "POST", "/v1/tasks/triage", triageBody)
		return resp.StatusCode != http.StatusOK
	})
	t.Logf("calls refused %v after the kill", refused.Round(time.Millisecond))
	var apiErr struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &apiErr) != nil || apiErr.Error.Code != "state_unavailable" {
		t.Errorf("a call with Redis down answered %d %s, want 503 state_unavailable", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" {
		t.Error("the 503 state_unavailable has no Retry-After")
	} else if n, err := strconv.Atoi(ra); err != nil || n < 1 {
		t.Errorf("Retry-After %q, want a positive number of seconds", ra)
	}
	// /readyz answers from a probe at most a second old.
	var ready readyzDoc
	waitUntil(t, 3*time.Second, "/readyz to answer 503 with Redis down", func() bool {
		var code int
		code, ready = readyzOf(t, g)
		return code == http.StatusServiceUnavailable
	})
	if ready.StateBackend["healthy"] != false || ready.StateBackend["fallback"] != nil {
		t.Errorf("/readyz with Redis down reports state_backend %v, want healthy false and no fallback", ready.StateBackend)
	}

	restarted := time.Now()
	srv.restart()
	back := waitUntil(t, 5*time.Second, "a call to be answered again after Redis came back", func() bool {
		resp, _ := doRaw(t, g, "POST", "/v1/tasks/triage", triageBody)
		return resp.StatusCode == http.StatusOK
	})
	waitUntil(t, 3*time.Second, "/readyz to answer 200 after Redis came back", func() bool {
		code, _ := readyzOf(t, g)
		return code == http.StatusOK
	})
	t.Logf("calls answered again %v after the restart (%v after the kill)", back.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	if env := g.mustTriage("Оплата", "не проходит"); env.provider() != "primary" {
		t.Errorf("after Redis came back the gateway answers %v, want the primary's answer", env)
	}
}

// TestFleetRedisStalledConnections: every connection gateway A holds to Redis goes silent
// (a middlebox lost them: no reset, no answer, while new connections work), and gateway B
// sets a kill switch. A's subscription hears nothing more on its old connection; it must
// notice the silence (an unanswered ping), subscribe anew and apply the change, within the
// quiet wait (2s), the command timeout and the gate's retry (1s), with a margin.
func TestFleetRedisStalledConnections(t *testing.T) {
	t.Parallel()
	srv := startRedisServer(t)
	proxy := startStallProxy(t, srv.addr())
	primary := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	backup := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: validTriage} })
	a := startServe(t, ownRedisConfig("redis://"+proxy.addr()+"/0", ", timeout: 50ms", "", primary.URL, backup.URL), "primary", "backup")
	b := startServe(t, ownRedisConfig(srv.url(), ", timeout: 50ms", "", primary.URL, backup.URL), "primary", "backup")
	for range 5 {
		if env := a.mustTriage("Оплата", "не проходит"); env.provider() != "primary" {
			t.Fatalf("gateway A answers %v, want the primary's answer", env)
		}
	}

	proxy.stall()
	stalled := time.Now()
	patchFlags(t, b, `{"tasks": {"triage": {"kill": true}}}`)
	applied := waitUntil(t, 6*time.Second, "the kill switch set through B to apply on A, whose connections stalled", func() bool {
		env := a.mustTriage("Оплата", "не проходит")
		if err := fromProvider("primary")(env); err != nil && env.reason() != "kill_switch" {
			t.Fatalf("gateway A answers %v, want the primary's answer or the kill switch", env)
		}
		return env.reason() == "kill_switch"
	})
	t.Logf("the kill switch applied on the stalled gateway %v after the stall", applied.Round(time.Millisecond))
	waitUntil(t, 3*time.Second, "gateway A to report the state backend healthy again", func() bool {
		return stateBackendOf(t, a)["healthy"] == true
	})
	t.Logf("gateway A healthy again %v after the stall", time.Since(stalled).Round(time.Millisecond))
}

// ---- helpers ----

// waitUntil polls cond every 10ms until it holds, failing the test after limit; it returns
// how long it took.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("waited %v for %s", limit, what)
		}
		<-tick.C
	}
	return time.Since(start)
}

// adminStatus is the part of /admin/status these tests read.
type adminStatus struct {
	Providers map[string]struct {
		Fault json.RawMessage `json:"fault"`
	} `json:"providers"`
	StateBackend map[string]any `json:"state_backend"`
}

// fault returns the provider's fault, as JSON.
func (s adminStatus) fault(provider string) string { return string(s.Providers[provider].Fault) }

// adminStatusOf reads the gateway's /admin/status.
func adminStatusOf(t *testing.T, g *liveServe) adminStatus {
	t.Helper()
	code, b, err := g.do("GET", "/admin/status", scenarioAdmin, "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /admin/status: %d %s %v", code, b, err)
	}
	var doc adminStatus
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("status %s: %v", b, err)
	}
	return doc
}

// stateBackendOf returns the state_backend of the gateway's /admin/status.
func stateBackendOf(t *testing.T, g *liveServe) map[string]any {
	t.Helper()
	return adminStatusOf(t, g).StateBackend
}

// readyzDoc is the answer of /readyz.
type readyzDoc struct {
	Status       string         `json:"status"`
	Reason       string         `json:"reason"`
	StateBackend map[string]any `json:"state_backend"`
}

// readyzOf returns the status and the answer of the gateway's /readyz.
func readyzOf(t *testing.T, g *liveServe) (int, readyzDoc) {
	t.Helper()
	code, b, err := g.do("GET", "/readyz", "", "")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	var doc readyzDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("/readyz %d %s: %v", code, b, err)
	}
	return code, doc
}

// gaugeOf reads the unlabelled series name from the gateway's /metrics (liveServe.metric
// reads labelled ones).
func gaugeOf(t *testing.T, g *liveServe, name string) float64 {
	t.Helper()
	code, b, err := g.do("GET", "/metrics", "", "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// flagsOf returns the gateway's flag document, as JSON.
func flagsOf(t *testing.T, g *liveServe) string {
	t.Helper()
	code, b, err := g.do("GET", "/admin/flags", scenarioAdmin, "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /admin/flags: %d %s %v", code, b, err)
	}
	return string(b)
}

// patchFlags merges patch into the gateway's flags and returns the document it answered.
func patchFlags(t *testing.T, g *liveServe, patch string) string {
	t.Helper()
	code, b, err := g.do("PATCH", "/admin/flags", scenarioAdmin, patch)
	if err != nil || code != http.StatusOK {
		t.Fatalf("PATCH /admin/flags %s: %d %s %v", patch, code, b, err)
	}
	return strings.Join(strings.Fields(string(b)), "")
}

// doRaw sends a client request and returns the response (its body read) and the body, for
// the tests that read headers.
func doRaw(t *testing.T, g *liveServe, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp, b
}

// fromBackup accepts the backup's valid answer.
var fromBackup = fromProvider("backup")

// fromProvider returns a check that an envelope is the provider's valid answer.
func fromProvider(provider string) func(envelope) error {
	return func(env envelope) error {
		if env.Source != "model" || env.provider() != provider || env.Result["department"] != "technical" {
			return fmt.Errorf("envelope %v, want %s's answer", env, provider)
		}
		return nil
	}
}

// sample is one call of a traffic run.
type sample struct {
	start, end time.Time
	err        error // nil for a 200 whose envelope passed the check
	attempts   []attemptJSON
}

// traffic runs triage calls from a few clients per gateway until halt, each client pacing
// itself at most one call per 5ms; it is safe for concurrent use.
type traffic struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu      sync.Mutex
	samples []sample
}

// startTraffic starts clients callers per gateway; check decides whether an answer is valid.
func startTraffic(fleet []*liveServe, clients int, check func(envelope) error) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	for gi, g := range fleet {
		for c := range clients {
			tr.wg.Go(func() {
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-tr.stop:
						return
					case <-tick.C:
					}
					s := sample{start: time.Now()}
					env, err := g.triage("Не работает оплата", fmt.Sprintf("gateway %d client %d call %d: ошибка 500", gi, c, i))
					s.end = time.Now()
					if err == nil {
						s.attempts, err = env.Attempts, check(env)
					}
					s.err = err
					tr.mu.Lock()
					tr.samples = append(tr.samples, s)
					tr.mu.Unlock()
				}
			})
		}
	}
	return tr
}

// waitCalls waits (bounded) until n calls that started after since have ended.
func (tr *traffic) waitCalls(t *testing.T, since time.Time, n int) {
	t.Helper()
	waitUntil(t, 10*time.Second, fmt.Sprintf("%d calls", n), func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		got := 0
		for _, s := range tr.samples {
			if !s.start.Before(since) {
				got++
			}
		}
		return got >= n
	})
}

// halt stops the clients, waits for their last calls and returns every call made.
func (tr *traffic) halt() []sample {
	tr.once.Do(func() { close(tr.stop) })
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.samples)
}

// wantEveryCall fails the test for each failed call (the first few are shown).
func wantEveryCall(t *testing.T, samples []sample) {
	t.Helper()
	var failed []string
	for _, s := range samples {
		if s.err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", s.start.Format("15:04:05.000"), s.err))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d calls failed, first: %s", len(failed), len(samples), strings.Join(failed[:min(len(failed), 5)], "; "))
	}
	if len(samples) == 0 {
		t.Error("no call was made")
	}
}

// tried returns how many of the calls that started at from or later and, unless to is zero,
// before to called provider (an attempt its breaker refused did not).
func tried(samples []sample, provider string, from, to time.Time) int {
	n := 0
	for _, s := range samples {
		if s.start.Before(from) || (!to.IsZero() && !s.start.Before(to)) {
			continue
		}
		if slices.ContainsFunc(s.attempts, func(a attemptJSON) bool {
			return a.Provider == provider && a.Outcome != "circuit_open"
		}) {
			n++
		}
	}
	return n
}

// latencies are the figures of the calls of one phase.
type latencies struct {
	n                  int
	p50, p99, max, avg time.Duration
}

func (l latencies) String() string {
	return fmt.Sprintf("%d calls, p50 %v, p99 %v, max %v, mean %v", l.n,
		l.p50.Round(time.Microsecond), l.p99.Round(time.Microsecond), l.max.Round(time.Microsecond), l.avg.Round(time.Microsecond))
}

// phase returns the latencies of the calls that started at from or later and, unless to is
// zero, before to.
func phase(samples []sample, from, to time.Time) latencies {
	var xs []int64
	var sum time.Duration
	for _, s := range samples {
		if s.start.Before(from) || (!to.IsZero() && !s.start.Before(to)) {
			continue
		}
		d := s.end.Sub(s.start)
		xs = append(xs, int64(d))
		sum += d
	}
	if len(xs) == 0 {
		return latencies{}
	}
	return latencies{
		n: len(xs), p50: time.Duration(percentile(xs, 0.5)), p99: time.Duration(percentile(xs, 0.99)),
		max: time.Duration(slices.Max(xs)), avg: sum / time.Duration(len(xs)),
	}
}
