package cascade

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/limit"
)

// finishGrace is how long a stream that has sent its finish reason may take to send its usage
// and end marker before it is taken as ended: a provider that never sends [DONE] must not hold
// the answer until the idle timeout.
const finishGrace = 500 * time.Millisecond

// stream runs a streamed attempt: it opens the provider's stream (or, for a provider that
// cannot stream, makes one Complete call and passes its answer as one chunk) and passes each
// chunk to the client. The attempt's timer bounds the wait for the first chunk (the time to
// first chunk learnt for the route, ProviderConfig.FirstToken), then is re-armed with the
// fixed ProviderConfig.StreamIdle for each gap between chunks, so a stalled stream is cut.
// It returns what was received, whether any of it reached the client, and how the stream
// ended: nil for a clean end, a *clientGone when emit failed.
func (a *attempt) stream(ctx context.Context) (*afloat.Response, bool, error) {
	u, tr, emit := a.s.tr.up, a.s.tr, a.s.emit
	var s afloat.Stream
	if sp, ok := u.p.(afloat.Streamer); ok {
		var err error
		if s, err = sp.Stream(ctx, a.s.req); err != nil {
			return nil, false, err
		}
	} else {
		resp, err := u.p.Complete(ctx, a.s.req)
		if err != nil {
			return nil, false, err
		}
		s = afloat.StreamOf(resp)
	}
	defer func() {
		if sc, ok := s.(afloat.SkipCounter); ok {
			a.skipped = sc.Skipped()
		}
		s.Close()
	}()

	var b strings.Builder
	resp := &afloat.Response{}
	emitted := false
	for {
		c, err := s.Recv()
		if err != nil && resp.FinishReason != "" {
			// The answer had finished: whatever ended the stream after it (no end marker
			// within the grace, a reset, the budget), the answer is whole.
			break
		}
		if !a.timer.Stop() && err == nil {
			// The timer fired as the chunk arrived: the stream's context is gone already.
			err = &afloat.ProviderError{Provider: u.name, Kind: afloat.Unavailable, Timeout: true, Err: context.Canceled}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			resp.Content = b.String()
			return resp, emitted, err
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
				emitted, a.sample = true, a.e.clock.Since(a.began)
				a.slot.Observe(a.e.sample(limit.Success)) // the stream holds its slot to the end; its latency is this
			}
			if err := emit(u.name, tr.idx, c); err != nil {
				resp.Content = b.String()
				return resp, true, &clientGone{err}
			}
		}
		// The next gap may last the stream's idle timeout (see attempt.blamed for a gap
		// the budget cuts first); once the answer has finished, only the short wait for a
		// usage chunk and the end marker.
		a.lastChunk = a.e.clock.Now()
		if resp.FinishReason != "" {
			a.timer.Reset(min(finishGrace, u.streamIdle))
		} else {
			a.timer.Reset(u.streamIdle)
		}
	}
	resp.Content = b.String()
	if !emitted {
		// An empty answer still finishes the stream.
		usage := resp.Usage
		if err := emit(u.name, tr.idx, afloat.Chunk{FinishReason: resp.FinishReason, Usage: &usage}); err != nil {
			return resp, true, &clientGone{err}
		}
		emitted = true
	}
	return resp, emitted, nil
}
