package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// A streamed route answer, whatever its wire format: OpenAI's chunks (chat.go) or Anthropic's
// events (messages.go). streamRoute runs the route and decides how the stream went; the
// format writes it.

// sse writes server-sent events and remembers what the stream said so far. It is used by one
// handler goroutine.
type sse struct {
	w       http.ResponseWriter
	flusher http.Flusher
	// started: the headers went out, and no other tier may answer any more.
	started bool
	// model is the upstream model streaming now; first the provider that started the stream,
	// and continuedBy the one that took over a cut stream.
	model, first, continuedBy string
	// buf holds one event while it is written, and enc encodes into it: a stream relays
	// thousands of chunks, and reusing both keeps a chunk to the allocations of its data.
	buf bytes.Buffer
	enc *json.Encoder
}

func newSSE(w http.ResponseWriter) *sse {
	f, _ := w.(http.Flusher)
	return &sse{w: w, flusher: f}
}

// track notes the provider and the model of a chunk about to be written.
func (s *sse) track(provider string, c afloat.Chunk) {
	switch {
	case s.first == "":
		s.first = provider
	case provider != s.first && provider != s.continuedBy:
		s.continuedBy, s.model = provider, ""
	}
	if c.Model != "" {
		s.model = c.Model
	}
}

// open sends the headers of an event stream: 200, afloat's headers, the cost as trailers.
func (s *sse) open(source afloat.Source, provider string, degraded bool) {
	h := s.w.Header()
	h["Content-Type"] = headerValue("text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	setAfloatHeaders(h, source, provider, degraded)
	costTrailers(h)
	s.w.WriteHeader(http.StatusOK)
	s.started = true
}

// event writes one event: an "event:" line when name is not empty (Anthropic's format
// names each event; OpenAI's has data lines only), then v as its data, and flushes it.
func (s *sse) event(name string, v any) error {
	s.buf.Reset()
	if name != "" {
		s.buf.WriteString("event: ")
		s.buf.WriteString(name)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("data: ")
	if s.enc == nil {
		s.enc = json.NewEncoder(&s.buf) // as json.Marshal encodes, HTML characters escaped
	}
	if err := s.enc.Encode(v); err != nil { // the value and a newline
		return err
	}
	s.buf.WriteByte('\n')
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	s.flush()
	return nil
}

func (s *sse) flush() {
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

// streamEnd is how a stream that reached its client ended.
type streamEnd int

const (
	// streamWhole: the answer is whole.
	streamWhole streamEnd = iota
	// streamCut: the model's stream was cut after its first chunk and no tier could continue
	// it; the client has part of an answer.
	streamCut
	// streamRefused: the provider stopped its answer under its content policy.
	streamRefused
)

// streamFormat writes a route's streamed answer in one wire format. Its methods return an
// error when the client is gone.
type streamFormat interface {
	// begin writes the opening events, once the headers are out.
	begin() error
	// chunk writes one chunk of the answer (an empty chunk opens an answer with nothing to
	// stream).
	chunk(c afloat.Chunk) error
	// end writes the closing events of a stream that ended as how says. rep holds what was
	// streamed; its Response is nil when nothing was.
	end(rep *cascade.Reply, how streamEnd) error
}

// streamRoute answers with the route's answer streamed in f's format. Until the first chunk
// is written another tier may still answer; a failure before it is answered by failed (an
// error in the API's shape), which reports whether it wrote the answer. A failure after it
// ends the stream as f writes a cut, so that no client takes a cut answer for a whole one.
func (g *Gateway) streamRoute(r *http.Request, route *cascade.Route, req *afloat.Request, s *sse, f streamFormat,
	failed func(rep *cascade.Reply, err error) bool) {
	source, degraded := afloat.SourceModel, false // a model's stream, until a cached answer says otherwise
	emit := func(provider string, tier int, c afloat.Chunk) error {
		s.track(provider, c)
		if !s.started {
			s.open(source, provider, degraded || source == afloat.SourceModel && tier > 0)
			if err := f.begin(); err != nil {
				return err
			}
		}
		return f.chunk(c)
	}
	rep, err := route.Stream(r.Context(), req, emit)
	noteReply(r.Context(), route.Name(), rep)
	if rep != nil && rep.Degraded {
		g.logDegraded(r, route.Name(), rep.Attempts)
	}
	if !s.started {
		if failed(rep, err) {
			return
		}
		var whole afloat.Chunk // an answer with nothing to stream still opens and ends a stream
		if rep.Source == afloat.SourceCache {
			// The route answered from its cache: the answer streams whole, as a cached one.
			source, degraded = rep.Source, rep.Degraded
			setCachedAt(s.w.Header(), rep)
			resp := rep.Response
			whole = afloat.Chunk{Delta: resp.Content, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Model: resp.Model}
		}
		_ = emit(rep.Provider, rep.Tier, whole)
	}
	how := streamWhole
	var se *cascade.StreamError
	switch {
	case r.Context().Err() != nil:
		return // the client left; nobody reads the rest
	case errors.As(err, &se) && afloat.KindOf(se.Err) == afloat.Refused:
		// The provider stopped its own answer under its content policy: not continued, and
		// said as such.
		how = streamRefused
	case errors.As(err, &se):
		g.log.WarnContext(r.Context(), "stream cut after its first chunk", "route", route.Name(), "provider", se.Provider, "err", se.Err)
		how = streamCut
	case err != nil:
		return // the client left, or an error already answered
	}
	if f.end(rep, how) != nil || how == streamCut {
		return
	}
	if rep != nil && rep.Response != nil {
		setCost(s.w.Header(), rep.Response.Usage) // sent as trailers, after the body
	}
}
