// Package telemetry defines the Prometheus metrics of shared/DESIGN.md §8 on a registry the
// caller passes in (no global registry):
//
//	reg := prometheus.NewRegistry()
//	m, err := telemetry.New(reg)
//	m.Attempts.WithLabelValues("triage", "gigachat-pro", "circuit_open").Inc()
package telemetry
