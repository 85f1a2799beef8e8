package fault

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

type counting struct{ calls atomic.Int64 }

func (c *counting) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	c.calls.Add(1)
	return &afloat.Response{Content: `{"ok":true}`}, nil
}

func TestModes(t *testing.T) {
	tests := []struct {
		name      string
		fault     Fault
		status    int
		kind      afloat.Kind
		wantCalls int64
		wantText  string
	}{
		{"none", Fault{}, 0, 0, 1, `{"ok":true}`},
		{"unavailable default", Fault{Mode: ModeUnavailable}, 503, afloat.Unavailable, 0, ""},
		{"unavailable 502", Fault{Mode: ModeUnavailable, Status: 502}, 502, afloat.Unavailable, 0, ""},
		{"throttled", Fault{Mode: ModeUnavailable, Status: 429}, 429, afloat.Throttled, 0, ""},
		{"unusable", Fault{Mode: ModeUnavailable, Status: 402}, 402, afloat.Unusable, 0, ""},
		{"contract", Fault{Mode: ModeUnavailable, Status: 400}, 400, afloat.Contract, 0, ""},
		{"request timeout", Fault{Mode: ModeUnavailable, Status: 408}, 408, afloat.Unavailable, 0, ""},
		{"malformed", Fault{Mode: ModeMalformed}, 0, 0, 0, "I'm sorry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &counting{}
			p := Wrap("gigachat-pro", inner, nil)
			if err := p.Set(tt.fault); err != nil {
				t.Fatal(err)
			}
			resp, err := p.Complete(context.Background(), &afloat.Request{})
			if tt.status != 0 {
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) || pe.Status != tt.status || pe.Kind != tt.kind || pe.Provider != "gigachat-pro" || !errors.Is(err, ErrInjected) {
					t.Fatalf("err %v", err)
				}
			} else if err != nil || len(resp.Content) < len(tt.wantText) || resp.Content[:len(tt.wantText)] != tt.wantText {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if got := inner.calls.Load(); got != tt.wantCalls {
				t.Fatalf("inner called %d times, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestTimeoutHangsUntilContextEnds(t *testing.T) {
	p := Wrap("p", &counting{}, nil)
	_ = p.Set(Fault{Mode: ModeTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Complete(ctx, &afloat.Request{})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("returned before its context ended: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	err := <-done
	if !afloat.IsTimeout(err) || afloat.KindOf(err) != afloat.Unavailable {
		t.Fatalf("err %v, want an unavailable timeout", err)
	}
}

func TestSlowWaitsOnTheClock(t *testing.T) {
	clk := clockwork.NewFakeClock()
	inner := &counting{}
	p := Wrap("p", inner, clk)
	_ = p.Set(Fault{Mode: ModeSlow, Delay: 2 * time.Second})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := p.Complete(context.Background(), &afloat.Request{}); err != nil {
			t.Error(err)
		}
	}()
	if err := clk.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2*time.Second - time.Millisecond)
	if inner.calls.Load() != 0 {
		t.Fatal("called before the delay")
	}
	clk.Advance(time.Millisecond)
	<-done
	if inner.calls.Load() != 1 {
		t.Fatal("not called after the delay")
	}
}

func TestValidateAndJSON(t *testing.T) {
	p := Wrap("p", &counting{}, nil)
	for _, bad := range []Fault{{Mode: "explode"}, {Mode: ModeUnavailable, Status: 200}, {Mode: ModeSlow, Delay: -time.Second}} {
		if err := p.Set(bad); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
	var f Fault
	if err := json.Unmarshal([]byte(`{"mode":"slow","delay":"5s"}`), &f); err != nil || f.Mode != ModeSlow || f.Delay != 5*time.Second {
		t.Fatalf("%+v %v", f, err)
	}
	if b, _ := json.Marshal(f); string(b) != `{"mode":"slow","delay":"5s"}` {
		t.Fatalf("marshal %s", b)
	}
	if err := json.Unmarshal([]byte(`{"mode":"slow","delay":"soon"}`), &f); err == nil {
		t.Fatal("bad delay accepted")
	}
	if err := json.Unmarshal([]byte(`{"mode":"slow","dealy":"100ms"}`), &f); err == nil {
		t.Fatal("a misspelt field was accepted (and would inject the default 5s)")
	}
}

func TestStreamOfNonStreamingProvider(t *testing.T) {
	p := Wrap("p", &counting{}, nil)
	s, err := p.Stream(context.Background(), &afloat.Request{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Recv()
	if err != nil || c.Delta != `{"ok":true}` {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("second Recv: %v", err)
	}
	_ = p.Set(Fault{Mode: ModeUnavailable})
	if _, err := p.Stream(context.Background(), &afloat.Request{}); afloat.KindOf(err) != afloat.Unavailable || err == nil {
		t.Fatalf("stream under fault: %v", err)
	}
}

// TestEffectiveFillsTheModesDefaults: the fault as it runs carries the defaults of the fields
// its mode takes, and no field it does not take.
func TestEffectiveFillsTheModesDefaults(t *testing.T) {
	tests := []struct {
		in, want Fault
	}{
		{Fault{Mode: ModeUnavailable}, Fault{Mode: ModeUnavailable, Status: 503}},
		{Fault{Mode: ModeUnavailable, Status: 429, TTL: time.Minute}, Fault{Mode: ModeUnavailable, Status: 429, TTL: time.Minute}},
		{Fault{Mode: ModeSlow}, Fault{Mode: ModeSlow, Delay: 5 * time.Second}},
		{Fault{Mode: ModeRateLimited}, Fault{Mode: ModeRateLimited, RetryAfter: 30 * time.Second}},
		{Fault{Mode: ModeStreamCut}, Fault{Mode: ModeStreamCut, AfterChunks: 3}},
		{Fault{Mode: ModeFlap, Up: time.Second}, Fault{Mode: ModeFlap, Status: 503, Down: 10 * time.Second, Up: time.Second}},
		{Fault{Mode: ModeErrorRate, Rate: 0.5}, Fault{Mode: ModeErrorRate, Status: 503, Rate: 0.5}},
		{Fault{Mode: ModeTimeout}, Fault{Mode: ModeTimeout}},
	}
	for _, tc := range tests {
		if got := tc.in.Effective(); got != tc.want {
			t.Errorf("%+v: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
