package telemetry

import "github.com/prometheus/client_golang/prometheus"

// RegisterStateBackend exports the state backend's health at scrape time:
// afloat_state_backend_healthy (1 while it answers, 0 while the replica serves from its own
// state) and afloat_state_backend_failures_total (how many times it went from answering to
// failing). healthy and failures must be cheap and safe from any goroutine.
func RegisterStateBackend(reg prometheus.Registerer, healthy func() bool, failures func() uint64) error {
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "afloat_state_backend_healthy",
		Help: "1 while the state backend (breakers, flags, faults) answers; 0 while this replica serves from its own state.",
	}, func() float64 {
		if healthy() {
			return 1
		}
		return 0
	})); err != nil {
		return err
	}
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "afloat_state_backend_failures_total",
		Help: "Times the state backend went from answering to failing.",
	}, func() float64 { return float64(failures()) }))
}
