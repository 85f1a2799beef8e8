package cascade

import (
	"context"
	"encoding/json"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
)

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/afloat-dev/afloat/cascade"

// Span names: one span per call, one child per attempt (shared/DESIGN.md §8).
const (
	spanTask    = "afloat.task "
	spanRoute   = "afloat.route "
	spanAttempt = "afloat.attempt "
)

// Attributes: OpenTelemetry's GenAI semantic conventions, then afloat's own.
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrSystem        = attribute.Key("gen_ai.system")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")

	attrTask          = attribute.Key("afloat.task") // the task's or route's name, as the metrics' task label
	attrProvider      = attribute.Key("afloat.provider")
	attrTier          = attribute.Key("afloat.tier")
	attrOutcome       = attribute.Key("afloat.outcome")
	attrBreakerState  = attribute.Key("afloat.breaker.state")
	attrReason        = attribute.Key("afloat.reason")
	attrPromptVersion = attribute.Key("afloat.prompt.version")
	attrSource        = attribute.Key("afloat.source")
	attrDegraded      = attribute.Key("afloat.degraded")
	attrReask         = attribute.Key("afloat.reask")
	attrRetry         = attribute.Key("afloat.retry")
)

// newTracer returns the engine's tracer, or nil without a provider: then no span is started
// at all, and a call pays a nil check for tracing.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// noSpan stands in for a call's span when tracing is off. Ending it ends nothing (never the
// caller's own span, which the context may hold).
var noSpan trace.Span = noop.Span{}

// startCall starts the span of one call of the task or route named name; kind is spanTask or
// spanRoute. The span continues the trace ctx carries (the gateway's incoming traceparent).
func (e *Engine) startCall(ctx context.Context, kind, name string) (context.Context, trace.Span) {
	if e.tracer == nil {
		return ctx, noSpan
	}
	ctx, span := e.tracer.Start(ctx, kind+name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(attrOperation.String("chat"), attrTask.String(name))
	}
	return ctx, span
}

// endTask ends a task call's span with its envelope: where the answer came from and why.
func endTask(span trace.Span, res *afloat.Result[json.RawMessage], err error) {
	if span.IsRecording() {
		callAttrs(span, res.Source, res.Degraded, res.Reason, res.Provider, res.Tier, res.Usage)
		if res.PromptVersion != "" {
			span.SetAttributes(attrPromptVersion.String(res.PromptVersion))
		}
		callStatus(span, err)
	}
	span.End()
}

// endRoute ends a route call's span with its reply (nil when the call could not be made).
func endRoute(span trace.Span, rep *Reply, err error) {
	if span.IsRecording() {
		if rep != nil {
			callAttrs(span, rep.Source, rep.Degraded, rep.Reason, rep.Provider, rep.Tier, rep.Usage)
			if rep.Response != nil && rep.Response.Model != "" {
				span.SetAttributes(attrResponseModel.String(rep.Response.Model))
			}
		}
		callStatus(span, err)
	}
	span.End()
}

func callAttrs(span trace.Span, src afloat.Source, degraded bool, reason afloat.Reason, provider string, tier int, u afloat.Usage) {
	span.SetAttributes(attrSource.String(string(src)), attrDegraded.Bool(degraded),
		attrInputTokens.Int(u.InputTokens), attrOutputTokens.Int(u.OutputTokens))
	if reason != "" {
		span.SetAttributes(attrReason.String(string(reason)))
	}
	if provider != "" && tier >= 0 {
		span.SetAttributes(attrProvider.String(provider), attrTier.Int(tier))
	}
}

// callStatus marks a call that returned an error (blocked, the review queue down, a route
// exhausted, a refusal, a stream cut): a degraded answer is an answer, not an error.
func callStatus(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// startAttempt starts the span of an admitted attempt, a child of the call's, and returns
// the context the provider is called with: the traceparent the adapter sends upstream names
// this span. It sets a.span (nil when tracing is off).
func (e *Engine) startAttempt(ctx context.Context, a *attempt) context.Context {
	if e.tracer == nil {
		return ctx
	}
	state := breaker.StateClosed
	if a.permit.Probe() {
		state = breaker.StateHalfOpen
	}
	ctx, a.span = e.tracer.Start(ctx, spanAttempt+a.s.tr.up.name, trace.WithSpanKind(trace.SpanKindClient))
	if a.span.IsRecording() {
		a.span.SetAttributes(attemptAttrs(&a.s, state)...)
	}
	return ctx
}

// attemptAttrs are what an attempt's span knows before the call: who is asked, on which tier,
// with which prompt, and the breaker's state when the attempt was admitted.
func attemptAttrs(s *spec, state breaker.State) []attribute.KeyValue {
	tr, u := s.tr, s.tr.up
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, attrOperation.String("chat"), attrTask.String(tr.scope), attrProvider.String(u.name),
		attrTier.Int(tr.idx), attrBreakerState.String(state.String()))
	if u.system != "" {
		attrs = append(attrs, attrSystem.String(u.system))
	}
	model := u.model
	if s.req != nil && s.req.Model != "" {
		model = s.req.Model
	}
	if model != "" {
		attrs = append(attrs, attrRequestModel.String(model))
	}
	if tr.version != "" {
		attrs = append(attrs, attrPromptVersion.String(tr.version))
	}
	if s.reask {
		attrs = append(attrs, attrReask.Bool(true))
	}
	if s.try > 0 {
		attrs = append(attrs, attrRetry.Int(s.try))
	}
	return attrs
}

// endAttempt ends an admitted attempt's span with how it was settled, and logs the attempt
// at debug level. err is the provider's failure or the contract violation.
func (a *attempt) endAttempt(ctx context.Context, rec afloat.Attempt, resp *afloat.Response, err error) {
	e := a.e
	if span := a.span; span != nil {
		if span.IsRecording() {
			span.SetAttributes(attrOutcome.String(string(rec.Outcome)))
			if resp != nil {
				if resp.Model != "" {
					span.SetAttributes(attrResponseModel.String(resp.Model))
				}
				span.SetAttributes(attrInputTokens.Int(resp.Usage.InputTokens), attrOutputTokens.Int(resp.Usage.OutputTokens))
			}
			if rec.Outcome != afloat.OutcomeOK {
				if err != nil {
					span.RecordError(err)
				}
				span.SetStatus(codes.Error, string(rec.Outcome))
			}
		}
		ctx = trace.ContextWithSpan(ctx, span)
	}
	a.closeSpan()
	e.logAttempt(ctx, a.s.tr, rec)
}

// closeSpan ends the attempt's span if it is still open: once settled, or when the attempt
// is released after a panic that cut its settling short.
func (a *attempt) closeSpan() {
	if a.span != nil {
		a.span.End()
		a.span = nil
	}
}

// skipped records an attempt that a gate refused (circuit, deadline, bulkhead): a span that
// ends as it starts, so that a trace shows why a tier was not asked, and a debug line.
func (e *Engine) skipped(ctx context.Context, s *spec, outcome afloat.Outcome) {
	rec := afloat.Attempt{Outcome: outcome, Reask: s.reask}
	if e.tracer != nil {
		state := breaker.StateClosed
		if outcome == afloat.OutcomeCircuitOpen {
			state = breaker.StateOpen
		}
		var span trace.Span
		ctx, span = e.tracer.Start(ctx, spanAttempt+s.tr.up.name, trace.WithSpanKind(trace.SpanKindClient))
		if span.IsRecording() {
			span.SetAttributes(attemptAttrs(s, state)...)
			span.SetAttributes(attrOutcome.String(string(outcome)))
		}
		span.End()
	}
	e.logAttempt(ctx, s.tr, rec)
}

// logAttempt writes one attempt at debug level. Its error text never holds a credential
// (afloat.Attempt.Error).
func (e *Engine) logAttempt(ctx context.Context, tr *tier, rec afloat.Attempt) {
	if !e.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("task", tr.scope), slog.String("provider", tr.up.name), slog.Int("tier", tr.idx),
		slog.String("outcome", string(rec.Outcome)), slog.Duration("latency", rec.Latency),
	}
	if rec.Reask {
		attrs = append(attrs, slog.Bool("reask", true))
	}
	if tr.version != "" {
		attrs = append(attrs, slog.String("prompt_version", tr.version))
	}
	if rec.Error != "" {
		attrs = append(attrs, slog.String("error", rec.Error))
	}
	e.log.LogAttrs(ctx, slog.LevelDebug, "attempt", attrs...)
}
