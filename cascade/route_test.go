package cascade

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/flags"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// streamer is a provider that streams; complete and recv are scripted.
type streamer struct {
	calls    atomic.Int64
	open     func(ctx context.Context) error
	complete func(ctx context.Context, req *afloat.Request) (*afloat.Response, error)
	recv     func(ctx context.Context, n int) (afloat.Chunk, error)
}

func (s *streamer) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	s.calls.Add(1)
	return s.complete(ctx, req)
}

func (s *streamer) Stream(ctx context.Context, _ *afloat.Request) (afloat.Stream, error) {
	s.calls.Add(1)
	if s.open != nil {
		if err := s.open(ctx); err != nil {
			return nil, err
		}
	}
	return &scripted{ctx: ctx, recv: s.recv}, nil
}

type scripted struct {
	ctx  context.Context
	n    int
	recv func(ctx context.Context, n int) (afloat.Chunk, error)
}

func (s *scripted) Recv() (afloat.Chunk, error) { s.n++; return s.recv(s.ctx, s.n-1) }
func (s *scripted) Close() error                { return nil }

// words streams the given pieces, then ends.
func words(pieces ...string) func(context.Context, int) (afloat.Chunk, error) {
	return func(_ context.Context, n int) (afloat.Chunk, error) {
		if n < len(pieces) {
			return afloat.Chunk{Delta: pieces[n]}, nil
		}
		if n == len(pieces) {
			return afloat.Chunk{FinishReason: "stop", Usage: &afloat.Usage{InputTokens: 5, OutputTokens: 3}}, nil
		}
		return afloat.Chunk{}, io.EOF
	}
}

func newRoute(t *testing.T, clk clockwork.Clock, fl flags.Source, tiers []RouteTier, ps ...afloat.Provider) (*Engine, *Route) {
	t.Helper()
	cfg := Config{Clock: clk, Flags: fl}
	for i, p := range ps {
		cfg.Providers = append(cfg.Providers, ProviderConfig{Name: "p" + string(rune('0'+i)), Provider: p, Retry: RetryConfig{Max: -1}})
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tiers == nil {
		for i := range ps {
			tiers = append(tiers, RouteTier{Provider: "p" + string(rune('0'+i))})
		}
	}
	r, err := e.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance, Cascade: tiers})
	if err != nil {
		t.Fatal(err)
	}
	return e, r
}

var hi = &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleSystem, Content: "Be brief."}, {Role: afloat.RoleUser, Content: "hi"}}}

type collector struct {
	text      strings.Builder
	providers []string
}

func (c *collector) emit(provider string, _ int, ch afloat.Chunk) error {
	c.providers = append(c.providers, provider)
	c.text.WriteString(ch.Delta)
	return nil
}

func TestRouteSystemPrompts(t *testing.T) {
	var got [][]afloat.Message
	mk := func(fail bool) *fake {
		return &fake{fn: func(_ context.Context, req *afloat.Request, _ int) (*afloat.Response, error) {
			got = append(got, req.Messages)
			if fail {
				return nil, &afloat.ProviderError{Status: 503, Kind: afloat.Unavailable}
			}
			return &afloat.Response{Content: "ok"}, nil
		}}
	}
	_, r := newRoute(t, nil, nil, []RouteTier{
		{Provider: "p0", System: "Primary rules. {{.system}}", SystemMode: SystemReplace},
		{Provider: "p1", System: "Backup rules.", SystemMode: SystemPrepend},
		{Provider: "p2"},
	}, mk(true), mk(true), mk(false))
	rep, err := r.Complete(context.Background(), hi)
	if err != nil || rep.Provider != "p2" || !rep.Degraded || rep.Reason != "unavailable" {
		t.Fatalf("reply %+v %v", rep, err)
	}
	want := [][]string{
		{"system:Primary rules. Be brief.", "user:hi"},
		{"system:Backup rules.", "system:Be brief.", "user:hi"},
		{"system:Be brief.", "user:hi"},
	}
	for i, msgs := range got {
		var flat []string
		for _, m := range msgs {
			flat = append(flat, m.Role+":"+m.Content)
		}
		if strings.Join(flat, "|") != strings.Join(want[i], "|") {
			t.Fatalf("tier %d got %v, want %v", i, flat, want[i])
		}
	}
}

func TestRouteStreamFallsBackBeforeTheFirstChunk(t *testing.T) {
	broken := &streamer{recv: func(context.Context, int) (afloat.Chunk, error) {
		return afloat.Chunk{}, &afloat.ProviderError{Status: 200, Kind: afloat.Unavailable, Err: errors.New("error event")}
	}}
	good := &streamer{recv: words("Hel", "lo")}
	_, r := newRoute(t, nil, nil, nil, broken, good)
	var c collector
	rep, err := r.Stream(context.Background(), hi, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	if c.text.String() != "Hello" || rep.Provider != "p1" || !rep.Degraded || c.providers[0] != "p1" {
		t.Fatalf("streamed %q from %v, reply %+v", c.text.String(), c.providers, rep)
	}
	if rep.Usage.InputTokens != 5 || rep.Response.FinishReason != "stop" {
		t.Fatalf("reply %+v", rep)
	}
}

func TestRouteStreamCutAfterTheFirstChunk(t *testing.T) {
	cutting := &streamer{recv: func(_ context.Context, n int) (afloat.Chunk, error) {
		if n == 0 {
			return afloat.Chunk{Delta: "Hel"}, nil
		}
		return afloat.Chunk{}, &afloat.ProviderError{Kind: afloat.Unavailable, Err: io.ErrUnexpectedEOF}
	}}
	backup := &streamer{recv: words("never")}
	_, r := newRoute(t, nil, nil, nil, cutting, backup)
	var c collector
	rep, err := r.Stream(context.Background(), hi, c.emit)
	var se *StreamError
	if !errors.As(err, &se) || se.Provider != "p0" {
		t.Fatalf("err %v, want a StreamError from p0", err)
	}
	if backup.calls.Load() != 0 || c.text.String() != "Hel" {
		t.Fatal("another tier answered after bytes reached the client")
	}
	if !rep.Degraded || rep.Reason != "unavailable" {
		t.Fatalf("a cut stream reported as whole: %+v", rep)
	}
}

// A stalled stream is cut by the read timeout between chunks, not left to the budget.
func TestRouteStreamIdleTimeout(t *testing.T) {
	clk := clockwork.NewFakeClock()
	stalling := &streamer{recv: func(ctx context.Context, n int) (afloat.Chunk, error) {
		if n == 0 {
			return afloat.Chunk{Delta: "Hel"}, nil
		}
		<-ctx.Done()
		return afloat.Chunk{}, &afloat.ProviderError{Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
	}}
	_, r := newRoute(t, clk, nil, nil, stalling)
	done := make(chan error, 1)
	first := make(chan struct{})
	var once sync.Once
	emit := func(string, int, afloat.Chunk) error { once.Do(func() { close(first) }); return nil }
	go func() {
		_, err := r.Stream(context.Background(), hi, emit)
		done <- err
	}()
	<-first // the first chunk is out: what follows is a stall between chunks
	// Waiters: the call's budget (30s) and the idle timer (StreamIdle's default, 10s, not
	// the 2s of the first chunk).
	if err := clk.BlockUntilContext(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(9 * time.Second)
	// Both timers still wait: the idle timer did not fire at the first chunk's 2s.
	wait, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(wait, 2); err != nil {
		t.Fatal("the idle timer fired before 10s")
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		var se *StreamError
		if !errors.As(err, &se) || !afloat.IsTimeout(err) {
			t.Fatalf("err %v, want a timed-out StreamError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled stream was not cut by the idle timeout")
	}
}

// A client that hangs up mid-stream must not count as a provider failure.
func TestRouteClientHangingUpMidStreamLeavesTheBreaker(t *testing.T) {
	p := &streamer{recv: func(ctx context.Context, n int) (afloat.Chunk, error) {
		if n == 0 {
			return afloat.Chunk{Delta: "Hel"}, nil
		}
		<-ctx.Done()
		return afloat.Chunk{}, ctx.Err()
	}}
	e, r := newRoute(t, nil, nil, nil, p)
	for range 6 {
		ctx, cancel := context.WithCancel(context.Background())
		_, _ = r.Stream(ctx, hi, func(string, int, afloat.Chunk) error { cancel(); return nil })
		cancel()
	}
	if st := e.Breaker("p0").State(context.Background()); st != breaker.StateClosed {
		t.Fatalf("client disconnects moved a healthy provider's breaker to %v", st)
	}
	for _, o := range []string{"timeout", "unavailable"} {
		if got := testutil.ToFloat64(e.Metrics().Attempts.WithLabelValues("chat", "p0", o)); got != 0 {
			t.Fatalf("client disconnects counted as %v %s attempts of the provider", got, o)
		}
	}
}

// Streams learn their time to first chunk apart from whole answers: a healthy 2 s answer
// after many fast first chunks is not cut.
func TestRouteStreamLatencyDoesNotShrinkCompleteTimeout(t *testing.T) {
	clk := clockwork.NewFakeClock()
	p := &streamer{
		recv: func(ctx context.Context, n int) (afloat.Chunk, error) {
			if n == 0 {
				clk.Advance(100 * time.Millisecond)
				return afloat.Chunk{Delta: "Hello"}, nil
			}
			return afloat.Chunk{}, io.EOF
		},
		complete: func(ctx context.Context, _ *afloat.Request) (*afloat.Response, error) {
			clk.Advance(1900 * time.Millisecond) // under the 2 s initial read timeout
			select {
			case <-ctx.Done():
				return nil, &afloat.ProviderError{Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
			default:
				return &afloat.Response{Content: "Hello, world"}, nil
			}
		},
	}
	_, r := newRoute(t, clk, nil, nil, p)
	for range 25 {
		if _, err := r.Stream(context.Background(), hi, func(string, int, afloat.Chunk) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if rt := r.tiers[0].streamEst.ReadTimeout(); rt > 500*time.Millisecond {
		t.Fatalf("stream read timeout %v after 25 first chunks at 100ms", rt)
	}
	if rep, err := r.Complete(context.Background(), hi); err != nil {
		t.Fatalf("a healthy answer was cut: %v %+v", err, rep.Attempts)
	}
}

// A caller whose own deadline is shorter than the task's budget does not open the shared
// breaker of a healthy provider. In a synctest bubble: the provider's 300 ms and the caller's
// 250 ms are the bubble's time, so the deadline always comes first (on the wall clock under
// load the two could be ready at once, and the fake's select pick the answer).
func TestCallerDeadlineDoesNotOpenSharedBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, func(c *Config) { c.Clock = nil }, after(300*time.Millisecond, answer(validAnswer)))
		task := fx.task(t, nil)
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			res, _ := task.RunJSON(ctx, ticket)
			cancel()
			if len(res.Attempts) > 0 && res.Attempts[0].Outcome != afloat.OutcomeDeadline {
				t.Fatalf("attempts %+v", res.Attempts)
			}
		}
		if st := fx.eng.Breaker("p0").State(context.Background()); st != breaker.StateClosed {
			t.Fatalf("one caller's short deadlines opened a healthy provider's breaker: %v", st)
		}
	})
}

func TestRouteExhaustedAndKilled(t *testing.T) {
	down := &fake{fn: failWith(503, afloat.Unavailable)}
	f := flags.NewMemory()
	_, r := newRoute(t, nil, f, nil, down)
	rep, err := r.Complete(context.Background(), hi)
	if !errors.Is(err, ErrExhausted) || rep.Source != afloat.SourceUnavailable || rep.Reason != "unavailable" {
		t.Fatalf("reply %+v err %v", rep, err)
	}
	_ = f.Set(context.Background(), &flags.Document{Tasks: map[string]flags.TaskFlags{"chat": {Kill: true}}})
	before := down.calls.Load()
	rep, err = r.Stream(context.Background(), hi, func(string, int, afloat.Chunk) error { return nil })
	if !errors.Is(err, ErrExhausted) || rep.Reason != afloat.ReasonKillSwitch || down.calls.Load() != before {
		t.Fatalf("killed route: %+v %v", rep, err)
	}
}

func TestRouteJSONSchemaRequest(t *testing.T) {
	p := &fake{fn: func(_ context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
		if n == 0 {
			return &afloat.Response{Content: "no JSON, sorry"}, nil
		}
		return &afloat.Response{Content: "Here:\n```json\n" + validAnswer + "\n```"}, nil
	}}
	_, r := newRoute(t, nil, nil, nil, p)
	req := *hi
	req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: []byte(triageSchema)}
	rep, err := r.Complete(context.Background(), &req)
	if err != nil || rep.Response.Content != validAnswer || len(rep.Attempts) != 2 || !rep.Attempts[1].Reask {
		t.Fatalf("reply %+v err %v", rep, err)
	}
	var c collector
	if _, err := r.Stream(context.Background(), &req, c.emit); err != nil || c.text.String() != validAnswer {
		t.Fatalf("streamed %q err %v", c.text.String(), err)
	}
	// A schema that points at a file is refused, never read.
	req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: []byte(`{"$ref": "file:///etc/hostname"}`)}
	_, err = r.Complete(context.Background(), &req)
	var re *RequestError
	if !errors.As(err, &re) {
		t.Fatalf("file $ref: %v", err)
	}
}

func TestNamesAreUniqueAcrossTasksAndRoutes(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	fx.task(t, nil)
	if _, err := fx.eng.Route(RouteConfig{Name: "triage", Criticality: afloat.Assistance, Cascade: []RouteTier{{Provider: "p0"}}}); err == nil {
		t.Fatal("a route took a task's name")
	}
}
