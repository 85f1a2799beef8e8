package httpx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/afloat-dev/afloat"
)

// Decoder turns one vendor's stream events into chunks, for a Stream.
type Decoder interface {
	// Decode turns one event into a chunk; emit is false when the event carried nothing a
	// caller needs (a ping, a fragment of a tool call). An error ends the stream with it.
	// io.EOF ends it cleanly at the vendor's end marker ([DONE], message_stop), after ch
	// when emit is set, as io.Reader returns data with io.EOF.
	Decode(Event) (ch afloat.Chunk, emit bool, err error)
	// Finished reports whether the answer is whole (a finish reason was seen), so that a
	// body that ends without the end marker ends the stream cleanly.
	Finished() bool
}

// Stream is the afloat.Stream of a 2xx streamed response: it reads events with Next, hands
// each to the Decoder, and turns the ways a body fails into errors of the provider. The
// error that ends a stream is returned again by every later Recv. Set the exported fields
// before the first Recv. It is not safe for concurrent use, except that Close may be called
// from another goroutine to abort a blocked Recv.
type Stream struct {
	// Provider names the provider in errors.
	Provider string
	// Response is the streamed response; its body is read by Next and closed by Close.
	Response *http.Response
	// Next returns the next event of the body, io.EOF at its end, or the reader's error.
	Next func() (Event, error)
	// MaxLine is Next's bound on one line, for the error of a longer one.
	MaxLine int
	// End names what a whole answer ends with ("[DONE]"), for the error of a body cut short.
	End string
	// Decoder turns the events into chunks.
	Decoder Decoder

	eof       bool
	err       error
	closeOnce sync.Once
}

// Recv returns the next chunk, io.EOF after the last one, or the error that ended the
// stream: a body cut short or holding a line over MaxLine is an Unavailable BodyError, a
// failed read (a reset, a cancelled context) a TransportError, and the Decoder's errors are
// its own.
func (s *Stream) Recv() (afloat.Chunk, error) {
	for {
		if s.err != nil {
			return afloat.Chunk{}, s.err
		}
		if s.eof {
			return afloat.Chunk{}, io.EOF
		}
		ev, err := s.Next()
		switch {
		case errors.Is(err, io.EOF) && s.Decoder.Finished():
			s.eof = true
			continue
		case errors.Is(err, io.EOF):
			s.err = BodyError(s.Provider, s.Response.StatusCode, fmt.Errorf("stream ended before %s: %w", s.End, io.ErrUnexpectedEOF))
			continue
		case errors.Is(err, bufio.ErrTooLong):
			s.err = BodyError(s.Provider, s.Response.StatusCode, fmt.Errorf("stream line exceeds %d bytes: %w", s.MaxLine, err))
			continue
		case err != nil:
			s.err = TransportError(s.Provider, err)
			continue
		}
		ch, emit, err := s.Decoder.Decode(ev)
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			s.err = err
			continue
		}
		if emit {
			return ch, nil
		}
	}
}

// Close closes the body; it is safe to call more than once and from another goroutine.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() { s.Response.Body.Close() })
	return nil
}
