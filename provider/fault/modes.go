package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// Probe applies the fault, then probes the wrapped provider: a provider forced unavailable,
// reset or rate limited fails its probe too, with the same error as its calls; a hanging or
// slow one hangs or waits the same; a flapping one fails while down; and under error_rate
// each probe draws as a call does. ModeMalformed spoils answers, not the models list, and
// the stream modes spoil generation, which a probe does not ask for: their probes go
// through. A wrapped provider that is no afloat.Prober fails every probe as Contract,
// wrapping ErrNoProbe (check CanProbe first).
func (p *Provider) Probe(ctx context.Context) error {
	if _, _, err := p.before(ctx); err != nil {
		return err
	}
	pr, ok := p.inner.(afloat.Prober)
	if !ok {
		return &afloat.ProviderError{Provider: p.name, Kind: afloat.Contract, Err: ErrNoProbe}
	}
	return pr.Probe(ctx)
}

// Complete applies the fault, then calls the wrapped provider if the fault lets it. Of the
// stream modes, a call that is not streamed meets the same incident whole: under
// ModeStreamStall it hangs until ctx ends, under ModeFirstTokenSlow it waits Delay before it
// is made, and under ModeStreamCut it is made (its time and tokens spent) and its answer lost
// to a connection cut mid-body.
func (p *Provider) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	f, resp, err := p.before(ctx)
	if resp != nil || err != nil {
		return resp, err
	}
	switch f.Mode {
	case ModeStreamStall:
		return nil, p.hang(ctx)
	case ModeFirstTokenSlow:
		if err := p.wait(ctx, f.delay()); err != nil {
			return nil, err
		}
	case ModeStreamCut:
		if _, err := p.inner.Complete(ctx, req); err != nil {
			return nil, err
		}
		// As httpx.ReadBody reports a body that ends before its length: a transport error.
		return nil, &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable,
			Err: fmt.Errorf("%w: answer cut short: %w", ErrInjected, io.ErrUnexpectedEOF)}
	}
	return p.inner.Complete(ctx, req)
}

// Stream applies the fault, then streams from the wrapped provider. A provider that cannot
// stream is called as Complete is, fault and all, and answers in one chunk. Under
// ModeStreamStall the stream opens without calling the wrapped provider and its Recv waits
// for ctx to end; under ModeFirstTokenSlow the first Recv waits Delay from the opening;
// under ModeStreamCut the Recv after AfterChunks chunks fails (a shorter answer ends
// cleanly) and closes the wrapped stream.
func (p *Provider) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	sp, ok := p.inner.(afloat.Streamer)
	if !ok {
		resp, err := p.Complete(ctx, req)
		if err != nil {
			return nil, err
		}
		return afloat.StreamOf(resp), nil
	}
	f, resp, err := p.before(ctx)
	if err != nil {
		return nil, err
	}
	if resp != nil {
		return afloat.StreamOf(resp), nil
	}
	if f.Mode == ModeStreamStall {
		return &stalled{provider: p.name, w: watch(ctx)}, nil
	}
	s, err := sp.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	switch f.Mode {
	case ModeFirstTokenSlow:
		return &slowStart{Stream: s, provider: p.name, w: watch(ctx), first: p.clock.NewTimer(f.delay())}, nil
	case ModeStreamCut:
		return &cut{Stream: s, provider: p.name, after: f.afterChunks()}, nil
	}
	return s, nil
}

// before applies the fault ahead of a call, a stream or a probe, reading it once. It returns
// the fault, for the stream modes (which it lets through), and a response to answer with, an
// error to fail with, or neither to go on.
func (p *Provider) before(ctx context.Context) (Fault, *afloat.Response, error) {
	now := p.clock.Now()
	s := p.live(now)
	f := s.f
	switch f.Mode {
	case ModeUnavailable:
		return f, nil, p.statusError(f.status())
	case ModeTimeout:
		return f, nil, p.hang(ctx)
	case ModeSlow:
		return f, nil, p.wait(ctx, f.delay())
	case ModeMalformed:
		return f, &afloat.Response{Content: "I'm sorry, I can't produce that right now. Please try again later.", FinishReason: "stop"}, nil
	case ModeReset:
		return f, nil, &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Err: fmt.Errorf("%w: %w", ErrInjected, syscall.ECONNRESET)}
	case ModeRateLimited:
		return f, nil, &afloat.ProviderError{Provider: p.name, Status: 429, Kind: afloat.Throttled, RetryAfter: f.retryAfter(), Err: ErrInjected}
	case ModeFlap:
		if s.down(now) {
			return f, nil, p.statusError(f.status())
		}
	case ModeErrorRate:
		if p.rand() < f.Rate {
			return f, nil, p.statusError(f.status())
		}
	}
	return f, nil, nil
}

// down reports whether a ModeFlap fault is in a down phase at now: the phases repeat, down
// first, from since. A since ahead of now (set on a replica whose clock runs ahead) counts
// as the start.
func (s *set) down(now time.Time) bool {
	down, up := s.f.phases()
	return max(now.Sub(s.since), 0)%(down+up) < down
}

// statusError is the failure of a call answered with status, classified as the adapters do.
func (p *Provider) statusError(status int) error {
	return &afloat.ProviderError{Provider: p.name, Status: status, Kind: kindOf(status), Err: ErrInjected}
}

// timeoutError is the failure of a call whose context ended while the fault held it.
func (p *Provider) timeoutError(err error) error {
	return &afloat.ProviderError{Provider: p.name, Kind: afloat.Unavailable, Timeout: true, Err: fmt.Errorf("%w: %w", ErrInjected, err)}
}

// hang waits for ctx to end and fails as a timeout.
func (p *Provider) hang(ctx context.Context) error {
	<-ctx.Done()
	return p.timeoutError(ctx.Err())
}

// wait waits d on the provider's clock; it fails as a timeout if ctx ends first.
func (p *Provider) wait(ctx context.Context, d time.Duration) error {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return nil
	case <-ctx.Done():
		return p.timeoutError(ctx.Err())
	}
}

func kindOf(status int) afloat.Kind {
	switch {
	case status == 429:
		return afloat.Throttled
	case status == 401 || status == 402 || status == 403:
		return afloat.Unusable
	case status >= 500 || status == 408:
		return afloat.Unavailable
	}
	return afloat.Contract
}

// watcher tells a stream's Recv, which takes no context, that the call's context has ended
// or the stream was closed. It is safe for concurrent use.
type watcher struct {
	ended chan struct{} // closed once, when the context ends or the stream is closed
	once  sync.Once
	err   error // why ended was closed: the context's error or net.ErrClosed; set before
	stop  func() bool
}

func watch(ctx context.Context) *watcher {
	w := &watcher{ended: make(chan struct{})}
	w.stop = context.AfterFunc(ctx, func() { w.end(ctx.Err()) })
	return w
}

func (w *watcher) end(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ended)
	})
}

func (w *watcher) close() {
	w.stop()
	w.end(net.ErrClosed)
}

// failure is the error of a Recv that ended was closed under: a timeout when the context
// ended, else a stream read after Close.
func (w *watcher) failure(provider string) error {
	if errors.Is(w.err, net.ErrClosed) {
		return &afloat.ProviderError{Provider: provider, Kind: afloat.Unavailable, Err: fmt.Errorf("%w: %w", ErrInjected, w.err)}
	}
	return &afloat.ProviderError{Provider: provider, Kind: afloat.Unavailable, Timeout: true, Err: fmt.Errorf("%w: %w", ErrInjected, w.err)}
}

// stalled is ModeStreamStall's stream: open, silent until its call's context ends. Close may
// be called from another goroutine to end a blocked Recv.
type stalled struct {
	provider string
	w        *watcher
}

func (s *stalled) Recv() (afloat.Chunk, error) {
	<-s.w.ended
	return afloat.Chunk{}, s.w.failure(s.provider)
}

func (s *stalled) Close() error {
	s.w.close()
	return nil
}

// slowStart is ModeFirstTokenSlow's stream: its first Recv waits for the timer first, which
// started as the stream opened, then every Recv reads the wrapped stream. A Recv that the
// call's context ends during the wait fails as a timeout, and so does every later one. Close
// may be called from another goroutine to end a blocked Recv.
type slowStart struct {
	afloat.Stream
	provider string
	w        *watcher
	first    clockwork.Timer
	started  bool // the timer has fired: Recv reads the wrapped stream
}

func (s *slowStart) Recv() (afloat.Chunk, error) {
	if !s.started {
		select {
		case <-s.first.Chan():
			s.started = true
			s.w.stop()
		case <-s.w.ended:
			s.first.Stop()
			return afloat.Chunk{}, s.w.failure(s.provider)
		}
	}
	return s.Stream.Recv()
}

func (s *slowStart) Close() error {
	s.first.Stop()
	s.w.close()
	return s.Stream.Close()
}

func (s *slowStart) Skipped() int { return skipped(s.Stream) }

// cut is ModeStreamCut's stream: it passes after chunks, then fails as a stream whose body
// ended before its end marker (httpx.Stream's BodyError), and closes the wrapped stream.
type cut struct {
	afloat.Stream
	provider string
	after    int
	passed   int
	err      error
}

func (s *cut) Recv() (afloat.Chunk, error) {
	if s.err != nil {
		return afloat.Chunk{}, s.err
	}
	if s.passed == s.after {
		s.Stream.Close()
		s.err = &afloat.ProviderError{Provider: s.provider, Status: 200, Kind: afloat.Unavailable,
			Err: fmt.Errorf("%w: stream cut after %d chunks: %w", ErrInjected, s.after, io.ErrUnexpectedEOF)}
		return afloat.Chunk{}, s.err
	}
	c, err := s.Stream.Recv()
	if err == nil {
		s.passed++
	}
	return c, err
}

func (s *cut) Skipped() int { return skipped(s.Stream) }

// skipped forwards afloat.SkipCounter through a wrapping stream.
func skipped(s afloat.Stream) int {
	if sc, ok := s.(afloat.SkipCounter); ok {
		return sc.Skipped()
	}
	return 0
}

var (
	_ afloat.SkipCounter = (*slowStart)(nil)
	_ afloat.SkipCounter = (*cut)(nil)
)
