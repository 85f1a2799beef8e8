package main

// The sixteen upstream faults of a chat route [primary, backup], each handled "as the most
// careful client would" (shared/DESIGN.md §2, §6): a live `afloat serve`, run in process by
// run() on a loopback port, in front of two fault servers (internal/faultserver) that speak
// OpenAI's wire format and script each request's fault. Each test asserts what the caller got
// (status, body, model, headers, the stream's coherence) and what each upstream saw (how many
// attempts, how far apart, what a continuation carried). Waits are scaled down through the
// config, keeping each scenario's shape; the upstreams' own waits end when afloat hangs up.
// Every test here runs in parallel with the others, after the package's sequential tests.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/config"
	fs "github.com/afloat-dev/afloat/internal/faultserver"
)

// faultRoute is the route of the scenarios: cascade [primary, backup].
const faultRoute = "chat"

// The upstream models: an answer's "model" field names one of them, never the route.
const (
	primaryModel = "primary-model-7b"
	backupModel  = "backup-model-70b"
)

// afloatExtension is afloat's own field on a chat chunk; on a stream continued on another
// tier, its "continued_by" names the provider that took over ({"afloat": {"continued_by":
// "backup"}} on every chunk after the switch). chunkProvider is the one place that reads it.
const (
	afloatExtension = "afloat"
	continuedByKey  = "continued_by"
)

// chunkProvider returns the provider a chunk's afloat extension names as the one that
// continued the stream, or "".
func chunkProvider(chunk map[string]any) string {
	ext, _ := chunk[afloatExtension].(map[string]any)
	p, _ := ext[continuedByKey].(string)
	return p
}

// The answers: sixty tokens each; a continuation of the primary's first forty.
var (
	primaryTokens = fs.Tokens("p", 1, 60)
	backupTokens  = fs.Tokens("b", 1, 60)
	contTokens    = fs.Tokens("c", 41, 60)
	primaryText   = fs.Text(primaryTokens)
	backupText    = fs.Text(backupTokens)
	// continued is the one coherent answer of a stream cut after 40 tokens and continued on
	// the backup.
	continued = fs.Text(primaryTokens[:40]) + fs.Text(contTokens)
)

// continuing answers a continuation (an assistant prefill) with the rest of the answer, and
// any other request with the backup's own answer.
func continuing(r *fs.Request) fs.Fault {
	if r.Continues() {
		return fs.Fault{Tokens: contTokens}
	}
	return fs.Fault{}
}

// faultSetup is a scenario's config beyond the route [primary, backup].
type faultSetup struct {
	// defaults are lines under defaults: beside "breaker: {recovery: 5m}", indented two
	// spaces.
	defaults string
	// primary and backup are extra keys of each provider's YAML flow mapping
	// (", timeouts: {initial: 300ms}").
	primary, backup string
	// route are extra lines of the route's block, indented four spaces.
	route string
	// budget is the route's; "" means 10s.
	budget string
	// needs names the config keys of the scenario that an older build may not know yet,
	// for the message when the config does not load.
	needs string
}

func (c faultSetup) yaml(primary, backup *fs.Server) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  admin_token: %s\n", scenarioAdmin)
	b.WriteString("defaults:\n  breaker: {recovery: 5m}\n" + c.defaults)
	b.WriteString("providers:\n")
	fmt.Fprintf(&b, "  primary: {type: openai, base_url: %q, model: %s%s}\n", primary.URL+"/v1", primaryModel, c.primary)
	fmt.Fprintf(&b, "  backup: {type: openai, base_url: %q, model: %s%s}\n", backup.URL+"/v1", backupModel, c.backup)
	budget := c.budget
	if budget == "" {
		budget = "10s"
	}
	fmt.Fprintf(&b, "routes:\n  %s:\n    criticality: assistance\n    budget: %s\n    cascade: [primary, backup]\n%s", faultRoute, budget, c.route)
	return b.String()
}

// faultServers starts the two upstreams: the primary answers by script (nil: healthily),
// the backup by backup (nil: healthily).
func faultServers(t *testing.T, primary, backup fs.Script) (*fs.Server, *fs.Server) {
	t.Helper()
	p := fs.New(t, fs.Config{Model: primaryModel, Tokens: primaryTokens, Script: primary})
	b := fs.New(t, fs.Config{Model: backupModel, Tokens: backupTokens, Script: backup})
	return p, b
}

// startFaultServe checks that the scenario's config loads (naming the keys it needs when it
// does not), then starts `afloat serve` on it.
func startFaultServe(t *testing.T, c faultSetup, primary, backup *fs.Server) *liveServe {
	t.Helper()
	yaml := c.yaml(primary, backup)
	if _, err := config.Load(writeConfig(t, yaml, nil)); err != nil {
		needs := c.needs
		if needs == "" {
			needs = "none beyond today's"
		}
		t.Fatalf("the scenario's config does not load (keys it needs: %s):\n%v\nconfig:\n%s", needs, err, yaml)
	}
	return startServe(t, yaml)
}

// ---- the caller's side ----

// usageWire is an answer's usage.
type usageWire struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// errorWire is an OpenAI-style error: a body's, or a stream's error event.
type errorWire struct {
	Type    string `json:"type"`
	Code    any    `json:"code"`
	Message string `json:"message"`
}

func (e *errorWire) code() string {
	if e == nil || e.Code == nil {
		return ""
	}
	return fmt.Sprint(e.Code)
}

// chunkSeen is one chunk of a stream as the caller saw it.
type chunkSeen struct {
	text, model, continuedBy string
}

// chatResult is what a caller of /v1/chat/completions got.
type chatResult struct {
	stream  bool
	status  int
	header  http.Header
	elapsed time.Duration
	body    []byte
	readErr error

	model  string // non-streamed: the completion's model; streamed: the first chunk's
	text   string
	finish string
	usage  *usageWire
	err    *errorWire // the error body, or the stream's error event

	chunks    int      // streamed: the chunks decoded (error events and [DONE] not counted)
	models    []string // streamed: each chunk's model
	providers []string // streamed: the provider each chunk's afloat extension names, where one does
	bad       []string // streamed: data payloads that are not JSON
	log       []chunkSeen
	done      bool // streamed: [DONE] came
	afterEnd  bool // streamed: data came after [DONE] or after the error event
}

// String is the result in one line, for failure messages.
func (r chatResult) String() string {
	s := fmt.Sprintf("status=%d provider=%q source=%q degraded=%q elapsed=%v model=%q finish=%q usage=%+v",
		r.status, r.header.Get("X-Afloat-Provider"), r.header.Get("X-Afloat-Source"), r.header.Get("X-Afloat-Degraded"),
		r.elapsed.Round(time.Millisecond), r.model, r.finish, r.usage)
	if r.stream {
		s += fmt.Sprintf(" chunks=%d done=%v providers=%v", r.chunks, r.done, compact(r.providers))
		if len(r.bad) > 0 {
			s += fmt.Sprintf(" malformed=%q", r.bad)
		}
	}
	if r.err != nil {
		s += fmt.Sprintf(" error={type %q code %q: %q}", r.err.Type, r.err.code(), r.err.Message)
	}
	if r.readErr != nil {
		s += fmt.Sprintf(" read error: %v", r.readErr)
	}
	return s + fmt.Sprintf(" text=%q", r.text)
}

// compact drops repeats in a row: [a a a b b] → [a b].
func compact(xs []string) []string { return slices.Compact(slices.Clone(xs)) }

// chatBody is the caller's request: one user message, usage asked for when streamed.
func chatBody(stream bool) string {
	body := map[string]any{"model": faultRoute, "messages": []any{
		map[string]any{"role": "user", "content": "Tell me the story of the sixty tokens."},
	}}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	b, _ := json.Marshal(body)
	return string(b)
}

// chat makes one call to the route and reads all of its answer.
func (g *liveServe) chat(stream bool) chatResult {
	g.t.Helper()
	req, err := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(chatBody(stream)))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		g.t.Fatalf("POST /v1/chat/completions (stream %v): %v; stderr:\n%s", stream, err, g.logs.String())
	}
	defer resp.Body.Close()
	r := chatResult{stream: stream, status: resp.StatusCode, header: resp.Header}
	r.body, r.readErr = io.ReadAll(resp.Body)
	r.elapsed = time.Since(began)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r.readStream()
	} else {
		r.readCompletion()
	}
	return r
}

func (r *chatResult) readCompletion() {
	var c struct {
		Model   string     `json:"model"`
		Usage   *usageWire `json:"usage"`
		Error   *errorWire `json:"error"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.body, &c); err != nil {
		r.err = &errorWire{Type: "(not JSON)", Message: string(r.body)}
		return
	}
	r.model, r.usage, r.err = c.Model, c.Usage, c.Error
	if len(c.Choices) > 0 {
		r.text, r.finish = c.Choices[0].Message.Content, c.Choices[0].FinishReason
	}
}

func (r *chatResult) readStream() {
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	ended := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if ended {
			r.afterEnd = true
		}
		if data == "[DONE]" {
			r.done, ended = true, true
			continue
		}
		var c map[string]any
		if json.Unmarshal([]byte(data), &c) != nil {
			r.bad = append(r.bad, data)
			continue
		}
		if raw, ok := c["error"]; ok {
			b, _ := json.Marshal(raw)
			r.err = &errorWire{}
			_ = json.Unmarshal(b, r.err)
			ended = true
			continue
		}
		var ch struct {
			Model   string     `json:"model"`
			Usage   *usageWire `json:"usage"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		_ = json.Unmarshal([]byte(data), &ch)
		r.chunks++
		r.models = append(r.models, ch.Model)
		if r.model == "" {
			r.model = ch.Model
		}
		if p := chunkProvider(c); p != "" {
			r.providers = append(r.providers, p)
		}
		if ch.Usage != nil {
			r.usage = ch.Usage
		}
		seen := chunkSeen{model: ch.Model, continuedBy: chunkProvider(c)}
		for _, choice := range ch.Choices {
			r.text += choice.Delta.Content
			seen.text += choice.Delta.Content
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				r.finish = *choice.FinishReason
			}
		}
		r.log = append(r.log, seen)
	}
}

// ---- assertions ----

// wantAnswer checks that the caller got provider's whole answer, text, as a success: a 200
// whose X-Afloat-Provider names provider, finish reason stop, and for a stream every chunk
// well-formed, no error event and [DONE] at the end.
func wantAnswer(t *testing.T, r chatResult, provider, text string) {
	t.Helper()
	switch {
	case r.status != http.StatusOK:
		t.Fatalf("the caller got %d, want 200 with %s's answer: %v", r.status, provider, r)
	case r.err != nil:
		t.Fatalf("the caller got an error, want %s's whole answer: %v", provider, r)
	case r.text != text:
		t.Fatalf("the caller got the text %q, want %s's whole answer %q: %v", r.text, provider, text, r)
	case r.finish != "stop":
		t.Errorf("finish reason %q, want stop: %v", r.finish, r)
	}
	if got := r.header.Get("X-Afloat-Provider"); got != provider {
		t.Errorf("X-Afloat-Provider %q, want %q: %v", got, provider, r)
	}
	if r.stream {
		if !r.done || r.afterEnd || len(r.bad) > 0 || r.readErr != nil {
			t.Errorf("the stream is not one clean answer (want every chunk JSON, [DONE] last, nothing after it): %v", r)
		}
	}
}

// wantStreamError checks that a stream that could not be finished told the caller so: the
// text it had received (prefix), then afloat's error event, and no [DONE] and no finish
// reason stop that would make a cut answer look whole.
func wantStreamError(t *testing.T, r chatResult, prefix string) {
	t.Helper()
	if r.status != http.StatusOK || !r.stream {
		t.Fatalf("the caller got %d (streamed %v), want a 200 stream that ends with afloat's error event: %v", r.status, r.stream, r)
	}
	if r.err == nil || r.err.Type != "afloat_stream_error" {
		t.Errorf(`the stream did not end with the error event {"error": {"type": "afloat_stream_error", …}}: %v`, r)
	}
	if r.done || r.finish == "stop" {
		t.Errorf("a cut answer was finished as a success ([DONE] %v, finish reason %q), want the error event alone: %v", r.done, r.finish, r)
	}
	if r.text != prefix {
		t.Errorf("the caller got the text %q, want exactly what had been streamed before the failure, %q", r.text, prefix)
	}
}

// wantChats checks that s received n chat completions requests and returns them.
func wantChats(t *testing.T, s *fs.Server, n int, why string) fs.Log {
	t.Helper()
	calls := s.Settle(t, 10*time.Second).Chat()
	if len(calls) != n {
		t.Errorf("%s received %d chat requests, want %d (%s):%v", s.Model(), len(calls), n, why, calls)
	}
	return calls
}

// breakerOf returns the provider's breaker state in /admin/status.
func (g *liveServe) breakerOf(provider string) string {
	g.t.Helper()
	return g.status()[provider].Breaker
}

// modeName names a subtest by whether it streams.
func modeName(stream bool) string {
	if stream {
		return "stream"
	}
	return "non-stream"
}

// bothModes runs f as two parallel subtests, without and with streaming.
func bothModes(t *testing.T, f func(t *testing.T, stream bool)) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			t.Parallel()
			f(t, stream)
		})
	}
}

// ---- the sixteen faults ----

// TestFault01RetryAfterOnce: one 429 with Retry-After: 2 is waited out (the default
// retry.max_wait covers 1–2 s) and the same provider retried, streams too (before their
// first byte); a Retry-After beyond max_wait is not waited: the backup answers at once.
func TestFault01RetryAfterOnce(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		p, b := faultServers(t, fs.Sequence(fs.Fault{Mode: fs.Status, Status: 429, RetryAfter: "2"}, fs.Fault{}), nil)
		g := startFaultServe(t, faultSetup{}, p, b)
		r := g.chat(stream)
		wantAnswer(t, r, "primary", primaryText)
		calls := wantChats(t, p, 2, "the 429, then one retry once its Retry-After: 2 had passed")
		if len(calls) == 2 {
			gap := calls[1].At.Sub(calls[0].At)
			t.Logf("retry %v after the 429; the call took %v", gap.Round(time.Millisecond), r.elapsed.Round(time.Millisecond))
			if gap < 1900*time.Millisecond || gap > 3500*time.Millisecond {
				t.Errorf("the retry came %v after the 429, want ≥ 1.9s and about 2s (Retry-After: 2 waited out)", gap)
			}
		}
		wantChats(t, b, 0, "the primary's retry answered")
	})
	t.Run("beyond max_wait", func(t *testing.T) {
		t.Parallel()
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Status, Status: 429, RetryAfter: "3"}), nil)
		g := startFaultServe(t, faultSetup{primary: ", retry: {max_wait: 1s}", needs: "providers.primary.retry.max_wait"}, p, b)
		r := g.chat(false)
		wantAnswer(t, r, "backup", backupText)
		if r.elapsed > 1500*time.Millisecond {
			t.Errorf("the call took %v, want the backup at once: a Retry-After of 3s over max_wait 1s is not waited", r.elapsed)
		}
		wantChats(t, p, 1, "a Retry-After over max_wait is not retried")
	})
}

// TestFault02RateLimitedWithoutRetryAfter: a primary that keeps answering 429 without
// Retry-After is not hammered: at most one retry per call, after a jittered back-off, within
// the retry budget, until its breaker stops the calls; the backup answers every call.
func TestFault02RateLimitedWithoutRetryAfter(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		const calls = 6
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Status, Status: 429}), nil)
		g := startFaultServe(t, faultSetup{}, p, b)
		var gaps []time.Duration
		retries := 0
		for i := range calls {
			before := len(p.Log().Chat())
			r := g.chat(stream)
			wantAnswer(t, r, "backup", backupText)
			got := p.Settle(t, 5*time.Second).Chat()[before:]
			switch {
			case len(got) > 2:
				t.Errorf("call %d: the primary saw %d requests, want ≤ 2 (one retry at most):%v", i, len(got), got)
			case len(got) == 2:
				retries++
				gap := got[1].At.Sub(got[0].At)
				gaps = append(gaps, gap)
				if gap < 20*time.Millisecond {
					t.Errorf("call %d: the retry came %v after the 429, want a back-off (≥ 20ms), never at once", i, gap)
				}
			}
		}
		total := len(p.Log().Chat())
		t.Logf("primary requests %d over %d calls, %d retries, back-offs %v", total, calls, retries, gaps)
		if retries > 3 {
			t.Errorf("%d retries in %d calls, want ≤ 3 (the retry budget: ratio 0.2, floor 3)", retries, calls)
		}
		if total > 8 {
			t.Errorf("the primary saw %d requests in %d calls, want ≤ 8: its breaker (5 failures in a row) must stop a provider that keeps throttling", total, calls)
		}
		if len(gaps) >= 3 && slices.Max(gaps)-slices.Min(gaps) < time.Millisecond {
			t.Errorf("back-offs %v all within 1ms of each other, want jitter", gaps)
		}
	})
}

// TestFault03ServerErrorOnce: one 500 is transient (like 502 and 503): the same provider is
// retried once, which the retry budget's floor allows on a quiet gateway.
func TestFault03ServerErrorOnce(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		p, b := faultServers(t, fs.Sequence(fs.Fault{Mode: fs.Status, Status: 500}, fs.Fault{}), nil)
		g := startFaultServe(t, faultSetup{}, p, b)
		wantAnswer(t, g.chat(stream), "primary", primaryText)
		wantChats(t, p, 2, "the 500, then one retry")
		wantChats(t, b, 0, "the primary's retry answered")
	})
}

// TestFault04UnavailablePersistent: a primary that keeps answering 503 is failed over at
// once, every call answered by the backup, its retries within the retry budget; its breaker
// then stops the calls.
func TestFault04UnavailablePersistent(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		const calls = 10
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Status, Status: 503}), nil)
		g := startFaultServe(t, faultSetup{}, p, b)
		retries := 0
		for i := range calls {
			before := len(p.Log().Chat())
			r := g.chat(stream)
			wantAnswer(t, r, "backup", backupText)
			if r.elapsed > time.Second {
				t.Errorf("call %d took %v, want the backup at once", i, r.elapsed)
			}
			got := p.Settle(t, 5*time.Second).Chat()[before:]
			if i == 0 && len(got) == 0 {
				t.Errorf("call 0 never tried the primary: the scenario did not happen")
			}
			if len(got) > 2 {
				t.Errorf("call %d: the primary saw %d requests, want ≤ 2:%v", i, len(got), got)
			}
			retries += max(len(got)-1, 0)
		}
		t.Logf("primary requests %d over %d calls, %d retries; breaker %s", len(p.Log().Chat()), calls, retries, g.breakerOf("primary"))
		if retries > 3 {
			t.Errorf("%d retries in %d calls, want ≤ 3 (the retry budget: ratio 0.2, floor 3)", retries, calls)
		}
		if st := g.breakerOf("primary"); st != "open" {
			t.Errorf("the primary's breaker is %q after %d calls of 503, want open", st, calls)
		}
	})
}

// TestFault05ResetBeforeHeaders: a connection reset before the headers, once, is retried on
// the same provider or failed over; the caller gets a whole answer either way.
func TestFault05ResetBeforeHeaders(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		p, b := faultServers(t, fs.Sequence(fs.Fault{Mode: fs.Reset}, fs.Fault{}), nil)
		g := startFaultServe(t, faultSetup{}, p, b)
		r := g.chat(stream)
		pc := p.Settle(t, 5*time.Second).Chat()
		bc := b.Settle(t, 5*time.Second).Chat()
		t.Logf("%v; primary:%v; backup:%v", r, pc, bc)
		switch r.header.Get("X-Afloat-Provider") {
		case "primary":
			wantAnswer(t, r, "primary", primaryText)
			if len(pc) != 2 || len(bc) != 0 {
				t.Errorf("answered by the primary with %d primary and %d backup requests, want 2 (the reset, the retry) and 0", len(pc), len(bc))
			}
		default:
			wantAnswer(t, r, "backup", backupText)
			if len(pc) != 1 || len(bc) != 1 {
				t.Errorf("answered by the backup with %d primary and %d backup requests, want 1 and 1", len(pc), len(bc))
			}
		}
		if r.elapsed > 2*time.Second {
			t.Errorf("the call took %v, want well under 2s", r.elapsed)
		}
	})
}

// TestFault06NoResponse: a primary that never answers (no headers, the connection held) is
// cut at its read timeout (300ms here, before any latency is measured) — far before it
// would give up itself (30s) — and the backup answers.
func TestFault06NoResponse(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Hang}), nil)
		g := startFaultServe(t, faultSetup{primary: ", timeouts: {initial: 300ms}"}, p, b)
		r := g.chat(stream)
		wantAnswer(t, r, "backup", backupText)
		if r.elapsed > 2*time.Second {
			t.Errorf("the call took %v, want about the read timeout (300ms) and under 2s", r.elapsed)
		}
		calls := p.Settle(t, 10*time.Second).Chat()
		if len(calls) == 0 || len(calls) > 2 {
			t.Errorf("the primary saw %d requests, want 1 (a timeout is not retried) or at most 2:%v", len(calls), calls)
		}
		for _, c := range calls {
			if held := c.Ended.Sub(c.At); !c.ClientLeft || held > 1500*time.Millisecond {
				t.Errorf("the primary's request %d: afloat hung up %v (after %v), want it cut at about 300ms, far before the 30s the upstream holds", c.N, c.ClientLeft, held)
			}
		}
	})
}

// TestFault07SlowFirstToken: a stream whose first token comes late (5s here, for 20s) is cut
// at timeouts.first_token (300ms here) and restarted on the backup, which the caller has
// not heard from yet; a stream whose first token is prompt is allowed gaps up to
// timeouts.stream_idle (2s), longer than the first token's limit.
func TestFault07SlowFirstToken(t *testing.T) {
	t.Parallel()
	const timeouts = ", timeouts: {first_token: {initial: 300ms, max: 300ms}, stream_idle: 2s}"
	const needs = "providers.primary.timeouts.first_token {initial, max} and timeouts.stream_idle"
	t.Run("slow first token", func(t *testing.T) {
		t.Parallel()
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.SlowFirstToken, Delay: 5 * time.Second}), nil)
		g := startFaultServe(t, faultSetup{primary: timeouts, needs: needs}, p, b)
		r := g.chat(true)
		wantAnswer(t, r, "backup", backupText)
		if r.elapsed > 1500*time.Millisecond {
			t.Errorf("the call took %v, want about first_token (300ms): the first token's limit is not the read timeout (2s)", r.elapsed)
		}
		for _, c := range p.Settle(t, 10*time.Second).Chat() {
			if held := c.Ended.Sub(c.At); !c.ClientLeft || held > 1200*time.Millisecond {
				t.Errorf("the primary's request %d: afloat hung up %v after %v, want it cut at about 300ms", c.N, c.ClientLeft, held)
			}
		}
		for _, c := range wantChats(t, b, 1, "the restart") {
			if c.Continues() {
				t.Errorf("the backup was asked to continue %q, want a fresh request: the caller had received nothing", c.Prefill())
			}
		}
	})
	t.Run("gaps within stream_idle", func(t *testing.T) {
		t.Parallel()
		toks := fs.Tokens("p", 1, 4)
		p, b := faultServers(t, fs.Always(fs.Fault{Tokens: toks, Gap: 600 * time.Millisecond}), nil)
		g := startFaultServe(t, faultSetup{primary: timeouts, needs: needs}, p, b)
		r := g.chat(true)
		wantAnswer(t, r, "primary", fs.Text(toks))
		wantChats(t, p, 1, "one stream, never cut")
		wantChats(t, b, 0, "gaps of 600ms are within stream_idle 2s, though longer than first_token 300ms")
	})
}

// rescueSetup is the backup of the rescue scenarios: vLLM, which continues an assistant
// prefill.
const rescueBackup = ", dialect: vllm, continuation: prefill"

// wantContinued checks a stream cut after the primary's 40 tokens and continued on the
// backup: one coherent answer, the backup named on the chunks it produced, and the backup
// asked to continue the primary's text.
func wantContinued(t *testing.T, r chatResult, b *fs.Server) {
	t.Helper()
	if r.status != http.StatusOK || r.err != nil || !r.done || r.text != continued || r.finish != "stop" {
		t.Errorf("the caller did not get one coherent answer: want the primary's 40 tokens then the backup's continuation, %q, finish stop, [DONE]; got %v", continued, r)
	}
	if len(r.bad) > 0 || r.afterEnd {
		t.Errorf("the stream holds malformed data or data after its end: %v", r)
	}
	if !slices.Contains(r.providers, "backup") {
		t.Errorf(`no chunk says the backup continued: want {%q: {%q: "backup"}} on the continued chunks; the chunks named %v`, afloatExtension, continuedByKey, compact(r.providers))
	}
	for i, c := range r.log {
		fromBackup := slices.Contains(contTokens, c.text)
		fromPrimary := slices.Contains(primaryTokens[:40], c.text)
		switch {
		case fromBackup && (c.continuedBy != "backup" || c.model != backupModel):
			t.Errorf("chunk %d (%q, the backup's continuation) names model %q, continued by %q; want %q, continued by backup", i, c.text, c.model, c.continuedBy, backupModel)
		case fromPrimary && (c.continuedBy != "" || c.model != primaryModel):
			t.Errorf("chunk %d (%q, the primary's) names model %q, continued by %q; want %q, not continued", i, c.text, c.model, c.continuedBy, primaryModel)
		}
	}
	calls := wantChats(t, b, 1, "one continuation")
	if len(calls) != 1 {
		return
	}
	c := calls[0]
	if !c.Continues() || c.Prefill() != fs.Text(primaryTokens[:40]) {
		t.Errorf("the backup's request ends with %+v, want an assistant message holding the primary's 40 tokens %q", c.Last(), fs.Text(primaryTokens[:40]))
	}
	if !c.ContinueFinalMessage || (c.AddGenerationPrompt != nil && *c.AddGenerationPrompt) {
		t.Errorf("the backup's request: continue_final_message %v, add_generation_prompt %v; want true and false (or absent): vLLM continues a final assistant message only when asked",
			c.ContinueFinalMessage, c.AddGenerationPrompt)
	}
	if !slices.ContainsFunc(c.Messages, func(m fs.Message) bool { return m.Role == "user" }) {
		t.Errorf("the backup's request lost the caller's user message: %+v", c.Messages)
	}
}

// TestFault08StreamCut: a stream cut after 40 of 60 tokens is continued on the backup from
// the partial text (an assistant prefill, continuation: prefill); cut before its first
// token, it is restarted there cleanly.
func TestFault08StreamCut(t *testing.T) {
	t.Parallel()
	t.Run("after 40 of 60", func(t *testing.T) {
		t.Parallel()
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Cut, After: 40}), continuing)
		g := startFaultServe(t, faultSetup{backup: rescueBackup, needs: "providers.backup.continuation"}, p, b)
		r := g.chat(true)
		wantContinued(t, r, b)
		wantChats(t, p, 1, "a stream that reached the caller is not retried on the same provider")
	})
	t.Run("before the first token", func(t *testing.T) {
		t.Parallel()
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Cut, After: 0}), continuing)
		g := startFaultServe(t, faultSetup{backup: rescueBackup, needs: "providers.backup.continuation"}, p, b)
		r := g.chat(true)
		wantAnswer(t, r, "backup", backupText)
		for _, c := range wantChats(t, b, 1, "the restart") {
			if c.Continues() {
				t.Errorf("the backup was asked to continue %q, want a fresh request: the caller had received nothing", c.Prefill())
			}
		}
		if n := len(p.Settle(t, 5*time.Second).Chat()); n > 2 {
			t.Errorf("the primary saw %d requests, want ≤ 2", n)
		}
	})
}

// TestFault09StreamStall: a stream that stalls after 40 of 60 tokens with the connection open
// (30s, here held up to 30s but cut at stream_idle 300ms) is continued on the backup.
func TestFault09StreamStall(t *testing.T) {
	t.Parallel()
	p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Stall, After: 40}), continuing)
	g := startFaultServe(t, faultSetup{primary: ", timeouts: {stream_idle: 300ms}", backup: rescueBackup,
		needs: "providers.primary.timeouts.stream_idle, providers.backup.continuation"}, p, b)
	r := g.chat(true)
	wantContinued(t, r, b)
	if r.elapsed > 3*time.Second {
		t.Errorf("the call took %v, want the stall cut at stream_idle (300ms) and the whole answer in well under 3s", r.elapsed)
	}
	for _, c := range wantChats(t, p, 1, "one stalled stream") {
		if stall := c.Ended.Sub(c.LastWrite); !c.ClientLeft || stall > 1500*time.Millisecond {
			t.Errorf("the primary's stalled stream: afloat hung up %v, %v after its last chunk; want it cut at about stream_idle (300ms)", c.ClientLeft, stall)
		}
	}
}

// TestFault10MalformedChunk: a chunk that is not JSON mid-stream is skipped and counted in
// afloat_stream_events_skipped_total; the stream goes on, and its end marker says the
// answer is whole.
func TestFault10MalformedChunk(t *testing.T) {
	t.Parallel()
	p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.Malformed, After: 30}), nil)
	g := startFaultServe(t, faultSetup{}, p, b)
	r := g.chat(true)
	wantAnswer(t, r, "primary", primaryText)
	wantChats(t, p, 1, "one stream, read to its end")
	wantChats(t, b, 0, "the primary's answer was whole")
	if n := g.metric("afloat_stream_events_skipped_total", map[string]string{"provider": "primary", "task": faultRoute}); n != 1 {
		t.Errorf("afloat_stream_events_skipped_total{provider=primary, task=%s} = %v, want 1", faultRoute, n)
	}
}

// TestFault11NoDone: a stream that ends without [DONE], after its finish reason and usage, is
// finalised promptly with the usage reported: when the body ends, and when the upstream holds
// the connection open after its last chunk (no wait for stream_idle).
func TestFault11NoDone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		hold   time.Duration
		within time.Duration
	}{
		{"body ends", 0, time.Second},
		{"held open", 10 * time.Second, 1500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.NoDone, Hold: c.hold, PromptTokens: 31}), nil)
			g := startFaultServe(t, faultSetup{primary: ", timeouts: {stream_idle: 3s}", needs: "providers.primary.timeouts.stream_idle"}, p, b)
			r := g.chat(true)
			wantAnswer(t, r, "primary", primaryText)
			if r.elapsed > c.within {
				t.Errorf("the call took %v, want it finalised within %v of the last chunk, without waiting for stream_idle (3s)", r.elapsed, c.within)
			}
			if want := (usageWire{31, 60, 91}); r.usage == nil || *r.usage != want {
				t.Errorf("usage %+v, want the primary's %+v", r.usage, want)
			}
			wantChats(t, b, 0, "the primary's answer was whole")
		})
	}
}

// TestFault12ContextLength: a 400 context_length_exceeded is not retried on the same model,
// does not move its breaker, and the next tier takes the call.
func TestFault12ContextLength(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		p, b := faultServers(t, fs.Always(fs.Fault{Mode: fs.ContextLength}), nil)
		g := startFaultServe(t, faultSetup{}, p, b)
		wantAnswer(t, g.chat(stream), "backup", backupText)
		wantChats(t, p, 1, "a context too long is never retried on the same model")
		wantChats(t, b, 1, "the next tier takes it")
		if st := g.breakerOf("primary"); st != "closed" {
			t.Errorf("the primary's breaker is %q, want closed: a 400 says nothing of its health", st)
		}
	})
}

// policyReason is the provider's reason in its content-policy refusal.
const policyReason = "Rejected by the safety system: category violence (fs-policy-7731)."

// TestFault13ContentPolicy: a 400 content_policy_violation is never retried, and the refusal
// reaches the caller with the provider's reason (outcome refused), without asking the
// backup; with the route's on_refusal: next_tier the backup is asked instead.
func TestFault13ContentPolicy(t *testing.T) {
	t.Parallel()
	refusing := fs.Always(fs.Fault{Mode: fs.ContentPolicy, Message: policyReason})
	t.Run("refused", func(t *testing.T) {
		bothModes(t, func(t *testing.T, stream bool) {
			p, b := faultServers(t, refusing, nil)
			g := startFaultServe(t, faultSetup{}, p, b)
			r := g.chat(stream)
			t.Logf("%v", r)
			if r.status != http.StatusBadRequest || r.err == nil || r.err.code() != "content_policy_violation" ||
				!strings.Contains(r.err.Message, policyReason) {
				t.Errorf(`the caller got %v; want 400 {"error": {"code": "content_policy_violation", "message": …%q…}}: the refusal with the provider's reason`, r, policyReason)
			}
			wantChats(t, p, 1, "a refusal is never retried")
			wantChats(t, b, 0, "on_refusal is off by default on a chat route")
			if n := g.metric("afloat_attempts_total", map[string]string{"task": faultRoute, "provider": "primary", "outcome": "refused"}); n != 1 {
				t.Errorf("afloat_attempts_total{task=%s, provider=primary, outcome=refused} = %v, want 1", faultRoute, n)
			}
			if st := g.breakerOf("primary"); st != "closed" {
				t.Errorf("the primary's breaker is %q, want closed: a refusal says nothing of its health", st)
			}
		})
	})
	t.Run("on_refusal next_tier", func(t *testing.T) {
		bothModes(t, func(t *testing.T, stream bool) {
			p, b := faultServers(t, refusing, nil)
			g := startFaultServe(t, faultSetup{route: "    on_refusal: next_tier\n", needs: "routes.chat.on_refusal"}, p, b)
			wantAnswer(t, g.chat(stream), "backup", backupText)
			wantChats(t, p, 1, "a refusal is never retried")
			wantChats(t, b, 1, "on_refusal: next_tier asks the backup")
		})
	})
}

// TestFault14CutWithoutContinuation: a stream cut after 40 tokens is continued only on a tier
// that declares continuation; otherwise, and when the backup rejects the prefill after all,
// the caller gets the 40 tokens and afloat's clear error event — never the backup's "prefill
// not supported" 400 in place of the real failure.
func TestFault14CutWithoutContinuation(t *testing.T) {
	t.Parallel()
	prefix := fs.Text(primaryTokens[:40])
	t.Run("not declared", func(t *testing.T) {
		t.Parallel()
		p := fs.New(t, fs.Config{Model: primaryModel, Tokens: primaryTokens, Script: fs.Always(fs.Fault{Mode: fs.Cut, After: 40})})
		b := fs.New(t, fs.Config{Model: backupModel, Tokens: backupTokens, RejectPrefill: true})
		g := startFaultServe(t, faultSetup{}, p, b)
		r := g.chat(true)
		wantStreamError(t, r, prefix)
		// The caller holds 40 tokens: a fresh answer from the backup cannot follow them.
		wantChats(t, b, 0, "the backup declares no continuation, and a restart cannot follow what the caller already has")
	})
	t.Run("declared, rejected", func(t *testing.T) {
		t.Parallel()
		p := fs.New(t, fs.Config{Model: primaryModel, Tokens: primaryTokens, Script: fs.Always(fs.Fault{Mode: fs.Cut, After: 40})})
		b := fs.New(t, fs.Config{Model: backupModel, Tokens: backupTokens, RejectPrefill: true})
		g := startFaultServe(t, faultSetup{backup: rescueBackup, needs: "providers.backup.continuation"}, p, b)
		r := g.chat(true)
		wantStreamError(t, r, prefix)
		if calls := b.Settle(t, 5*time.Second).Continuations(); len(calls) != 1 {
			t.Errorf("the backup received %d continuations, want 1: it declares continuation: prefill, so afloat tries it:%v", len(calls), calls)
		}
		if r.err != nil {
			msg := strings.ToLower(r.err.Message + " " + r.err.code())
			for _, masked := range []string{"prefill", "continue_final_message", "not supported"} {
				if strings.Contains(msg, masked) {
					t.Errorf("the error event %+v speaks of the backup's rejection (%q), want the real failure: the primary's stream was cut", *r.err, masked)
				}
			}
		}
		if st := g.breakerOf("backup"); st != "closed" {
			t.Errorf("the backup's breaker is %q, want closed: its 400 says nothing of its health", st)
		}
	})
}

// TestFault15OutageAndRecovery: the primary is down (503, its models list too) for 1s —
// for 60s — then healthy; twenty calls over 3s — for two minutes — alternating streamed and
// not. The backup answers while the primary is down; the primary's breaker (first recovery
// 200ms, growing ×1.5 with jitter) is probed in the background through GET /models, so no
// call is spent on the dead primary once it opened, and the primary takes the calls again
// soon after it recovers.
func TestFault15OutageAndRecovery(t *testing.T) {
	t.Parallel()
	const (
		calls    = 20
		every    = 150 * time.Millisecond
		down     = time.Second
		backSoon = 1200 * time.Millisecond
	)
	var upAt atomic.Int64 // unix nanos when the primary recovers; 0 until the calls begin
	isDown := func() bool { at := upAt.Load(); return at == 0 || time.Now().UnixNano() < at }
	script := func(*fs.Request) fs.Fault {
		if isDown() {
			return fs.Fault{Mode: fs.Status, Status: 503}
		}
		return fs.Fault{}
	}
	p := fs.New(t, fs.Config{Model: primaryModel, Tokens: primaryTokens, Script: script, Models: script})
	b := fs.New(t, fs.Config{Model: backupModel, Tokens: backupTokens})
	// ramp_up 0s: the primary takes every call back as soon as its breaker closes (the ramp,
	// 30s by default, has its own tests in breaker and cascade).
	g := startFaultServe(t, faultSetup{primary: ", breaker: {recovery: 200ms, max_recovery: 2s, ramp_up: 0s}, probe: models", needs: "providers.primary.probe"}, p, b)

	type sent struct {
		at       time.Time
		provider string
	}
	var out []sent
	start := time.Now()
	upAt.Store(start.Add(down).UnixNano())
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := range calls {
		if i > 0 {
			<-tick.C
		}
		at := time.Now()
		r := g.chat(i%2 == 1)
		provider := r.header.Get("X-Afloat-Provider")
		text := primaryText
		if provider != "primary" {
			text = backupText
		}
		if r.status != http.StatusOK || r.err != nil || r.text != text {
			t.Errorf("call %d at %v: %v, want a whole answer", i, at.Sub(start).Round(time.Millisecond), r)
		}
		out = append(out, sent{at, provider})
	}
	recovered := start.Add(down)
	var line []string
	for i, s := range out {
		line = append(line, fmt.Sprintf("%d@%v:%s", i, s.at.Sub(start).Round(10*time.Millisecond), s.provider))
		switch {
		case s.at.Before(recovered) && s.provider != "backup":
			t.Errorf("call %d, sent while the primary was down, was answered by %q, want the backup", i, s.provider)
		case !s.at.Before(recovered.Add(backSoon)) && s.provider != "primary":
			t.Errorf("call %d, sent %v after the primary recovered, was answered by %q, want the primary again within %v",
				i, s.at.Sub(recovered).Round(time.Millisecond), s.provider, backSoon)
		}
	}
	t.Logf("calls: %s", strings.Join(line, " "))

	log := p.Settle(t, 5*time.Second)
	chatDown := log.Chat().Between(start, recovered)
	probes := log.Models().Between(start, recovered.Add(backSoon))
	var probeAt []string
	for _, pr := range probes {
		probeAt = append(probeAt, fmt.Sprintf("%v:%d", pr.At.Sub(start).Round(time.Millisecond), statusOf(pr.Fault)))
	}
	t.Logf("primary: %d chat requests while down; probes (GET /models) %v, gaps %v", len(chatDown), probeAt, probes.Gaps())
	if len(chatDown) > 8 {
		t.Errorf("the dead primary got %d chat requests, want ≤ 8 (5 failures to open its breaker, ≤ 3 retries): once open, probes, not calls, find out when it is back", len(chatDown))
	}
	downProbes := probes.Between(start, recovered)
	if len(downProbes) == 0 {
		t.Fatalf("no background probe (GET /models) of the primary's open breaker while it was down")
	}
	if len(chatDown) > 0 {
		if first := downProbes[0].At.Sub(chatDown[len(chatDown)-1].At); first < 100*time.Millisecond || first > 600*time.Millisecond {
			t.Errorf("the first probe came %v after the primary's last failed call, want about the first recovery (200ms)", first)
		}
	}
	gaps := downProbes.Gaps()
	for _, gap := range gaps {
		if gap < 100*time.Millisecond {
			t.Errorf("probes %v apart (gaps %v), want ≥ 100ms: the open period starts at 200ms and grows", gap, gaps)
		}
	}
	if len(gaps) >= 2 && gaps[len(gaps)-1] < gaps[0] {
		t.Errorf("probe gaps %v shrink, want them to grow (×1.5 with jitter)", gaps)
	}
	if st := g.breakerOf("primary"); st != "closed" {
		t.Errorf("the primary's breaker is %q at the end, want closed", st)
	}
}

// statusOf is the HTTP status a fault answered with, for logs.
func statusOf(f fs.Fault) int {
	if f.Mode == fs.Status {
		return f.Status
	}
	return http.StatusOK
}

// TestFault16ModelAndUsage: when the primary fails (503) and the backup answers, the answer's
// model — the completion's and every chunk's — is the backup's upstream model, not the route;
// the route is in X-Afloat-Route; the usage is the answer's alone.
func TestFault16ModelAndUsage(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, stream bool) {
		p := fs.New(t, fs.Config{Model: primaryModel, Tokens: primaryTokens, Script: fs.Always(fs.Fault{Mode: fs.Status, Status: 503})})
		b := fs.New(t, fs.Config{Model: backupModel, Tokens: backupTokens, PromptTokens: 23})
		g := startFaultServe(t, faultSetup{}, p, b)
		r := g.chat(stream)
		wantAnswer(t, r, "backup", backupText)
		if n := len(p.Settle(t, 5*time.Second).Chat()); n == 0 {
			t.Errorf("the primary was never tried: the scenario did not happen")
		}
		if got := r.header.Get("X-Afloat-Route"); got != faultRoute {
			t.Errorf("X-Afloat-Route %q, want the route %q", got, faultRoute)
		}
		if r.model != backupModel {
			t.Errorf("the answer's model is %q, want the answering upstream's %q (not the route %q)", r.model, backupModel, faultRoute)
		}
		if stream {
			var wrong []string
			for i, m := range r.models {
				if m != backupModel {
					wrong = append(wrong, fmt.Sprintf("chunk %d: %q", i, m))
				}
			}
			if len(wrong) > 0 {
				t.Errorf("%d of %d chunks name another model than the backup's %q: %v", len(wrong), len(r.models), backupModel, wrong[:min(len(wrong), 5)])
			}
		}
		if want := (usageWire{23, 60, 83}); r.usage == nil || *r.usage != want {
			t.Errorf("usage %+v, want the backup's answer's %+v: failed attempts are not billed to the caller", r.usage, want)
		}
	})
}
