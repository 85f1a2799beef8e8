package afloat

import "context"

type requestIDKey struct{}

// WithRequestID returns a ctx that carries the id of the request a call serves (the
// gateway's X-Request-Id): log lines written with ctx carry it as request_id, and the
// gateway's envelope as "request_id".
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id ctx carries, or "".
func RequestID(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey{}).(string)
	return s
}
