package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// streaming is a provider that streams its answer as the chunks "c1 ", "c2 ", … and counts
// its calls, its streams and the streams closed. It probes too.
type streaming struct {
	prober
	chunks  int
	skipped int
	streams atomic.Int64
	closed  atomic.Int64
}

func (s *streaming) Stream(context.Context, *afloat.Request) (afloat.Stream, error) {
	s.streams.Add(1)
	return &chunkStream{owner: s}, nil
}

type chunkStream struct {
	owner  *streaming
	sent   int
	closed bool
}

func (c *chunkStream) Recv() (afloat.Chunk, error) {
	switch {
	case c.closed:
		return afloat.Chunk{}, errors.New("read after close")
	case c.sent == c.owner.chunks:
		return afloat.Chunk{}, io.EOF
	}
	c.sent++
	return afloat.Chunk{Delta: fmt.Sprintf("c%d ", c.sent)}, nil
}

func (c *chunkStream) Close() error {
	if !c.closed {
		c.closed = true
		c.owner.closed.Add(1)
	}
	return nil
}

func (c *chunkStream) Skipped() int { return c.owner.skipped }

// drain reads s to its end: the text received, the chunks, and the error that ended it
// (io.EOF for a clean end).
func drain(s afloat.Stream) (string, int, error) {
	var b strings.Builder
	for n := 0; ; n++ {
		c, err := s.Recv()
		if err != nil {
			return b.String(), n, err
		}
		b.WriteString(c.Delta)
	}
}

// failure is the injected failure a test expects.
type failure struct {
	status     int
	kind       afloat.Kind
	timeout    bool
	transient  bool
	retryAfter time.Duration
	cause      error // also wrapped, besides ErrInjected; nil: none asked for
}

func wantFailure(t *testing.T, err error, want failure) {
	t.Helper()
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err %v, want a *afloat.ProviderError", err)
	}
	if pe.Provider != "gigachat-pro" || pe.Status != want.status || pe.Kind != want.kind || pe.Timeout != want.timeout ||
		pe.Transient() != want.transient || pe.RetryAfter != want.retryAfter {
		t.Fatalf("err %v: provider %q, status %d, kind %s, timeout %v, transient %v, retry after %v; want status %d, kind %s, timeout %v, transient %v, retry after %v",
			err, pe.Provider, pe.Status, pe.Kind, pe.Timeout, pe.Transient(), pe.RetryAfter,
			want.status, want.kind, want.timeout, want.transient, want.retryAfter)
	}
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("err %v does not wrap ErrInjected", err)
	}
	if want.cause != nil && !errors.Is(err, want.cause) {
		t.Fatalf("err %v does not wrap %v", err, want.cause)
	}
}

var (
	reset       = failure{kind: afloat.Unavailable, transient: true, cause: syscall.ECONNRESET}
	limited     = failure{status: 429, kind: afloat.Throttled, transient: true, retryAfter: 30 * time.Second}
	unavailable = failure{status: 503, kind: afloat.Unavailable, transient: true}
)

// TestFailingModes: the modes that fail a call at once fail Complete, Stream and Probe
// alike, with their kind, Transient and RetryAfter, and never reach the wrapped provider.
func TestFailingModes(t *testing.T) {
	tests := []struct {
		name  string
		fault Fault
		want  failure
	}{
		{"reset", Fault{Mode: ModeReset}, reset},
		{"rate limited", Fault{Mode: ModeRateLimited}, limited},
		{"rate limited 2s", Fault{Mode: ModeRateLimited, RetryAfter: 2 * time.Second},
			failure{status: 429, kind: afloat.Throttled, transient: true, retryAfter: 2 * time.Second}},
		{"flap, down first", Fault{Mode: ModeFlap}, unavailable},
		{"flap 500", Fault{Mode: ModeFlap, Status: 500}, failure{status: 500, kind: afloat.Unavailable, transient: true}},
		{"error rate 1", Fault{Mode: ModeErrorRate, Rate: 1}, unavailable},
		{"error rate 1 of 429", Fault{Mode: ModeErrorRate, Rate: 1, Status: 429}, failure{status: 429, kind: afloat.Throttled}},
		{"error rate 1 of 529", Fault{Mode: ModeErrorRate, Rate: 1, Status: 529}, failure{status: 529, kind: afloat.Unavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &streaming{chunks: 3}
			p := Wrap("gigachat-pro", inner, clockwork.NewFakeClock())
			if err := p.Set(tt.fault); err != nil {
				t.Fatal(err)
			}
			_, err := p.Complete(context.Background(), &afloat.Request{})
			wantFailure(t, err, tt.want)
			s, err := p.Stream(context.Background(), &afloat.Request{})
			if s != nil {
				t.Fatal("Stream opened a stream under a fault that fails before any header")
			}
			wantFailure(t, err, tt.want)
			wantFailure(t, p.Probe(context.Background()), tt.want)
			if inner.calls.Load()+inner.streams.Load()+inner.probes.Load() != 0 {
				t.Fatalf("the wrapped provider was reached: %d calls, %d streams, %d probes", inner.calls.Load(), inner.streams.Load(), inner.probes.Load())
			}
		})
	}
}

// TestStreamCut: a stream passes after_chunks chunks and then fails as a body cut before its
// end marker, closing the wrapped stream; an answer shorter than that ends cleanly; a call
// that is not streamed is made and its answer lost; the probe goes through.
func TestStreamCut(t *testing.T) {
	cutErr := failure{status: 200, kind: afloat.Unavailable, cause: io.ErrUnexpectedEOF}
	tests := []struct {
		name    string
		fault   Fault
		chunks  int // of the wrapped stream
		text    string
		wantErr bool
	}{
		{"default 3 of 5", Fault{Mode: ModeStreamCut}, 5, "c1 c2 c3 ", true},
		{"1 of 5", Fault{Mode: ModeStreamCut, AfterChunks: 1}, 5, "c1 ", true},
		{"5 of 5: the end is lost", Fault{Mode: ModeStreamCut, AfterChunks: 5}, 5, "c1 c2 c3 c4 c5 ", true},
		{"shorter answer", Fault{Mode: ModeStreamCut, AfterChunks: 3}, 2, "c1 c2 ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &streaming{chunks: tt.chunks, skipped: 2}
			p := Wrap("gigachat-pro", inner, nil)
			if err := p.Set(tt.fault); err != nil {
				t.Fatal(err)
			}
			s, err := p.Stream(context.Background(), &afloat.Request{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			text, _, err := drain(s)
			if text != tt.text {
				t.Errorf("received %q, want %q", text, tt.text)
			}
			if sc, ok := s.(afloat.SkipCounter); !ok || sc.Skipped() != 2 {
				t.Errorf("the wrapped stream's skipped events are not passed on")
			}
			if !tt.wantErr {
				if err != io.EOF {
					t.Fatalf("a short answer ended with %v, want io.EOF", err)
				}
				return
			}
			wantFailure(t, err, cutErr)
			if _, again := s.Recv(); again != err {
				t.Errorf("Recv after the cut = %v, want the cut again", again)
			}
			if inner.closed.Load() != 1 {
				t.Error("the cut did not close the wrapped stream")
			}
		})
	}

	t.Run("not streamed", func(t *testing.T) {
		inner := &streaming{chunks: 5}
		p := Wrap("gigachat-pro", inner, nil)
		_ = p.Set(Fault{Mode: ModeStreamCut})
		resp, err := p.Complete(context.Background(), &afloat.Request{})
		if resp != nil {
			t.Fatalf("an answer came through the cut: %+v", resp)
		}
		wantFailure(t, err, failure{kind: afloat.Unavailable, cause: io.ErrUnexpectedEOF})
		if inner.calls.Load() != 1 {
			t.Errorf("the wrapped provider was called %d times, want once: the cut comes mid-answer", inner.calls.Load())
		}
		// A provider that cannot stream sends its answer as one body: the same cut.
		plain := &counting{}
		q := Wrap("gigachat-pro", plain, nil)
		_ = q.Set(Fault{Mode: ModeStreamCut})
		if _, err := q.Stream(context.Background(), &afloat.Request{}); err == nil || plain.calls.Load() != 1 {
			t.Fatalf("Stream of a provider that cannot stream: %v after %d calls, want the cut after one", err, plain.calls.Load())
		} else {
			wantFailure(t, err, failure{kind: afloat.Unavailable, cause: io.ErrUnexpectedEOF})
		}
		if err := p.Probe(context.Background()); err != nil || inner.probes.Load() != 1 {
			t.Errorf("Probe = %v, want it through to the wrapped probe", err)
		}
	})
}

// TestStreamStall: the stream opens at once without reaching the wrapped provider and sends
// nothing until its context ends, then fails as an Unavailable timeout; Close ends a blocked
// Recv; a call that is not streamed hangs as long; the probe goes through.
func TestStreamStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &streaming{chunks: 3}
		p := Wrap("gigachat-pro", inner, nil)
		_ = p.Set(Fault{Mode: ModeStreamStall})

		ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
		defer cancel()
		start := time.Now()
		s, err := p.Stream(ctx, &afloat.Request{})
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("Stream = %v after %v, want a stream at once", err, time.Since(start))
		}
		text, n, err := drain(s)
		if n != 0 || text != "" || time.Since(start) != 7*time.Second {
			t.Fatalf("received %d chunks %q, ended after %v; want nothing until the context's 7s", n, text, time.Since(start))
		}
		wantFailure(t, err, failure{kind: afloat.Unavailable, timeout: true, cause: context.DeadlineExceeded})
		s.Close()

		// Close from another goroutine ends a blocked Recv.
		s, _ = p.Stream(context.Background(), &afloat.Request{})
		done := make(chan error, 1)
		go func() { _, err := s.Recv(); done <- err }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Recv returned before Close: %v", err)
		default:
		}
		s.Close()
		if err := <-done; afloat.KindOf(err) != afloat.Unavailable || !errors.Is(err, ErrInjected) {
			t.Fatalf("Recv after Close = %v", err)
		}

		ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start = time.Now()
		_, err = p.Complete(ctx, &afloat.Request{})
		if time.Since(start) != 3*time.Second {
			t.Fatalf("Complete returned after %v, want the context's 3s", time.Since(start))
		}
		wantFailure(t, err, failure{kind: afloat.Unavailable, timeout: true, cause: context.DeadlineExceeded})
		if inner.calls.Load()+inner.streams.Load() != 0 {
			t.Fatal("the wrapped provider was reached")
		}
		start = time.Now()
		if err := p.Probe(context.Background()); err != nil || time.Since(start) != 0 || inner.probes.Load() != 1 {
			t.Fatalf("Probe = %v after %v, want it through at once", err, time.Since(start))
		}
	})
}

// TestFirstTokenSlow: the stream opens at once, its first chunk waits delay and the rest
// flows; a context that ends during the wait fails it as a timeout; a call that is not
// streamed waits delay before it is made; the probe goes through at once.
func TestFirstTokenSlow(t *testing.T) {
	for _, tt := range []struct {
		fault Fault
		delay time.Duration
	}{{Fault{Mode: ModeFirstTokenSlow}, 5 * time.Second}, {Fault{Mode: ModeFirstTokenSlow, Delay: 1500 * time.Millisecond}, 1500 * time.Millisecond}} {
		t.Run(tt.delay.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner := &streaming{chunks: 3}
				p := Wrap("gigachat-pro", inner, nil)
				_ = p.Set(tt.fault)
				start := time.Now()
				s, err := p.Stream(context.Background(), &afloat.Request{})
				if err != nil || time.Since(start) != 0 || inner.streams.Load() != 1 {
					t.Fatalf("Stream = %v after %v and %d wrapped streams, want the wrapped stream at once", err, time.Since(start), inner.streams.Load())
				}
				c, err := s.Recv()
				if err != nil || c.Delta != "c1 " || time.Since(start) != tt.delay {
					t.Fatalf("first chunk %q, %v after %v; want c1 after %v", c.Delta, err, time.Since(start), tt.delay)
				}
				text, _, err := drain(s)
				if err != io.EOF || text != "c2 c3 " || time.Since(start) != tt.delay {
					t.Fatalf("rest %q, %v after %v; want c2 c3 at once", text, err, time.Since(start))
				}
				s.Close()
				if inner.closed.Load() != 1 {
					t.Error("Close did not close the wrapped stream")
				}

				start = time.Now()
				if resp, err := p.Complete(context.Background(), &afloat.Request{}); err != nil || resp.Content != `{"ok":true}` || time.Since(start) != tt.delay {
					t.Fatalf("Complete = %+v, %v after %v; want the answer after %v", resp, err, time.Since(start), tt.delay)
				}
				start = time.Now()
				if err := p.Probe(context.Background()); err != nil || time.Since(start) != 0 {
					t.Fatalf("Probe = %v after %v, want it through at once", err, time.Since(start))
				}
			})
		})
	}

	t.Run("context ends first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			inner := &streaming{chunks: 3}
			p := Wrap("gigachat-pro", inner, nil)
			_ = p.Set(Fault{Mode: ModeFirstTokenSlow, Delay: 10 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			s, _ := p.Stream(ctx, &afloat.Request{})
			_, err := s.Recv()
			if time.Since(start) != 2*time.Second {
				t.Fatalf("Recv returned after %v, want the context's 2s", time.Since(start))
			}
			wantFailure(t, err, failure{kind: afloat.Unavailable, timeout: true, cause: context.DeadlineExceeded})
			if _, again := s.Recv(); !afloat.IsTimeout(again) {
				t.Errorf("Recv after the timeout = %v, want the timeout again", again)
			}
			s.Close()
			if inner.closed.Load() != 1 {
				t.Error("Close did not close the wrapped stream")
			}
		})
	})
}

// TestFlapPhases: down for down, up for up, repeating from the Set on the provider's clock;
// probes fail while down; SetUntil counts the phases from when the fault was set where it
// was set, and passing the same fault again keeps them.
func TestFlapPhases(t *testing.T) {
	clk := clockwork.NewFakeClock()
	inner := &streaming{chunks: 1}
	p := Wrap("gigachat-pro", inner, clk)
	if err := p.Set(Fault{Mode: ModeFlap, Down: 10 * time.Second, Up: 5 * time.Second, Status: 502}); err != nil {
		t.Fatal(err)
	}
	down := failure{status: 502, kind: afloat.Unavailable, transient: true}
	check := func(at time.Duration, wantDown bool) {
		t.Helper()
		_, err := p.Complete(context.Background(), &afloat.Request{})
		perr := p.Probe(context.Background())
		_, serr := p.Stream(context.Background(), &afloat.Request{})
		if !wantDown {
			if err != nil || perr != nil || serr != nil {
				t.Fatalf("at %v (up): Complete %v, Probe %v, Stream %v", at, err, perr, serr)
			}
			return
		}
		for _, err := range []error{err, perr, serr} {
			wantFailure(t, err, down)
		}
	}
	start := clk.Now()
	for _, step := range []struct {
		at   time.Duration
		down bool
	}{
		{0, true}, {10*time.Second - time.Millisecond, true}, {10 * time.Second, false}, {15*time.Second - time.Millisecond, false},
		{15 * time.Second, true}, {25 * time.Second, false}, {30 * time.Second, true}, {1000 * 15 * time.Second, true},
		{1000*15*time.Second + 10*time.Second, false},
	} {
		clk.Advance(start.Add(step.at).Sub(clk.Now()))
		check(step.at, step.down)
	}

	// Defaults: 10s down, 10s up.
	_ = p.Set(Fault{Mode: ModeFlap})
	for i, wantDown := range []bool{true, false, true, false} {
		_, err := p.Complete(context.Background(), &afloat.Request{})
		if (err != nil) != wantDown {
			t.Fatalf("default phases at %ds: %v, want down %v", i*10, err, wantDown)
		}
		clk.Advance(10 * time.Second)
	}

	// Another replica hears of the fault 12s after it was set: it is up there too, and
	// hearing of it again does not restart the phases.
	f := Fault{Mode: ModeFlap, TTL: 15 * time.Minute}
	setAt := clk.Now()
	replica := Wrap("gigachat-pro", inner, clk)
	clk.Advance(12 * time.Second)
	if err := replica.SetUntil(f, setAt.Add(f.TTL)); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Complete(context.Background(), &afloat.Request{}); err != nil {
		t.Fatalf("12s after the Set: %v, want up", err)
	}
	clk.Advance(8 * time.Second) // 20s: down again
	_ = replica.SetUntil(f, setAt.Add(f.TTL).Truncate(time.Millisecond))
	if _, err := replica.Complete(context.Background(), &afloat.Request{}); err == nil {
		t.Fatal("20s after the Set: up, want down")
	}
	// Without a TTL the phases count from when the replica heard of it, and keep counting.
	noTTL := Fault{Mode: ModeFlap, Status: 500}
	_ = replica.SetUntil(noTTL, time.Time{})
	clk.Advance(10 * time.Second)
	_ = replica.SetUntil(noTTL, time.Time{})
	if _, err := replica.Complete(context.Background(), &afloat.Request{}); err != nil {
		t.Fatalf("10s after SetUntil, passed again: %v, want up", err)
	}
}

// TestErrorRateShare: a call fails when its draw is below rate; over 1000 calls with a seeded
// source about rate of them fail; probes draw as calls do.
func TestErrorRateShare(t *testing.T) {
	t.Run("draws", func(t *testing.T) {
		draws := []float64{0.1, 0.5, 0.2999, 0.3, 0.99, 0}
		i := 0
		next := func() float64 { i++; return draws[i-1] }
		inner := &streaming{chunks: 1}
		p := Wrap("gigachat-pro", inner, nil, WithRand(next))
		_ = p.Set(Fault{Mode: ModeErrorRate, Rate: 0.3})
		var got []bool
		for range 4 {
			_, err := p.Complete(context.Background(), &afloat.Request{})
			if err != nil {
				wantFailure(t, err, unavailable)
			}
			got = append(got, err != nil)
		}
		if want := []bool{true, false, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("failed %v, want %v for draws %v at rate 0.3", got, want, draws[:4])
		}
		if err := p.Probe(context.Background()); err != nil {
			t.Fatalf("Probe with draw 0.99: %v, want through", err)
		}
		if _, err := p.Stream(context.Background(), &afloat.Request{}); err == nil {
			t.Fatal("Stream with draw 0: opened, want the failure")
		}
		if inner.calls.Load() != 2 || inner.probes.Load() != 1 || inner.streams.Load() != 0 {
			t.Fatalf("%d calls, %d probes, %d streams reached the wrapped provider, want 2, 1, 0", inner.calls.Load(), inner.probes.Load(), inner.streams.Load())
		}
	})

	for _, rate := range []float64{0.05, 0.3, 0.5, 1} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			inner := &counting{}
			p := Wrap("gigachat-pro", inner, nil, WithRand(rand.New(rand.NewPCG(1, 2)).Float64))
			_ = p.Set(Fault{Mode: ModeErrorRate, Rate: rate})
			failed := 0
			for range 1000 {
				if _, err := p.Complete(context.Background(), &afloat.Request{}); err != nil {
					failed++
				}
			}
			// Three standard deviations of a binomial draw of 1000.
			if want, sd := 1000*rate, math.Sqrt(1000*rate*(1-rate)); math.Abs(float64(failed)-want) > 3*sd {
				t.Fatalf("%d of 1000 calls failed, want %v ± %.0f", failed, want, 3*sd)
			}
			if int64(1000-failed) != inner.calls.Load() {
				t.Fatalf("%d calls reached the wrapped provider, want the %d that passed", inner.calls.Load(), 1000-failed)
			}
		})
	}
}

// TestNewModesJSON: every mode's fields round-trip through JSON, durations as Go durations,
// as State and the admin API show them.
func TestNewModesJSON(t *testing.T) {
	tests := []struct {
		fault Fault
		json  string
	}{
		{Fault{Mode: ModeReset}, `{"mode":"reset"}`},
		{Fault{Mode: ModeRateLimited, RetryAfter: 2 * time.Second}, `{"mode":"rate_limited","retry_after":"2s"}`},
		{Fault{Mode: ModeStreamCut, AfterChunks: 40, TTL: time.Minute}, `{"mode":"stream_cut","after_chunks":40,"ttl":"1m0s"}`},
		{Fault{Mode: ModeStreamStall}, `{"mode":"stream_stall"}`},
		{Fault{Mode: ModeFirstTokenSlow, Delay: 2500 * time.Millisecond}, `{"mode":"first_token_slow","delay":"2.5s"}`},
		{Fault{Mode: ModeFlap, Status: 502, Down: 30 * time.Second, Up: time.Minute}, `{"mode":"flap","status":502,"down":"30s","up":"1m0s"}`},
		{Fault{Mode: ModeErrorRate, Status: 429, Rate: 0.25, TTL: 15 * time.Minute}, `{"mode":"error_rate","status":429,"rate":0.25,"ttl":"15m0s"}`},
		{Fault{Mode: ModeErrorRate, Rate: 1}, `{"mode":"error_rate","rate":1}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault.Mode), func(t *testing.T) {
			p := Wrap("p", &counting{}, clockwork.NewFakeClock())
			if err := p.Set(tt.fault); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(p.State().Fault)
			if err != nil || string(b) != tt.json {
				t.Fatalf("marshal = %s, %v; want %s", b, err, tt.json)
			}
			var back Fault
			if err := json.Unmarshal(b, &back); err != nil || back != tt.fault {
				t.Fatalf("unmarshal %s = %+v, %v; want %+v", b, back, err, tt.fault)
			}
			if err := back.Validate(); err != nil {
				t.Fatalf("a fault read back is invalid: %v", err)
			}
		})
	}
}

// TestNewModesInvalid: every field is checked, and each error names the field and what is
// allowed; a field the mode does not take is an error, even when written as zero.
func TestNewModesInvalid(t *testing.T) {
	tests := []struct {
		body string
		want []string // in the error
	}{
		{`{"mode":"explode"}`, []string{`"explode"`, "unavailable, timeout, slow, malformed, reset, rate_limited, stream_cut, stream_stall, first_token_slow, flap or error_rate"}},
		{`{"mode":"unavailable","after_chunks":3}`, []string{"after_chunks", "mode unavailable", "takes status and ttl"}},
		{`{"mode":"unavailable","after_chunks":0}`, []string{"after_chunks", "mode unavailable"}},
		{`{"mode":"reset","status":503}`, []string{"status", "mode reset", "only ttl"}},
		{`{"mode":"timeout","delay":"1s"}`, []string{"delay", "mode timeout", "only ttl"}},
		{`{"mode":"stream_stall","after_chunks":2}`, []string{"after_chunks", "mode stream_stall", "only ttl"}},
		{`{"mode":"slow","retry_after":"1s"}`, []string{"retry_after", "mode slow", "takes delay"}},
		{`{"mode":"rate_limited","status":429}`, []string{"status", "mode rate_limited", "takes retry_after"}},
		{`{"mode":"flap","rate":0.5}`, []string{"rate", "mode flap", "takes status, down, up"}},
		{`{"mode":"error_rate","rate":0.5,"up":"1s"}`, []string{"up", "mode error_rate", "takes status, rate"}},
		{`{"mode":"first_token_slow","after_chunks":1}`, []string{"after_chunks", "takes delay"}},
		{`{"status":503}`, []string{"status", "needs a mode", "error_rate"}},
		{`{"mode":"error_rate"}`, []string{"rate", "required", "0 < rate ≤ 1"}},
		{`{"mode":"error_rate","rate":0}`, []string{"rate", "required", "0 < rate ≤ 1"}},
		{`{"mode":"error_rate","rate":1.5}`, []string{"rate 1.5", "0 < rate ≤ 1"}},
		{`{"mode":"error_rate","rate":-0.1}`, []string{"rate -0.1", "0 < rate ≤ 1"}},
		{`{"mode":"error_rate","rate":0.5,"status":200}`, []string{"status 200", "400–599"}},
		{`{"mode":"flap","status":302}`, []string{"status 302", "400–599"}},
		{`{"mode":"stream_cut","after_chunks":0}`, []string{"after_chunks 0", "≥ 1", "leave it out for 3"}},
		{`{"mode":"stream_cut","after_chunks":-2}`, []string{"after_chunks -2", "≥ 1"}},
		{`{"mode":"stream_cut","after_chunks":1.5}`, []string{"after_chunks"}},
		{`{"mode":"rate_limited","retry_after":"0s"}`, []string{"retry_after 0s", "positive", "30s"}},
		{`{"mode":"rate_limited","retry_after":"-1s"}`, []string{"retry_after -1s", "positive"}},
		{`{"mode":"rate_limited","retry_after":"soon"}`, []string{"retry_after"}},
		{`{"mode":"rate_limited","retry_after":30}`, []string{"retry_after"}},
		{`{"mode":"flap","down":"0s"}`, []string{"down 0s", "positive", "10s"}},
		{`{"mode":"flap","up":"-5s"}`, []string{"up -5s", "positive"}},
		{`{"mode":"flap","up":"later"}`, []string{"up"}},
		{`{"mode":"first_token_slow","delay":"0s"}`, []string{"delay 0s", "positive", "5s"}},
		{`{"mode":"first_token_slow","delay":"-1s"}`, []string{"delay -1s", "positive"}},
		{`{"mode":"flap","dwon":"5s"}`, []string{"unknown field", "dwon"}},
		{`{"mode":"stream_cut","ttl":"0s"}`, []string{"ttl 0s", "positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var f Fault
			err := json.Unmarshal([]byte(tt.body), &f)
			if err == nil {
				err = f.Validate()
			}
			if err == nil {
				t.Fatalf("accepted as %+v", f)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	// The same checks hold for a Fault built in Go, which has no JSON to catch a zero.
	for _, bad := range []struct {
		fault Fault
		want  string
	}{
		{Fault{Mode: ModeStreamCut, AfterChunks: -1}, "after_chunks -1 is negative"},
		{Fault{Mode: ModeRateLimited, RetryAfter: -time.Second}, "retry_after -1s is negative"},
		{Fault{Mode: ModeFlap, Down: -time.Second}, "down -1s is negative"},
		{Fault{Mode: ModeFlap, Up: -time.Second}, "up -1s is negative"},
		{Fault{Mode: ModeFirstTokenSlow, Delay: -time.Second}, "delay -1s is negative"},
		{Fault{Mode: ModeErrorRate, Rate: math.NaN()}, "0 < rate ≤ 1"},
		{Fault{Mode: ModeErrorRate}, "rate is required"},
		{Fault{Mode: ModeReset, TTL: -time.Second}, "ttl -1s is negative"},
		{Fault{Mode: ModeUnavailable, Delay: time.Second}, "delay does not apply to mode unavailable"},
		{Fault{Mode: ModeMalformed, Rate: 0.5}, "rate does not apply to mode malformed"},
	} {
		p := Wrap("p", &counting{}, nil)
		if err := p.Set(bad.fault); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Set(%+v) = %v, want an error saying %q", bad.fault, err, bad.want)
		}
		if err := p.SetUntil(bad.fault, time.Time{}); err == nil {
			t.Errorf("SetUntil(%+v) accepted it", bad.fault)
		}
		if p.Fault() != (Fault{}) {
			t.Errorf("a refused fault is in force: %+v", p.Fault())
		}
	}
}

// TestTTLAppliesToNewModes: each new mode clears itself once its TTL has passed, and calls
// then go through.
func TestTTLAppliesToNewModes(t *testing.T) {
	for _, f := range []Fault{
		{Mode: ModeReset}, {Mode: ModeRateLimited}, {Mode: ModeStreamCut}, {Mode: ModeStreamStall},
		{Mode: ModeFirstTokenSlow}, {Mode: ModeFlap}, {Mode: ModeErrorRate, Rate: 1},
	} {
		t.Run(string(f.Mode), func(t *testing.T) {
			clk := clockwork.NewFakeClock()
			inner := &streaming{chunks: 5}
			p := Wrap("gigachat-pro", inner, clk)
			f.TTL = time.Minute
			if err := p.Set(f); err != nil {
				t.Fatal(err)
			}
			if st := p.State(); st.Fault != f || st.Remaining != time.Minute {
				t.Fatalf("state %+v", st)
			}
			clk.Advance(time.Minute)
			if st := p.State(); st != (State{}) {
				t.Fatalf("state %+v after the TTL, want none", st)
			}
			// Neither hangs nor waits: the fake clock stands still.
			if resp, err := p.Complete(context.Background(), &afloat.Request{}); err != nil || resp.Content != `{"ok":true}` {
				t.Fatalf("Complete after the TTL = %+v, %v", resp, err)
			}
			s, err := p.Stream(context.Background(), &afloat.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if text, _, err := drain(s); err != io.EOF || text != "c1 c2 c3 c4 c5 " {
				t.Fatalf("stream after the TTL: %q, %v", text, err)
			}

			// SetUntil with an expiry that has passed clears it as well.
			if err := p.SetUntil(f, clk.Now()); err != nil || p.Fault() != (Fault{}) {
				t.Fatalf("SetUntil of an expired fault: %v, in force %+v", err, p.Fault())
			}
		})
	}
}
