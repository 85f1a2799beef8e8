package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/provider/sim"
)

func newSim(t *testing.T, cfg sim.Config) *sim.Provider {
	t.Helper()
	p, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func userRequest(msg string) *afloat.Request {
	return &afloat.Request{Messages: []afloat.Message{
		{Role: afloat.RoleSystem, Content: "You triage support tickets."},
		{Role: afloat.RoleUser, Content: msg},
	}}
}

// testCtx bounds a test's waits for goroutines, so a broken provider fails the test instead
// of hanging it.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	resp *afloat.Response
	err  error
}

// completeAsync runs Complete in a goroutine and returns where its result arrives.
func completeAsync(ctx context.Context, p *sim.Provider, req *afloat.Request) <-chan result {
	done := make(chan result, 1)
	go func() {
		resp, err := p.Complete(ctx, req)
		done <- result{resp, err}
	}()
	return done
}

func receive(t *testing.T, ctx context.Context, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		t.Fatal("call did not return")
		return result{}
	}
}

// assertWaiting checks that a call is still waiting on the clock and has not returned. The
// clock drops a timer as soon as Advance fires it, so a call whose wait ended has no waiter
// left and the check fails (after a short real-time grace, as no waiter will come).
func assertWaiting(t *testing.T, clock *clockwork.FakeClock, done <-chan result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the call no longer waits on the clock")
	}
	select {
	case r := <-done:
		t.Fatalf("call returned early: %+v, %v", r.resp, r.err)
	default:
	}
}

func providerError(t *testing.T, err error) *afloat.ProviderError {
	t.Helper()
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *afloat.ProviderError", err, err)
	}
	return pe
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  sim.Config
		ok   bool
	}{
		{"zero", sim.Config{}, true},
		{"latency", sim.Config{P50: 300 * time.Millisecond, P95: 700 * time.Millisecond}, true},
		{"constant latency", sim.Config{P50: time.Second, P95: time.Second}, true},
		{"full error rate", sim.Config{ErrorRate: 1, ErrorStatus: 429}, true},
		{"p95 below p50", sim.Config{P50: time.Second, P95: time.Millisecond}, false},
		{"p95 only", sim.Config{P95: time.Second}, false},
		{"p50 only", sim.Config{P50: time.Second}, false},
		{"negative", sim.Config{P50: -time.Second, P95: time.Second}, false},
		{"error rate below 0", sim.Config{ErrorRate: -0.1}, false},
		{"error rate above 1", sim.Config{ErrorRate: 1.1}, false},
		{"error rate NaN", sim.Config{ErrorRate: math.NaN()}, false},
		{"error status 200", sim.Config{ErrorStatus: 200}, false},
		{"error status 600", sim.Config{ErrorStatus: 600}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sim.New(tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%+v) error = %v, want ok %v", tc.cfg, err, tc.ok)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in   string
		want sim.Mode
		ok   bool
	}{
		{"", sim.ModeNone, true},
		{"none", sim.ModeNone, true},
		{"unavailable", sim.ModeUnavailable, true},
		{"timeout", sim.ModeTimeout, true},
		{"slow", sim.ModeSlow, true},
		{"malformed", sim.ModeMalformed, true},
		{"Slow", "", false},
		{"down", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := sim.ParseMode(tc.in)
			if got != tc.want || (err == nil) != tc.ok {
				t.Fatalf("ParseMode(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestFaultValidate(t *testing.T) {
	tests := []struct {
		name string
		f    sim.Fault
		ok   bool
	}{
		{"none", sim.Fault{}, true},
		{"unavailable 429", sim.Fault{Mode: sim.ModeUnavailable, Status: 429}, true},
		{"slow", sim.Fault{Mode: sim.ModeSlow, Delay: time.Second}, true},
		{"unknown mode", sim.Fault{Mode: "down"}, false},
		{"status 302", sim.Fault{Mode: sim.ModeUnavailable, Status: 302}, false},
		{"negative delay", sim.Fault{Mode: sim.ModeSlow, Delay: -time.Second}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestCompleteWaitsForLatencyOnClock(t *testing.T) {
	const latency = 300 * time.Millisecond
	tests := []struct {
		name  string
		fault sim.Fault
		want  time.Duration
	}{
		{"no fault", sim.Fault{}, latency},
		{"slow", sim.Fault{Mode: sim.ModeSlow, Delay: 2 * time.Second}, latency + 2*time.Second},
		{"slow with default delay", sim.Fault{Mode: sim.ModeSlow}, latency + 5*time.Second},
		{"malformed", sim.Fault{Mode: sim.ModeMalformed}, latency},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			clock := clockwork.NewFakeClock()
			p := newSim(t, sim.Config{P50: latency, P95: latency, Clock: clock})
			p.SetFault(tc.fault)
			done := completeAsync(ctx, p, userRequest("hello"))
			if err := clock.BlockUntilContext(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clock.Advance(tc.want - time.Millisecond)
			assertWaiting(t, clock, done)
			clock.Advance(time.Millisecond)
			r := receive(t, ctx, done)
			if r.err != nil || r.resp.Content == "" {
				t.Fatalf("Complete = %+v, %v; want an answer", r.resp, r.err)
			}
		})
	}
}

func TestFaultUnavailable(t *testing.T) {
	tests := []struct {
		status     int
		wantStatus int
		wantKind   afloat.Kind
	}{
		{0, 503, afloat.Unavailable},
		{500, 500, afloat.Unavailable},
		{529, 529, afloat.Unavailable},
		{429, 429, afloat.Throttled},
		{401, 401, afloat.Unusable},
		{402, 402, afloat.Unusable},
		{403, 403, afloat.Unusable},
		{400, 400, afloat.Contract},
		{404, 404, afloat.Contract},
		{422, 422, afloat.Contract},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			ctx := testCtx(t)
			clock := clockwork.NewFakeClock()
			p := newSim(t, sim.Config{Name: "gigachat-pro", P50: time.Second, P95: time.Second, Clock: clock})
			p.SetFault(sim.Fault{Mode: sim.ModeUnavailable, Status: tc.status})
			done := completeAsync(ctx, p, userRequest("hello"))
			if err := clock.BlockUntilContext(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clock.Advance(100 * time.Millisecond) // a tenth of the latency: refusals come sooner
			r := receive(t, ctx, done)
			pe := providerError(t, r.err)
			if pe.Provider != "gigachat-pro" || pe.Status != tc.wantStatus || pe.Kind != tc.wantKind || pe.Timeout {
				t.Fatalf("error = %+v; want provider gigachat-pro, status %d, kind %v, no timeout", pe, tc.wantStatus, tc.wantKind)
			}
			if !errors.Is(r.err, sim.ErrSimulated) {
				t.Fatalf("error %v does not wrap ErrSimulated", r.err)
			}
		})
	}
}

func TestFaultTimeoutHangsUntilContextEnds(t *testing.T) {
	ctx := testCtx(t)
	clock := clockwork.NewFakeClock()
	p := newSim(t, sim.Config{Clock: clock})
	p.SetFault(sim.Fault{Mode: sim.ModeTimeout})
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := completeAsync(callCtx, p, userRequest("hello"))
	for range 3 { // a day goes by, and the call is still waiting on the clock
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(8 * time.Hour)
	}
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	assertWaiting(t, clock, done)
	cancel()
	r := receive(t, ctx, done)
	pe := providerError(t, r.err)
	if !pe.Timeout || pe.Kind != afloat.Unavailable || !errors.Is(r.err, context.Canceled) || !afloat.IsTimeout(r.err) {
		t.Fatalf("error = %+v; want a timeout of kind unavailable wrapping context.Canceled", pe)
	}
}

func TestContextCutsCall(t *testing.T) {
	t.Run("cancelled while waiting", func(t *testing.T) {
		ctx := testCtx(t)
		clock := clockwork.NewFakeClock()
		p := newSim(t, sim.Config{Name: "yandexgpt", P50: time.Second, P95: 2 * time.Second, Clock: clock})
		callCtx, cancel := context.WithCancel(ctx)
		done := completeAsync(callCtx, p, userRequest("hello"))
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		r := receive(t, ctx, done)
		pe := providerError(t, r.err)
		if !pe.Timeout || pe.Kind != afloat.Unavailable || pe.Provider != "yandexgpt" || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("error = %+v; want a yandexgpt timeout of kind unavailable wrapping context.Canceled", pe)
		}
	})
	t.Run("deadline already passed", func(t *testing.T) {
		p := newSim(t, sim.Config{}) // no latency: the call would answer at once
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		_, err := p.Complete(ctx, userRequest("hello"))
		pe := providerError(t, err)
		if !pe.Timeout || !afloat.IsTimeout(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error = %+v; want a timeout wrapping context.DeadlineExceeded", pe)
		}
		if p.Calls() != 1 {
			t.Fatalf("Calls() = %d, want 1", p.Calls())
		}
	})
}

func TestFaultReadWhenCallStarts(t *testing.T) {
	ctx := testCtx(t)
	clock := clockwork.NewFakeClock()
	p := newSim(t, sim.Config{P50: time.Second, P95: time.Second, Clock: clock})
	done := completeAsync(ctx, p, userRequest("hello"))
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	down := sim.Fault{Mode: sim.ModeUnavailable, Status: 502}
	p.SetFault(down)
	if got := p.Fault(); got != down {
		t.Fatalf("Fault() = %+v, want %+v", got, down)
	}
	clock.Advance(time.Second)
	if r := receive(t, ctx, done); r.err != nil {
		t.Fatalf("the call that started before the fault failed: %v", r.err)
	}
	done = completeAsync(ctx, p, userRequest("hello"))
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if pe := providerError(t, receive(t, ctx, done).err); pe.Status != 502 {
		t.Fatalf("status = %d, want 502", pe.Status)
	}
	p.SetFault(sim.Fault{})
	done = completeAsync(ctx, p, userRequest("hello"))
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if r := receive(t, ctx, done); r.err != nil {
		t.Fatalf("after the fault cleared: %v", r.err)
	}
	if p.Calls() != 3 {
		t.Fatalf("Calls() = %d, want 3", p.Calls())
	}
}

func TestInvalidFaultFailsCalls(t *testing.T) {
	p := newSim(t, sim.Config{})
	p.SetFault(sim.Fault{Mode: "down"})
	_, err := p.Complete(context.Background(), userRequest("hello"))
	if pe := providerError(t, err); pe.Kind != afloat.Unavailable || !strings.Contains(err.Error(), "down") {
		t.Fatalf("error = %v; want kind unavailable naming the mode", err)
	}
}

func TestFaultMalformed(t *testing.T) {
	req := userRequest("my card was charged twice")
	req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(triageSchema)}
	p := newSim(t, sim.Config{Seed: 5})
	p.SetFault(sim.Fault{Mode: sim.ModeMalformed})
	phrasings := map[string]bool{}
	for range 30 {
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(resp.Content, "{}[]\"") || json.Valid([]byte(resp.Content)) {
			t.Fatalf("malformed answer holds JSON: %q", resp.Content)
		}
		if resp.FinishReason != "stop" || resp.Usage.OutputTokens != len(resp.Content)/4 {
			t.Fatalf("answer = %+v; want finish reason stop and usage counted", resp)
		}
		phrasings[resp.Content] = true
	}
	if len(phrasings) < 3 {
		t.Fatalf("only %d phrasings in 30 malformed answers", len(phrasings))
	}
}

func TestErrorRate(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		status   int
		min, max int // failures out of 1000
		kind     afloat.Kind
	}{
		{"none", 0, 0, 0, 0, afloat.Unavailable},
		{"thirty percent", 0.3, 0, 250, 350, afloat.Unavailable},
		{"all throttled", 1, 429, 1000, 1000, afloat.Throttled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newSim(t, sim.Config{ErrorRate: tc.rate, ErrorStatus: tc.status})
			failed := 0
			for range 1000 {
				_, err := p.Complete(context.Background(), userRequest("hello"))
				if err == nil {
					continue
				}
				failed++
				if pe := providerError(t, err); pe.Kind != tc.kind || !errors.Is(err, sim.ErrSimulated) {
					t.Fatalf("error = %+v; want kind %v wrapping ErrSimulated", pe, tc.kind)
				}
			}
			if failed < tc.min || failed > tc.max || p.Calls() != 1000 {
				t.Fatalf("%d of %d calls failed; want %d to %d", failed, p.Calls(), tc.min, tc.max)
			}
		})
	}
}

// transcript makes n calls and records everything they returned.
func transcript(t *testing.T, p *sim.Provider, n int) []string {
	t.Helper()
	req := userRequest("the app crashes on login")
	req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(triageSchema)}
	var out []string
	for range n {
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			out = append(out, "error: "+err.Error())
			continue
		}
		out = append(out, resp.Content)
	}
	return out
}

func TestSameSeedSameAnswers(t *testing.T) {
	cfg := sim.Config{Seed: 42, ErrorRate: 0.2}
	a := transcript(t, newSim(t, cfg), 50)
	b := transcript(t, newSim(t, cfg), 50)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different answers:\n%q\n%q", a, b)
	}
	cfg.Seed = 43
	if c := transcript(t, newSim(t, cfg), 50); slices.Equal(a, c) {
		t.Fatal("seeds 42 and 43 gave the same 50 answers")
	}
	zero := transcript(t, newSim(t, sim.Config{ErrorRate: 0.2}), 50)
	one := transcript(t, newSim(t, sim.Config{Seed: 1, ErrorRate: 0.2}), 50)
	if !slices.Equal(zero, one) {
		t.Fatal("seed 0 does not mean seed 1")
	}
}

func TestPlainTextAnswer(t *testing.T) {
	req := &afloat.Request{Model: "t-lite", Messages: []afloat.Message{
		{Role: afloat.RoleSystem, Content: "You are a helpful assistant."},
		{Role: afloat.RoleUser, Content: "first question"},
		{Role: afloat.RoleAssistant, Content: "first answer"},
		{Role: afloat.RoleUser, Content: "where is  my\norder 1234?"},
	}}
	in := (len("You are a helpful assistant.") + len("first question") + len("first answer") + len("where is  my\norder 1234?")) / 4
	for seed := uint64(1); seed <= 10; seed++ {
		resp, err := newSim(t, sim.Config{Seed: seed}).Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.Content, "where is my order 1234?") {
			t.Fatalf("answer %q does not mention the last user message", resp.Content)
		}
		want := afloat.Usage{InputTokens: in, OutputTokens: len(resp.Content) / 4}
		if resp.Usage != want || resp.Model != "t-lite" || resp.FinishReason != "stop" {
			t.Fatalf("answer = %+v; want usage %+v, model t-lite, finish reason stop", resp, want)
		}
	}
}

func TestJSONObjectWithoutSchema(t *testing.T) {
	req := userRequest("hello there")
	req.ResponseFormat = &afloat.ResponseFormat{Type: "json_object"}
	resp, err := newSim(t, sim.Config{}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(resp.Content), &v); err != nil || !strings.Contains(v["answer"], "hello there") {
		t.Fatalf("answer = %q, %v; want an object whose answer mentions the message", resp.Content, err)
	}
}

func TestToolCall(t *testing.T) {
	params := `{"type": "object", "properties": {"city": {"enum": ["Moscow", "Kazan"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"], "additionalProperties": false}`
	tools := []afloat.Tool{{Name: "search"}, {Name: "weather", Parameters: json.RawMessage(params)}}
	tests := []struct {
		name     string
		choice   afloat.ToolChoice
		wantTool string
		wantErr  bool
	}{
		{"named", afloat.ToolChoice{Mode: "tool", Name: "weather"}, "weather", false},
		{"required", afloat.ToolChoice{Mode: "required"}, "search", false},
		{"unknown", afloat.ToolChoice{Mode: "tool", Name: "nope"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := userRequest("weather in Kazan")
			req.Tools, req.ToolChoice = tools, &tc.choice
			resp, err := newSim(t, sim.Config{}).Complete(context.Background(), req)
			if tc.wantErr {
				if pe := providerError(t, err); pe.Kind != afloat.Contract || pe.Status != 400 {
					t.Fatalf("error = %+v; want status 400, kind contract", pe)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != tc.wantTool || resp.FinishReason != "tool_calls" || resp.ToolCalls[0].ID == "" {
				t.Fatalf("answer = %+v; want one call of %s", resp, tc.wantTool)
			}
			if tc.wantTool == "weather" {
				if err := compile(t, params).Validate(unmarshal(t, resp.ToolCalls[0].Arguments)); err != nil {
					t.Fatalf("arguments %s do not fit the parameters: %v", resp.ToolCalls[0].Arguments, err)
				}
			} else if string(resp.ToolCalls[0].Arguments) != "{}" {
				t.Fatalf("arguments = %s, want {}", resp.ToolCalls[0].Arguments)
			}
		})
	}
}

func unmarshal(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestInvalidSchemaIsContractError(t *testing.T) {
	req := userRequest("hello")
	req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"type": `)}
	_, err := newSim(t, sim.Config{}).Complete(context.Background(), req)
	if pe := providerError(t, err); pe.Kind != afloat.Contract || pe.Status != 400 {
		t.Fatalf("error = %+v; want status 400, kind contract", pe)
	}
}

func TestStream(t *testing.T) {
	schemaReq := userRequest("hello")
	schemaReq.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(triageSchema)}
	toolReq := userRequest("hello")
	toolReq.Tools, toolReq.ToolChoice = []afloat.Tool{{Name: "lookup"}}, &afloat.ToolChoice{Mode: "required"}
	tests := []struct {
		name string
		req  *afloat.Request
	}{
		{"text", userRequest("Привет, у меня не работает оплата")},
		{"schema", schemaReq},
		{"tool call", toolReq},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := newSim(t, sim.Config{Seed: 3}).Complete(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			s, err := newSim(t, sim.Config{Seed: 3}).Stream(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var text strings.Builder
			var last afloat.Chunk
			n := 0
			for {
				c, err := s.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				text.WriteString(c.Delta)
				last = c
				n++
			}
			if text.String() != want.Content {
				t.Fatalf("streamed text %q, want %q", text.String(), want.Content)
			}
			if last.FinishReason != want.FinishReason || last.Usage == nil || *last.Usage != want.Usage || len(last.ToolCalls) != len(want.ToolCalls) {
				t.Fatalf("last chunk = %+v; want finish reason, usage and tool calls of %+v", last, want)
			}
			if want.Content != "" && n < 2 {
				t.Fatalf("%d chunks; want the text split", n)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("Recv after Close = %v, want io.EOF", err)
			}
		})
	}
	t.Run("fault", func(t *testing.T) {
		p := newSim(t, sim.Config{})
		p.SetFault(sim.Fault{Mode: sim.ModeUnavailable})
		s, err := p.Stream(context.Background(), userRequest("hello"))
		if pe := providerError(t, err); s != nil || pe.Status != 503 {
			t.Fatalf("Stream = %v, %+v; want no stream and status 503", s, pe)
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	p := newSim(t, sim.Config{ErrorRate: 0.1})
	const workers, calls = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				if w == 0 && i%10 == 0 {
					p.SetFault(sim.Fault{Mode: sim.ModeMalformed})
					_ = p.Fault()
					p.SetFault(sim.Fault{})
				}
				req := userRequest("hello")
				if i%2 == 0 { // the parsed schema is shared between calls
					req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(schemas[i%len(schemas)].schema)}
				}
				if _, err := p.Complete(context.Background(), req); err != nil && !errors.Is(err, sim.ErrSimulated) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if p.Calls() != workers*calls {
		t.Fatalf("Calls() = %d, want %d", p.Calls(), workers*calls)
	}
}

// TestManySchemas asks with more schemas than the provider keeps parsed, each twice.
func TestManySchemas(t *testing.T) {
	p := newSim(t, sim.Config{})
	for round := range 2 {
		for i := range 150 {
			req := userRequest("hello")
			req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"const": ` + strconv.Itoa(i) + `}`)}
			resp, err := p.Complete(context.Background(), req)
			if err != nil || resp.Content != strconv.Itoa(i) {
				t.Fatalf("round %d, schema %d: answer %+v, %v", round, i, resp, err)
			}
		}
	}
}
