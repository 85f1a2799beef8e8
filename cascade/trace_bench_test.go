package cascade

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// BenchmarkTracing is BenchmarkHappyPath's call (tier 0 answers) without a TracerProvider
// (the default: no span at all), with OpenTelemetry's no-op provider, with an SDK provider
// that samples nothing, and with one that records every span (a call span and an attempt
// span, to an in-memory exporter).
func BenchmarkTracing(b *testing.B) {
	recorded := tracetest.NewInMemoryExporter()
	for _, bc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", nil},
		{"noop", noop.NewTracerProvider()},
		{"sdk_never_sampled", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))},
		{"sdk_recorded", sdktrace.NewTracerProvider(sdktrace.WithSyncer(recorded))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{Clock: clockwork.NewRealClock(), TracerProvider: bc.tp}
			tc := TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema), Heuristic: triageRules}
			for i := range 3 {
				name := "p" + string(rune('0'+i))
				cfg.Providers = append(cfg.Providers, ProviderConfig{Name: name, System: "openai", Model: "m",
					Provider: static{&afloat.Response{Content: validAnswer, Usage: afloat.Usage{InputTokens: 120, OutputTokens: 30}}}})
				tc.Cascade = append(tc.Cascade, Tier{Provider: name, Prompt: mustPrompt(b, "triage/"+name+".v1.tmpl")})
			}
			e, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			task, err := e.Task(tc)
			if err != nil {
				b.Fatal(err)
			}
			ctx := afloat.WithRequestID(context.Background(), "bench")
			b.ReportAllocs()
			for b.Loop() {
				res, err := task.RunJSON(ctx, ticket)
				if err != nil || res.Source != afloat.SourceModel {
					b.Fatal(res, err)
				}
				recorded.Reset()
			}
		})
	}
}
