package telemetry

import "github.com/prometheus/client_golang/prometheus"

// NewAlertsFiring returns afloat_alerts_firing{alert}: how many scopes (tasks, providers) of
// each alert fire now, set by the alert evaluator (package alerts) at each evaluation. Each
// of names, the alerts the config sets, is exported at 0 from the start, so that a dashboard
// sees an alert before it first fires. A nil reg registers nowhere.
func NewAlertsFiring(reg prometheus.Registerer, names []string) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "afloat_alerts_firing",
		Help: "Scopes (tasks, providers) of each alert firing now.",
	}, []string{"alert"})
	for _, n := range names {
		g.WithLabelValues(n).Set(0)
	}
	if reg != nil {
		if err := reg.Register(g); err != nil {
			return nil, err
		}
	}
	return g, nil
}
