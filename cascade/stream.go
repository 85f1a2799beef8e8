package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
)

// stream makes one streamed attempt on a tier: the gates, then the stream, with the read
// timeout bounding the wait for the first chunk and then each gap between chunks. It
// returns nil before any chunk was emitted (the next tier may answer); after that, the
// assembled response, with a *StreamError or emit's error when the stream did not end
// cleanly.
func (e *Engine) stream(ctx context.Context, tr *tier, req *afloat.Request, log *afloat.Result[json.RawMessage], emit EmitFunc) (*afloat.Response, error) {
	clk := e.clock
	u := tr.up
	sp, canStream := u.p.(afloat.Streamer)
	if !canStream {
		resp, outcome := e.call(ctx, tr, req, false, log)
		if outcome != afloat.OutcomeOK {
			return nil, nil
		}
		tr.attempts[afloat.OutcomeOK].Inc()
		uu := resp.Usage
		return resp, emit(u.name, tr.idx, afloat.Chunk{Delta: resp.Content, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Usage: &uu})
	}
	permit, err := u.br.Allow(ctx)
	if err != nil {
		e.addAttempt(log, tr, afloat.Attempt{Outcome: afloat.OutcomeCircuitOpen})
		return nil, nil
	}
	read := tr.streamEst.ReadTimeout()
	timeout, ok := latency.AttemptTimeout(ctx, clk, read, u.minAttempt)
	if !ok {
		permit.Cancel(ctx)
		e.addAttempt(log, tr, afloat.Attempt{Outcome: afloat.OutcomeDeadline})
		return nil, nil
	}
	if !u.acquire() {
		permit.Cancel(ctx)
		e.addAttempt(log, tr, afloat.Attempt{Outcome: afloat.OutcomeBulkhead})
		return nil, nil
	}
	defer u.release()
	u.budget.call()

	began := clk.Now()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	var cut atomic.Bool
	timer := clk.AfterFunc(timeout, func() {
		cut.Store(true)
		scancel()
	})
	defer timer.Stop()

	// failed records a failed stream and whether it may count against the provider.
	failed := func(err error, took time.Duration, first bool) error {
		if cut.Load() && !afloat.IsTimeout(err) {
			err = &afloat.ProviderError{Provider: u.name, Kind: afloat.Unavailable, Timeout: true, Err: err}
		}
		outcome := afloat.OutcomeError(err)
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			// The client left: no outcome of the provider's to count, as in call.
			permit.Cancel(ctx)
			e.addAttempt(log, tr, afloat.Attempt{Outcome: afloat.OutcomeDeadline, Latency: took, Error: "caller cancelled"})
			return err
		case notProviders(ctx, cut.Load() && timeout < read):
			permit.Cancel(ctx)
		default:
			permit.Done(ctx, err)
			if first && cut.Load() && timeout == read {
				tr.streamEst.ObserveTimeout(took)
			}
		}
		e.addAttempt(log, tr, afloat.Attempt{Outcome: outcome, Latency: took, Error: err.Error()})
		return err
	}

	s, err := sp.Stream(sctx, req)
	if err != nil {
		failed(err, clk.Since(began), true)
		return nil, nil
	}
	defer s.Close()
	var b strings.Builder
	resp := &afloat.Response{}
	emitted := false
	var firstAt time.Duration
	for {
		c, err := s.Recv()
		if !timer.Stop() && err == nil {
			// The timer fired as the chunk arrived: the stream's context is gone already.
			err = &afloat.ProviderError{Provider: u.name, Kind: afloat.Unavailable, Timeout: true, Err: context.Canceled}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			err = failed(err, clk.Since(began), !emitted)
			if !emitted {
				return nil, nil
			}
			// After the first byte no other tier may answer: the stream is cut.
			resp.Content = b.String()
			e.account(tr, log, resp)
			return resp, &StreamError{Provider: u.name, Err: err}
		}
		if c.Usage != nil {
			resp.Usage = *c.Usage
		}
		if c.FinishReason != "" {
			resp.FinishReason = c.FinishReason
		}
		resp.ToolCalls = append(resp.ToolCalls, c.ToolCalls...)
		b.WriteString(c.Delta)
		if emitted || c.Delta != "" || len(c.ToolCalls) > 0 || c.FinishReason != "" {
			if !emitted {
				emitted, firstAt = true, clk.Since(began)
			}
			if err := emit(u.name, tr.idx, c); err != nil {
				permit.Cancel(ctx) // the client left: nothing to say about the provider
				resp.Content = b.String()
				e.account(tr, log, resp)
				return resp, err
			}
		}
		// Wait for the next chunk at most the read timeout: a stalled stream is cut.
		timer.Reset(read)
	}
	took := clk.Since(began)
	resp.Content = b.String()
	permit.Done(ctx, nil)
	if !emitted {
		firstAt = took
	}
	tr.streamEst.Observe(firstAt)
	tr.latency.Observe(took.Seconds())
	e.account(tr, log, resp)
	e.addAttempt(log, tr, afloat.Attempt{Outcome: afloat.OutcomeOK, Latency: took})
	tr.attempts[afloat.OutcomeOK].Inc()
	if !emitted {
		// An empty answer still finishes the stream.
		usage := resp.Usage
		if err := emit(u.name, tr.idx, afloat.Chunk{FinishReason: resp.FinishReason, Usage: &usage}); err != nil {
			return resp, err
		}
	}
	return resp, nil
}
