// Package telemetry defines the Prometheus metrics of shared/DESIGN.md §8 on a registry the
// caller passes in (no global registry):
//
//	reg := prometheus.NewRegistry()
//	m, err := telemetry.New(reg)
//	m.Attempts.WithLabelValues("triage", "gigachat-pro", "circuit_open").Inc()
//
// LogHandler wraps a log/slog handler so that each line logged with a request's context
// carries its request_id, trace_id and span_id:
//
//	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, nil)))
package telemetry
