package sim

import (
	"context"
	"io"

	"github.com/afloat-dev/afloat"
)

// streamChunks is how many pieces a streamed answer's text is cut into, at most.
const streamChunks = 4

// Stream answers req as Complete does, with the same latency, faults and answer, and returns
// the answer cut into a few chunks, each naming the model; the last carries the finish
// reason, the tool calls and the usage. Errors follow Complete's contract; Recv never fails.
func (p *Provider) Stream(ctx context.Context, req *afloat.Request) (afloat.Stream, error) {
	resp, err := p.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	return &stream{chunks: split(resp)}, nil
}

func split(resp *afloat.Response) []afloat.Chunk {
	text := []rune(resp.Content)
	n := min(streamChunks, max(len(text), 1))
	chunks := make([]afloat.Chunk, n)
	for i := range chunks {
		chunks[i].Delta = string(text[i*len(text)/n : (i+1)*len(text)/n])
		chunks[i].Model = resp.Model
	}
	u := resp.Usage
	last := &chunks[n-1]
	last.FinishReason, last.ToolCalls, last.Usage = resp.FinishReason, resp.ToolCalls, &u
	return chunks
}

// stream is a finished answer handed out chunk by chunk. It is not safe for concurrent use.
type stream struct {
	chunks []afloat.Chunk
	next   int
	closed bool
}

func (s *stream) Recv() (afloat.Chunk, error) {
	if s.closed || s.next >= len(s.chunks) {
		return afloat.Chunk{}, io.EOF
	}
	c := s.chunks[s.next]
	s.next++
	return c, nil
}

func (s *stream) Close() error {
	s.closed = true
	return nil
}
