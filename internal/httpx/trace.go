package httpx

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// traceContext is the W3C Trace Context propagator (traceparent, tracestate). It holds no
// state: a value, not a global registry.
var traceContext propagation.TraceContext

// injectTrace sets the traceparent (and tracestate) of the span ctx carries on h, so that the
// provider's own traces join the call's: the attempt's span when tracing is on, the caller's
// when only the incoming request carried one. A ctx without a valid span context sets
// nothing. Every call to a model API (a chat, a stream, a probe's models list) is built by
// NewJSONRequest or NewGetRequest, so this is the one place the trace leaves afloat. (GigaChat's
// token exchange, shared by concurrent calls, belongs to none of them and carries none.)
func injectTrace(ctx context.Context, h http.Header) {
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}
