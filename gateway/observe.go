package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/propagation"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// RequestIDHeader carries a request's id: taken from the request when it holds a valid one
// (see validRequestID), generated otherwise, and set on every response. The id is in the
// task envelope ("request_id") and on every log line the request writes.
const RequestIDHeader = "X-Request-Id"

// maxRequestID bounds an incoming request id; a longer one is replaced.
const maxRequestID = 128

// traceContext reads the W3C trace context (traceparent, tracestate) of an incoming request,
// so that the call's spans continue the caller's trace. It holds no state.
var traceContext propagation.TraceContext

// observe is the outermost middleware: it continues the caller's trace, gives the request
// its id (in the context, for the envelope and every log line, and on the response), and
// holds the call's note, which the handlers fill and the access log reads.
func (g *Gateway) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Header.Get("Traceparent") != "" {
			ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		ctx = afloat.WithRequestID(ctx, id)
		ctx = context.WithValue(ctx, noteKey{}, &callNote{})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// validRequestID reports whether a caller's request id may be kept: 1 to 128 printable
// ASCII characters (space to tilde). Anything else (empty, too long, a control character,
// non-ASCII) is replaced, so that an id is always safe to log and to echo in a header.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// newRequestID returns 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

type noteKey struct{}

// callNote is what the access log says of the task or route call a request made. The
// request's handler fills it; it is read once the handler returned.
type callNote struct {
	task      string
	source    afloat.Source
	degraded  bool
	reason    afloat.Reason
	provider  string
	latencyMS int64
	answered  bool // source and the rest are set
}

// noteTask notes a task call's envelope for the access log.
func noteTask(ctx context.Context, task string, res *afloat.Result[json.RawMessage]) {
	if n, ok := ctx.Value(noteKey{}).(*callNote); ok {
		n.task = task
		if res.Source != "" {
			n.answered = true
			n.source, n.degraded, n.reason, n.provider = res.Source, res.Degraded, res.Reason, res.Provider
			n.latencyMS = res.Latency.Milliseconds()
		}
	}
}

// noteReply notes a route call's reply (nil when the call could not be made).
func noteReply(ctx context.Context, route string, rep *cascade.Reply) {
	if n, ok := ctx.Value(noteKey{}).(*callNote); ok {
		n.task = route
		if rep != nil {
			n.answered = true
			n.source, n.degraded, n.reason, n.provider = rep.Source, rep.Degraded, rep.Reason, rep.Provider
			n.latencyMS = rep.Latency.Milliseconds()
		}
	}
}

// callAttrs returns the access log's attributes of the call the request made: none for a
// request that made none (admin, reviews, a request refused before its call).
func callAttrs(ctx context.Context) []slog.Attr {
	n, ok := ctx.Value(noteKey{}).(*callNote)
	if !ok || n.task == "" {
		return nil
	}
	attrs := []slog.Attr{slog.String("task", n.task)}
	if n.answered {
		attrs = append(attrs, slog.String("source", string(n.source)), slog.Bool("degraded", n.degraded),
			slog.String("reason", string(n.reason)), slog.String("provider", n.provider), slog.Int64("latency_ms", n.latencyMS))
	}
	return attrs
}
