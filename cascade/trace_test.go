package cascade

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
)

// remoteParent is the span of a caller that sent a traceparent: the call's span continues it.
func remoteParent(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(t.Context(), sc), sc
}

// tracedFixture is newFixture with spans going to an in-memory exporter, the providers named
// as openai models m0, m1, ...
func tracedFixture(t *testing.T, mod func(*Config), fns ...func(context.Context, *afloat.Request, int) (*afloat.Response, error)) (*fixture, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	fx := newFixture(t, func(c *Config) {
		c.TracerProvider = tp
		for i := range c.Providers {
			c.Providers[i].System, c.Providers[i].Model = "openai", "m"+string(rune('0'+i))
		}
		if mod != nil {
			mod(c)
		}
	}, fns...)
	return fx, exp
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs fails for each attribute of want the span lacks or holds another value of.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	got := attrs(s)
	for _, kv := range want {
		if v, ok := got[kv.Key]; !ok || v != kv.Value {
			t.Errorf("%s: %s = %v (present %v), want %v", s.Name, kv.Key, v.Emit(), ok, kv.Value.Emit())
		}
	}
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	t.Helper()
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestSpanTreeOfAFallback: a call whose primary fails and whose backup answers is one call
// span, continuing the caller's trace, with two attempt spans under it (the primary's failed,
// with its error and status; the backup's ok, with the model and tokens), and each provider
// is called with its attempt's span in the context, which the adapters send upstream as
// traceparent.
func TestSpanTreeOfAFallback(t *testing.T) {
	var seen [2]trace.SpanContext
	fx, exp := tracedFixture(t, nil,
		func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			seen[0] = trace.SpanContextFromContext(ctx)
			return nil, &afloat.ProviderError{Provider: "p0", Status: 500, Kind: afloat.Unavailable}
		},
		func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			seen[1] = trace.SpanContextFromContext(ctx)
			return &afloat.Response{Content: validAnswer, Model: "m1-2026-01", Usage: afloat.Usage{InputTokens: 100, OutputTokens: 20}}, nil
		})
	task := fx.task(t, nil)
	ctx, parent := remoteParent(t)
	ctx = afloat.WithRequestID(ctx, "req-span-tree")
	res, err := task.RunJSON(ctx, ticket)
	if err != nil || res.Source != afloat.SourceModel || res.Provider != "p1" {
		t.Fatalf("res %+v, err %v: want the backup's answer", res, err)
	}
	if res.RequestID != "req-span-tree" {
		t.Errorf("envelope request id %q, want the context's", res.RequestID)
	}
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans %v, want a call span and two attempt spans", len(spans), spans)
	}
	calls := spanNamed(t, spans, "afloat.task triage")
	if len(calls) != 1 {
		t.Fatalf("call spans %v", calls)
	}
	call := calls[0]
	if call.SpanContext.TraceID() != parent.TraceID() || call.Parent.SpanID() != parent.SpanID() {
		t.Errorf("call span trace %s parent %s, want the caller's trace %s and span %s",
			call.SpanContext.TraceID(), call.Parent.SpanID(), parent.TraceID(), parent.SpanID())
	}
	wantAttrs(t, call, attrTask.String("triage"), attrOperation.String("chat"), attrSource.String("model"),
		attrDegraded.Bool(true), attrReason.String("unavailable"), attrProvider.String("p1"), attrTier.Int(1),
		attrPromptVersion.String("triage/p1/v1"), attrInputTokens.Int(100), attrOutputTokens.Int(20))
	if call.Status.Code != codes.Unset {
		t.Errorf("call status %v: a degraded answer is no error", call.Status)
	}

	primary, backup := spanNamed(t, spans, "afloat.attempt p0"), spanNamed(t, spans, "afloat.attempt p1")
	if len(primary) != 1 || len(backup) != 1 {
		t.Fatalf("attempt spans p0 %v, p1 %v: want one each", primary, backup)
	}
	for i, a := range []tracetest.SpanStub{primary[0], backup[0]} {
		if a.Parent.SpanID() != call.SpanContext.SpanID() || a.SpanContext.TraceID() != parent.TraceID() {
			t.Errorf("%s: parent %s, want the call span %s", a.Name, a.Parent.SpanID(), call.SpanContext.SpanID())
		}
		if a.SpanKind != trace.SpanKindClient {
			t.Errorf("%s: kind %v, want client", a.Name, a.SpanKind)
		}
		if seen[i].SpanID() != a.SpanContext.SpanID() {
			t.Errorf("provider p%d called under span %s, want its attempt's %s", i, seen[i].SpanID(), a.SpanContext.SpanID())
		}
	}
	wantAttrs(t, primary[0], attrSystem.String("openai"), attrOperation.String("chat"), attrRequestModel.String("m0"),
		attrTier.Int(0), attrOutcome.String("unavailable"), attrBreakerState.String("closed"),
		attrPromptVersion.String("triage/p0/v1"), attrTask.String("triage"))
	if primary[0].Status.Code != codes.Error || len(primary[0].Events) == 0 || primary[0].Events[0].Name != "exception" {
		t.Errorf("primary: status %v, events %v: want an error with the exception recorded", primary[0].Status, primary[0].Events)
	}
	wantAttrs(t, backup[0], attrSystem.String("openai"), attrRequestModel.String("m1"), attrResponseModel.String("m1-2026-01"),
		attrTier.Int(1), attrOutcome.String("ok"), attrInputTokens.Int(100), attrOutputTokens.Int(20))
	if backup[0].Status.Code != codes.Unset {
		t.Errorf("backup status %v, want unset", backup[0].Status)
	}
	if !primary[0].EndTime.Before(backup[0].StartTime) && !primary[0].EndTime.Equal(backup[0].StartTime) {
		t.Errorf("the backup's attempt started before the primary's ended")
	}
}

// TestSpanOfASkippedTier: a tier whose breaker is open gets an attempt span of its own,
// outcome circuit_open and breaker open, so that a trace shows why the tier was not asked;
// a skip is no error.
func TestSpanOfASkippedTier(t *testing.T) {
	fx, exp := tracedFixture(t, nil, answer(validAnswer), answer(validAnswer))
	task := fx.task(t, nil)
	if err := fx.eng.Breaker("p0").Force(t.Context(), breaker.StateOpen); err != nil {
		t.Fatal(err)
	}
	if _, err := task.RunJSON(t.Context(), ticket); err != nil {
		t.Fatal(err)
	}
	skipped := spanNamed(t, exp.GetSpans(), "afloat.attempt p0")
	if len(skipped) != 1 {
		t.Fatalf("p0 spans %v", skipped)
	}
	wantAttrs(t, skipped[0], attrOutcome.String("circuit_open"), attrBreakerState.String("open"), attrTier.Int(0))
	if skipped[0].Status.Code != codes.Unset {
		t.Errorf("status %v: a skip is no error", skipped[0].Status)
	}
	call := spanNamed(t, exp.GetSpans(), "afloat.task triage")
	wantAttrs(t, call[0], attrReason.String("circuit_open"), attrDegraded.Bool(true))
}

// TestRouteSpans: a route call is an "afloat.route" span with its attempts under it, a
// stream's too; an exhausted route's span is an error.
func TestRouteSpans(t *testing.T) {
	fx, exp := tracedFixture(t, nil, failWith(500, afloat.Unavailable), answer("hello"))
	r, err := fx.eng.Route(RouteConfig{Name: "support", Criticality: afloat.Assistance,
		Cascade: []RouteTier{{Provider: "p0"}, {Provider: "p1"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hi"}}}
	if _, err := r.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	emit := func(string, int, afloat.Chunk) error { return nil }
	if _, err := r.Stream(t.Context(), req, emit); err != nil {
		t.Fatal(err)
	}
	calls := spanNamed(t, exp.GetSpans(), "afloat.route support")
	if len(calls) != 2 {
		t.Fatalf("route spans %v, want one per call", calls)
	}
	for _, c := range calls {
		wantAttrs(t, c, attrTask.String("support"), attrSource.String("model"), attrProvider.String("p1"), attrDegraded.Bool(true))
	}
	if n := len(spanNamed(t, exp.GetSpans(), "afloat.attempt p1")); n != 2 {
		t.Errorf("%d backup attempt spans, want 2", n)
	}

	fx2, exp2 := tracedFixture(t, nil, failWith(500, afloat.Unavailable))
	r2, err := fx2.eng.Route(RouteConfig{Name: "lonely", Criticality: afloat.Assistance, Cascade: []RouteTier{{Provider: "p0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Complete(t.Context(), req); err == nil {
		t.Fatal("want ErrExhausted")
	}
	ex := spanNamed(t, exp2.GetSpans(), "afloat.route lonely")
	if len(ex) != 1 || ex[0].Status.Code != codes.Error {
		t.Fatalf("exhausted route spans %v, want one with an error status", ex)
	}
}

// TestNoTracerPassesTheCallersTrace: without a TracerProvider no span is made, and the
// provider is called with the caller's own span context, so an incoming traceparent still
// reaches the upstream.
func TestNoTracerPassesTheCallersTrace(t *testing.T) {
	var seen trace.SpanContext
	fx := newFixture(t, nil, func(ctx context.Context, _ *afloat.Request, _ int) (*afloat.Response, error) {
		seen = trace.SpanContextFromContext(ctx)
		return &afloat.Response{Content: validAnswer}, nil
	})
	task := fx.task(t, nil)
	ctx, parent := remoteParent(t)
	if _, err := task.RunJSON(ctx, ticket); err != nil {
		t.Fatal(err)
	}
	if !seen.Equal(parent) {
		t.Errorf("provider saw span context %v, want the caller's %v", seen, parent)
	}
}

// TestAttemptLogLines: each attempt is a debug line carrying the request id and the trace,
// and a breaker that opens is a warning.
func TestAttemptLogLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fx, _ := tracedFixture(t, func(c *Config) {
		c.Logger = log
		c.Providers[0].Breaker.ConsecutiveFailures = 1
	}, failWith(500, afloat.Unavailable), answer(validAnswer))
	task := fx.task(t, nil)
	ctx := afloat.WithRequestID(t.Context(), "req-log-1")
	if _, err := task.RunJSON(ctx, ticket); err != nil {
		t.Fatal(err)
	}
	var attempts, opened int
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch m["msg"] {
		case "attempt":
			attempts++
			if m["level"] != "DEBUG" || m["request_id"] != "req-log-1" || m["trace_id"] == nil || m["span_id"] == nil || m["task"] != "triage" {
				t.Errorf("attempt line %s: want debug, the request id, the trace and the task", line)
			}
		case "circuit state changed":
			opened++
			if m["level"] != "WARN" || m["to"] != "open" {
				t.Errorf("breaker line %s: want a warning", line)
			}
		}
	}
	if attempts != 2 || opened != 1 {
		t.Errorf("%d attempt lines and %d breaker lines in\n%s\nwant 2 and 1", attempts, opened, buf.String())
	}
}
