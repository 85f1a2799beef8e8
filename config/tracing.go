package config

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingShutdown bounds the flush of the spans still queued when the Runtime closes.
const tracingShutdown = 5 * time.Second

// systems maps a provider type to the gen_ai.system its spans carry.
var systems = map[string]string{
	TypeOpenAI: "openai", TypeAnthropic: "anthropic", TypeGigaChat: "gigachat", TypeYandex: "yandexgpt", TypeSim: "sim",
}

// traceModel is the model a provider's spans name as gen_ai.request.model.
func traceModel(p *Provider) string {
	if p.Type == TypeYandex {
		return p.ModelURI
	}
	return p.Model
}

// telemetry checks telemetry.otlp and fills in its protocol.
func (v *validator) telemetry() {
	o := &v.f.Telemetry.OTLP
	switch o.Protocol {
	case "":
		o.Protocol = "http"
	case "http", "grpc":
	default:
		v.errorf("telemetry.otlp.protocol", "unknown protocol %q (want http or grpc)", o.Protocol)
	}
	for name, val := range o.Headers {
		if name == "" || strings.ContainsAny(name, " :\r\n\x00") || strings.ContainsAny(string(val), "\r\n\x00") {
			v.errorf("telemetry.otlp.headers", "header %q: invalid name or value", name)
		}
	}
	if o.Endpoint == "" {
		return // no export; an endpoint written as ${VAR:-} turns it off
	}
	u, err := url.Parse(o.Endpoint)
	isURL := err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
	switch {
	case isURL && u.Scheme == "https" && o.Insecure:
		v.errorf("telemetry.otlp.insecure", "contradicts the https:// endpoint: use http:// to send without TLS")
	case isURL:
	case o.Protocol == "grpc" && hostPort(o.Endpoint):
	case o.Protocol == "grpc":
		v.errorf("telemetry.otlp.endpoint", "invalid endpoint %q (want http(s)://host:port or host:port)", o.Endpoint)
	default:
		v.errorf("telemetry.otlp.endpoint", "invalid URL %q (want http(s)://host:port, the collector's base URL)", o.Endpoint)
	}
}

func hostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	return err == nil && host != "" && port != ""
}

// tracerProvider returns the provider the engine's spans go to: the host's
// (BuildOptions.TracerProvider), or, when telemetry.otlp names an endpoint and Build opens
// stores, an exporter to it behind a batching processor, shut down (flushed) by
// Runtime.Close. Check builds none: it never connects. nil means no tracing.
func (b *builder) tracerProvider(opts BuildOptions) trace.TracerProvider {
	if b.prev != nil {
		return b.prev.traces // telemetry.* takes a restart
	}
	if opts.TracerProvider != nil {
		return opts.TracerProvider
	}
	o := b.f.Telemetry.OTLP
	if o.Endpoint == "" || !opts.openReview {
		return nil
	}
	ctx := context.Background()
	exp, err := newExporter(ctx, o)
	if err != nil {
		b.errorf("telemetry.otlp", "%v", err)
		return nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "afloat")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override
		resource.WithTelemetrySDK())
	if err != nil {
		b.log.Warn("trace resource partly detected", "err", err) // res still holds what was
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	b.rt.tracer = tp
	b.log.Info("traces exported over OTLP", "protocol", o.Protocol, "endpoint", endpointHost(o.Endpoint))
	return tp
}

// newExporter builds the OTLP exporter; it makes no connection.
func newExporter(ctx context.Context, o OTLP) (sdktrace.SpanExporter, error) {
	headers := make(map[string]string, len(o.Headers))
	for k, v := range o.Headers {
		headers[k] = v.Reveal()
	}
	if o.Protocol == "grpc" {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithHeaders(headers)}
		if hostPort(o.Endpoint) && !strings.Contains(o.Endpoint, "://") {
			opts = append(opts, otlptracegrpc.WithEndpoint(o.Endpoint))
			if o.Insecure {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		} else {
			opts = append(opts, otlptracegrpc.WithEndpointURL(o.Endpoint))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("grpc exporter: %w", err)
		}
		return exp, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithHeaders(headers),
		otlptracehttp.WithEndpointURL(strings.TrimRight(o.Endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("http exporter: %w", err)
	}
	return exp, nil
}

// endpointHost is the endpoint as logged: its host, never a path or user information that
// might hold a token.
func endpointHost(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return endpoint
}

// shutdownTracing flushes the spans still queued and stops the exporter.
func (rt *Runtime) shutdownTracing() error {
	if rt.tracer == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
	defer cancel()
	err := rt.tracer.Shutdown(ctx)
	rt.tracer = nil
	if err != nil {
		return fmt.Errorf("traces: %w", err)
	}
	return nil
}
