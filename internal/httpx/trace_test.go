package httpx

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestRequestsCarryTraceparent: the model requests built here carry the traceparent of the
// span in their context (the attempt's), and none without one.
func TestRequestsCarryTraceparent(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	post, err := NewJSONRequest(ctx, "http://127.0.0.1:1/v1/chat/completions", []byte(`{}`), true)
	if err != nil {
		t.Fatal(err)
	}
	get, err := NewGetRequest(ctx, "http://127.0.0.1:1/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []string{post.Header.Get("Traceparent"), get.Header.Get("Traceparent")} {
		if got != want {
			t.Errorf("traceparent %q, want %q", got, want)
		}
	}
	bare, err := NewJSONRequest(context.Background(), "http://127.0.0.1:1/v1/chat/completions", []byte(`{}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := bare.Header.Get("Traceparent"); got != "" {
		t.Errorf("traceparent %q without a span, want none", got)
	}
}
