package afloat

import (
	"context"
	"io"
)

// Provider is one model endpoint. Adapters translate; they do not retry, break or fall back:
// the cascade composes that.
type Provider interface {
	// Complete sends req and returns the provider's answer. A failure is returned as a
	// *ProviderError whose Kind says whether it is the provider's health (Unavailable,
	// Throttled), its account (Unusable) or the request or answer (Contract). An error of
	// another type is treated as Unavailable. Complete honours ctx's deadline and
	// cancellation, returning promptly once ctx is done.
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Streamer is implemented by providers that can stream. It is optional: the cascade finds it
// by type assertion.
type Streamer interface {
	// Stream starts a streamed call. An error before the first chunk follows Complete's
	// contract; errors while reading come from Stream.Recv.
	Stream(ctx context.Context, req *Request) (Stream, error)
}

// Prober is implemented by providers that have a cheap call telling whether they answer at
// all, billing nothing (their models list). It is optional: the cascade uses it to probe an
// open breaker in the background, so that no user request is spent on a dead provider.
type Prober interface {
	// Probe returns nil when the provider answered, else a failure classified as Complete's.
	Probe(ctx context.Context) error
}

// SkipCounter is implemented by streams that skip events they cannot parse (a malformed
// chunk mid-stream) instead of failing: whether the answer is whole is left to the end
// marker. The cascade reads it once the stream is over, to count the skipped events.
type SkipCounter interface {
	// Skipped returns how many events the stream skipped so far.
	Skipped() int
}

// Stream is an answer arriving in chunks. It is not safe for concurrent use.
type Stream interface {
	// Recv returns the next chunk, or io.EOF after the last one. Any other error, including
	// an error event inside a 200 stream, is a *ProviderError of kind Unavailable unless the
	// provider said otherwise.
	Recv() (Chunk, error)
	// Close releases the connection; it is safe to call more than once.
	Close() error
}

// Chunk is one piece of a streamed answer.
type Chunk struct {
	// Delta is new text (never cumulative, whatever the provider sends).
	Delta        string
	ToolCalls    []ToolCall
	FinishReason string
	// Usage is set on the chunk that carries it, usually the last.
	Usage *Usage
	// Model is the upstream model that answers, on any chunk that names it ("" when the
	// chunk does not say).
	Model string
}

// StreamOf returns a Stream that delivers resp as one chunk, for a provider that cannot
// stream.
func StreamOf(resp *Response) Stream { return &oneChunk{resp: resp} }

type oneChunk struct {
	resp *Response
	done bool
}

func (s *oneChunk) Recv() (Chunk, error) {
	if s.done {
		return Chunk{}, io.EOF
	}
	s.done = true
	u := s.resp.Usage
	return Chunk{Delta: s.resp.Content, ToolCalls: s.resp.ToolCalls, FinishReason: s.resp.FinishReason, Usage: &u, Model: s.resp.Model}, nil
}

func (s *oneChunk) Close() error { return nil }
