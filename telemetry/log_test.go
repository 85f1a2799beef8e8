package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/afloat-dev/afloat"
)

// TestLogHandler: a record logged with a context carries its request id and span; one
// without passes unchanged; wrapping twice adds them once; With keeps them.
func TestLogHandler(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(afloat.WithRequestID(context.Background(), "req-1"),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	var buf bytes.Buffer
	log := slog.New(LogHandler(LogHandler(slog.NewJSONHandler(&buf, nil)))).With("component", "test")
	line := func() map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", buf.String(), err)
		}
		buf.Reset()
		return m
	}
	log.InfoContext(ctx, "with")
	if m := line(); m["request_id"] != "req-1" || m["trace_id"] != tid.String() || m["span_id"] != sid.String() || m["component"] != "test" {
		t.Errorf("line %v: want request_id, trace_id, span_id and the logger's own attribute", m)
	}
	log.InfoContext(ctx, "again")
	if raw := buf.String(); bytes.Count([]byte(raw), []byte(`"request_id"`)) != 1 {
		t.Errorf("line %s: request_id not exactly once", raw)
	}
	buf.Reset()
	log.Info("without")
	if m := line(); m["request_id"] != nil || m["trace_id"] != nil {
		t.Errorf("line %v: nothing to add, want none", m)
	}
}
