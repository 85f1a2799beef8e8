package gateway

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
)

// TestShedUnderOverload: with afloat itself overloaded (its scheduler latency past twice the
// threshold), a burst of enrichment, critical and chat calls at once: every enrichment call is
// answered at once with its heuristic (200, reason shed, the task's typed result), every chat
// call with 503 and Retry-After, and no critical call is shed: each reaches its providers and
// is answered within its budget. Once the pressure is gone nothing is shed.
func TestShedUnderOverload(t *testing.T) {
	e := newEnv(t)
	e.pressure.Store(int64(25 * time.Millisecond)) // threshold 10ms: overloaded

	type answer struct {
		kind   string
		status int
		hdr    http.Header
		body   []byte
		took   time.Duration
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	call := func(kind, path, body string) {
		wg.Go(func() {
			start := time.Now()
			status, hdr, b := e.do("POST", path, clientKey, body)
			mu.Lock()
			answers = append(answers, answer{kind, status, hdr, b, time.Since(start)})
			mu.Unlock()
		})
	}
	for i := range 60 {
		switch i % 4 {
		case 0:
			call("critical", "/v1/tasks/moderation", `{"input": {"message": "is this allowed?"}}`)
		case 1:
			call("chat", "/v1/chat/completions", `{"model": "support-agent", "messages": [{"role": "user", "content": "hi"}]}`)
		default:
			call("enrichment", "/v1/tasks/triage", `{"input": {"message": "the site is down"}}`)
		}
	}
	wg.Wait()

	var critical []time.Duration
	for _, a := range answers {
		switch a.kind {
		case "enrichment":
			var env struct {
				Result   map[string]any   `json:"result"`
				Source   afloat.Source    `json:"source"`
				Degraded bool             `json:"degraded"`
				Reason   afloat.Reason    `json:"reason"`
				Attempts []afloat.Attempt `json:"attempts"`
			}
			if err := json.Unmarshal(a.body, &env); err != nil || a.status != http.StatusOK {
				t.Fatalf("shed enrichment: %d %s", a.status, a.body)
			}
			if env.Source != afloat.SourceHeuristic || !env.Degraded || env.Reason != afloat.ReasonShed || len(env.Attempts) != 0 {
				t.Errorf("shed enrichment: %s; want the heuristic, degraded, reason shed, no attempt", a.body)
			}
			if _, ok := env.Result["urgency_score"]; !ok {
				t.Errorf("shed enrichment's result %v is not the task's typed result", env.Result)
			}
		case "chat":
			if a.status != http.StatusServiceUnavailable || a.hdr.Get("Retry-After") != "1" || a.hdr.Get("X-Afloat-Source") != "unavailable" {
				t.Errorf("shed chat call: %d, Retry-After %q, source %q; want 503 with Retry-After 1", a.status, a.hdr.Get("Retry-After"), a.hdr.Get("X-Afloat-Source"))
			}
		case "critical":
			var env struct {
				Reason   afloat.Reason    `json:"reason"`
				Attempts []afloat.Attempt `json:"attempts"`
			}
			_ = json.Unmarshal(a.body, &env)
			if env.Reason == afloat.ReasonShed || len(env.Attempts) == 0 {
				t.Errorf("critical call while overloaded: %d %s; want it never shed: its providers were asked", a.status, a.body)
			}
			critical = append(critical, a.took)
		}
	}
	slices.Sort(critical)
	if p99 := critical[len(critical)*99/100]; p99 >= 2*time.Second {
		t.Errorf("critical p99 %s; want it within the task's 2s budget", p99)
	}

	e.pressure.Store(0)
	_, _, b := e.do("POST", "/v1/tasks/triage", clientKey, `{"input": {"message": "the site is down"}}`)
	var env struct {
		Source afloat.Source `json:"source"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Source != afloat.SourceModel {
		t.Errorf("triage once the pressure is gone: %s; want a model's answer", b)
	}
	_, _, metrics := e.do("GET", "/metrics", "", "")
	if !containsLine(metrics, `afloat_shed_total{task="triage"} 30`) || !containsLine(metrics, `afloat_shed_total{task="support-agent"} 15`) ||
		!containsLine(metrics, `afloat_shed_total{task="moderation"} 0`) {
		t.Errorf("afloat_shed_total: want triage 30, support-agent 15, moderation 0 in\n%s", grepLines(metrics, "afloat_shed_total"))
	}
}

// containsLine reports whether text has line as one of its lines.
func containsLine(text []byte, line string) bool {
	return slices.Contains(strings.Split(string(text), "\n"), line)
}

// grepLines returns the lines of text that hold s.
func grepLines(text []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(text), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBusyTurnsAnswerOverloaded: with every turn at reading calls taken (afloat saturated), an
// enrichment call waits the shedding threshold and is answered 503 with Retry-After, unread
// and counted as shed, while a critical call, which takes no turn, is read and answered; once
// the turns are free the enrichment call is answered again.
func TestBusyTurnsAnswerOverloaded(t *testing.T) {
	e := newEnv(t)
	triage := e.gw.served().tasks["triage"]
	var held []func()
	for {
		leave, ok := triage.Enter(t.Context())
		if !ok {
			break // every turn is taken: this last call waited the threshold and was refused
		}
		held = append(held, leave)
		if len(held) > 1024 {
			t.Fatal("turns without end")
		}
	}
	status, hdr, body := e.do("POST", "/v1/tasks/triage", clientKey, `{"input": {"message": "the site is down"}}`)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "1" || !strings.Contains(string(body), `"code":"overloaded"`) {
		t.Errorf("enrichment call with every turn taken: %d, Retry-After %q, %s; want 503 overloaded with Retry-After 1", status, hdr.Get("Retry-After"), body)
	}
	status, _, body = e.do("POST", "/v1/tasks/moderation", clientKey, `{"input": {"message": "is this allowed?"}}`)
	if status == http.StatusServiceUnavailable || e.primary.calls.Load() == 0 {
		t.Errorf("critical call with every turn taken: %d %s; want it read and its providers asked", status, body)
	}
	_, _, metrics := e.do("GET", "/metrics", "", "")
	if !containsLine(metrics, `afloat_shed_total{task="triage"} 2`) {
		t.Errorf("afloat_shed_total: want triage 2 (the refused Enter and the call) in\n%s", grepLines(metrics, "afloat_shed_total"))
	}
	for _, leave := range held {
		leave()
	}
	if status, _, body := e.do("POST", "/v1/tasks/triage", clientKey, `{"input": {"message": "the site is down"}}`); status != http.StatusOK {
		t.Errorf("enrichment call once the turns are free: %d %s; want 200", status, body)
	}
}

// TestSlowBodyHoldsNoTurn: calls whose bodies are slow to come hold no turn (the body is read
// before it), so they cannot keep the others from running.
func TestSlowBodyHoldsNoTurn(t *testing.T) {
	e := newEnv(t)
	for range 2*runtime.GOMAXPROCS(0) + 2 {
		c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Headers and the start of a body that never ends.
		fmt.Fprintf(c, "POST /v1/tasks/triage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"input\": ", clientKey)
	}
	for range 3 {
		if status, _, body := e.do("POST", "/v1/tasks/triage", clientKey, `{"input": {"message": "the site is down"}}`); status != http.StatusOK {
			t.Fatalf("a call beside slow bodies: %d %s; want 200", status, body)
		}
	}
}
