package afloattest_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/afloattest"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/jonboulle/clockwork"
)

const answer = `{"department":"technical","is_urgent":0.8,"urgency_score":2}`

var req = &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Сайт не работает"}}}

// wantAnswer fails t unless resp, err is answer.
func wantAnswer(t *testing.T, resp *afloat.Response, err error) {
	t.Helper()
	if err != nil || resp == nil || resp.Content != answer || resp.FinishReason != "stop" {
		t.Fatalf("got %+v, %v; want the answer", resp, err)
	}
}

// wantStatus fails t unless err is an injected failure of provider with status and kind.
func wantStatus(t *testing.T, err error, provider string, status int, kind afloat.Kind) {
	t.Helper()
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || pe.Provider != provider || pe.Status != status || pe.Kind != kind || !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("err %v, want an injected %s failure of %s with status %d", err, kind, provider, status)
	}
}

func TestAnswering(t *testing.T) {
	p := afloattest.Answering("backup", answer)
	resp, err := p.Complete(context.Background(), req)
	wantAnswer(t, resp, err)

	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Recv(); err != nil || c.Delta != answer {
		t.Fatalf("chunk %+v, %v", c, err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("second Recv: %v, want io.EOF", err)
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Fatalf("Probe = %v", err)
	}

	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := p.Complete(ctx, req); !afloat.IsTimeout(err) || afloat.KindOf(err) != afloat.Unavailable {
		t.Fatalf("after the deadline: %v, want an unavailable timeout", err)
	}
	if n := p.Calls(); n != 3 {
		t.Errorf("Calls() = %d, want 3 (two completions and a stream; probes are not calls)", n)
	}
	if p.Name() != "backup" {
		t.Errorf("Name() = %q", p.Name())
	}
}

func TestUnavailable(t *testing.T) {
	tests := []struct {
		status    int
		kind      afloat.Kind
		transient bool
	}{
		{503, afloat.Unavailable, true},
		{500, afloat.Unavailable, true},
		{529, afloat.Unavailable, false},
		{429, afloat.Throttled, false},
		{401, afloat.Unusable, false},
		{402, afloat.Unusable, false},
		{400, afloat.Contract, false},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			p := afloattest.Unavailable("primary", tt.status)
			_, err := p.Complete(context.Background(), req)
			wantStatus(t, err, "primary", tt.status, tt.kind)
			var pe *afloat.ProviderError
			if errors.As(err, &pe); pe.Transient() != tt.transient {
				t.Errorf("Transient() = %v, want %v", pe.Transient(), tt.transient)
			}
			_, err = p.Stream(context.Background(), req)
			wantStatus(t, err, "primary", tt.status, tt.kind)
			wantStatus(t, p.Probe(context.Background()), "primary", tt.status, tt.kind)
			if n := p.Calls(); n != 2 {
				t.Errorf("Calls() = %d, want 2", n)
			}
		})
	}
}

func TestConstructorsRefuseNonsense(t *testing.T) {
	for name, f := range map[string]func(){
		"status 200":       func() { afloattest.Unavailable("p", 200) },
		"status 0":         func() { afloattest.Unavailable("p", 0) },
		"zero delay":       func() { afloattest.Slow("p", 0, answer, nil) },
		"negative delay":   func() { afloattest.Slow("p", -time.Second, answer, nil) },
		"zero down":        func() { afloattest.Flapping("p", 0, time.Second, answer, nil) },
		"zero up":          func() { afloattest.Flapping("p", time.Second, 0, answer, nil) },
		"negative periods": func() { afloattest.Flapping("p", -time.Second, -time.Second, answer, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(v.(string), "afloattest.") {
					t.Errorf("recovered %v, want a panic naming the constructor", v)
				}
			}()
			f()
		})
	}
}

// TestHanging runs in a synctest bubble: the call takes exactly its timeout.
func TestHanging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := afloattest.Hanging("primary")
		ctx, cancel := context.WithTimeout(context.Background(), 1300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := p.Complete(ctx, req)
		if took := time.Since(start); took != 1300*time.Millisecond {
			t.Errorf("took %v, want the whole 1.3s timeout", took)
		}
		if !afloat.IsTimeout(err) || afloat.KindOf(err) != afloat.Unavailable || !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("err %v, want an injected unavailable timeout", err)
		}
		if _, err := p.Stream(ctx, req); !afloat.IsTimeout(err) {
			t.Fatalf("stream: %v, want a timeout", err)
		}
		if err := p.Probe(ctx); !afloat.IsTimeout(err) {
			t.Fatalf("probe: %v, want a timeout: a hanging provider's probe hangs too", err)
		}
		if n := p.Calls(); n != 2 {
			t.Errorf("Calls() = %d, want 2", n)
		}
	})
}

func TestSlowWaitsOnTheClock(t *testing.T) {
	clk := clockwork.NewFakeClock()
	p := afloattest.Slow("primary", 2*time.Second, answer, clk)
	type result struct {
		resp *afloat.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := p.Complete(context.Background(), req)
		done <- result{resp, err}
	}()
	if err := clk.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2*time.Second - time.Nanosecond)
	select {
	case r := <-done:
		t.Fatalf("answered before its delay: %+v, %v", r.resp, r.err)
	default:
	}
	clk.Advance(time.Nanosecond)
	r := <-done
	wantAnswer(t, r.resp, r.err)

	// A call whose context ends first fails as a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Complete(ctx, req); !afloat.IsTimeout(err) || afloat.KindOf(err) != afloat.Unavailable {
		t.Fatalf("cut: %v, want an unavailable timeout", err)
	}
	if n := p.Calls(); n != 2 {
		t.Errorf("Calls() = %d, want 2", n)
	}
}

func TestMalformed(t *testing.T) {
	p := afloattest.Malformed("primary")
	resp, err := p.Complete(context.Background(), req)
	if err != nil || resp.Content == "" || strings.ContainsAny(resp.Content, "{}[]") {
		t.Fatalf("got %+v, %v; want prose without JSON", resp, err)
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Errorf("Probe = %v: a malformed provider's models list works", err)
	}
	if n := p.Calls(); n != 1 {
		t.Errorf("Calls() = %d, want 1", n)
	}
}

func TestFlapping(t *testing.T) {
	clk := clockwork.NewFakeClock()
	p := afloattest.Flapping("primary", 10*time.Second, 5*time.Second, answer, clk)
	steps := []struct {
		after time.Duration // since the previous step
		up    bool
	}{
		{0, false},
		{10*time.Second - time.Nanosecond, false},
		{time.Nanosecond, true}, // 10s: up
		{5*time.Second - time.Nanosecond, true},
		{time.Nanosecond, false}, // 15s: down again
		{10 * time.Second, true}, // 25s
		{time.Hour, true},        // 3625s: 241 periods of 15s, and 10s into the next
	}
	var at time.Duration
	for i, s := range steps {
		clk.Advance(s.after)
		at += s.after
		resp, err := p.Complete(context.Background(), req)
		if s.up {
			if err != nil || resp.Content != answer {
				t.Fatalf("step %d, at %v: %+v, %v; want the answer", i, at, resp, err)
			}
		} else {
			wantStatus(t, err, "primary", 503, afloat.Unavailable)
		}
	}
	if n := p.Calls(); n != len(steps) {
		t.Errorf("Calls() = %d, want %d", n, len(steps))
	}
}
