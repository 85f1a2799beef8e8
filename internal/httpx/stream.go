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

// ErrMalformed marks an event a Decoder could not parse (a chunk cut or garbled by a proxy):
// Stream skips it, counts it and reads on, and the vendor's end marker still decides whether
// the answer is whole. Wrap it with Malformed.
var ErrMalformed = errors.New("malformed stream event")

// Malformed returns the error a Decoder gives for an event whose data it cannot parse.
func Malformed(err error) error { return fmt.Errorf("%w: %w", ErrMalformed, err) }

// Decoder turns one vendor's stream events into chunks, for a Stream.
type Decoder interface {
	// Decode turns one event into a chunk; emit is false when the event carried nothing a
	// caller needs (a ping, a fragment of a tool call). An error holding ErrMalformed skips
	// the event; any other error ends the stream with it (an error event of the provider's
	// is such an error, never a skip). io.EOF ends it cleanly at the vendor's end marker
	// ([DONE], message_stop), after ch when emit is set, as io.Reader returns data with
	// io.EOF.
	Decode(Event) (ch afloat.Chunk, emit bool, err error)
	// Finished reports whether the answer is whole (a finish reason was seen), so that a
	// body that ends without the end marker ends the stream cleanly.
	Finished() bool
}

// Stream is the afloat.Stream of a 2xx streamed response: it reads events with Next, hands
// each to the Decoder, skips (and counts, for afloat.SkipCounter) the events the Decoder
// finds malformed, and turns the ways a body fails into errors of the provider. The error
// that ends a stream is returned again by every later Recv. Set the exported fields
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
	skipped   int
	lastSkip  error // the last malformed event's error, for the error of a body cut short
	closeOnce sync.Once
}

var _ afloat.SkipCounter = (*Stream)(nil)

// Skipped returns how many events were skipped as malformed so far.
func (s *Stream) Skipped() int { return s.skipped }

// Recv returns the next chunk, io.EOF after the last one, or the error that ended the
// stream: a body cut short (before the end marker and before the Decoder finished) or
// holding a line over MaxLine is an Unavailable BodyError, a failed read (a reset, a
// cancelled context) a TransportError, and the Decoder's errors are its own. An event the
// Decoder finds malformed is skipped.
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
		case errors.Is(err, io.EOF) && s.skipped > 0:
			s.err = BodyError(s.Provider, s.Response.StatusCode, fmt.Errorf("stream ended before %s, %d malformed events skipped (last: %v): %w",
				s.End, s.skipped, s.lastSkip, io.ErrUnexpectedEOF))
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
		case errors.Is(err, ErrMalformed):
			s.skipped++
			s.lastSkip = err
			continue
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
