package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds every afloat metric. Its collectors are safe for concurrent use.
type Metrics struct {
	Requests           *prometheus.CounterVec   // task, source, degraded, reason
	Attempts           *prometheus.CounterVec   // task, provider, outcome
	CircuitOpened      *prometheus.CounterVec   // provider
	CircuitState       *prometheus.GaugeVec     // provider: 0 closed, 1 half-open, 2 open
	ContractViolations *prometheus.CounterVec   // task, provider, stage
	Reasks             *prometheus.CounterVec   // task, provider
	ProviderLatency    *prometheus.HistogramVec // provider, task
	ReadTimeout        *prometheus.GaugeVec     // provider, task
	Tokens             *prometheus.CounterVec   // provider, task
	Cost               *prometheus.CounterVec   // provider, task
	FallbackShare      *prometheus.GaugeVec     // task
	ReviewQueueDepth   *prometheus.GaugeVec     // task
	ReviewSLABreaches  *prometheus.CounterVec   // task
	Normalize          *prometheus.CounterVec   // task, step
	AlertsFiring       *prometheus.GaugeVec     // alert
	StateBackend       prometheus.Gauge         // 1 healthy, 0 not
	DrillAge           *prometheus.GaugeVec     // task
	Retries            *prometheus.CounterVec   // task, provider
}

// New creates the metrics and registers them on reg; a nil reg registers nowhere (the metrics
// still count, for tests and library users without Prometheus).
func New(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		Requests:           counter("afloat_requests_total", "Calls of a task or route, by where the answer came from and why it is degraded.", "task", "source", "degraded", "reason"),
		Attempts:           counter("afloat_attempts_total", "Attempts on a tier, skipped ones included, by outcome.", "task", "provider", "outcome"),
		CircuitOpened:      counter("afloat_circuit_opened_total", "Times a provider's circuit breaker opened.", "provider"),
		CircuitState:       gauge("afloat_circuit_state", "State of a provider's circuit breaker: 0 closed, 1 half-open, 2 open.", "provider"),
		ContractViolations: counter("afloat_contract_violations_total", "Model answers that did not fit the task's contract, by stage.", "task", "provider", "stage"),
		Reasks:             counter("afloat_reasks_total", "Clarifying re-asks after a contract violation.", "task", "provider"),
		ProviderLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "afloat_provider_latency_seconds", Help: "Latency of completed provider calls.",
			Buckets: []float64{.025, .05, .1, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 10, 30},
		}, []string{"provider", "task"}),
		ReadTimeout:       gauge("afloat_read_timeout_seconds", "Read timeout in force, derived from measured latency.", "provider", "task"),
		Tokens:            counter("afloat_tokens_total", "Tokens used, input and output.", "provider", "task"),
		Cost:              counter("afloat_cost_total", "Cost of the tokens used, in the provider's price currency.", "provider", "task"),
		FallbackShare:     gauge("afloat_fallback_share", "Share of recent calls not answered by tier 0.", "task"),
		ReviewQueueDepth:  gauge("afloat_review_queue_depth", "Items waiting for human review.", "task"),
		ReviewSLABreaches: counter("afloat_review_sla_breaches_total", "Review items not answered within the task's review SLA.", "task"),
		Normalize:         counter("afloat_normalize_total", "Normalization steps that changed a model's answer.", "task", "step"),
		AlertsFiring:      gauge("afloat_alerts_firing", "Alerts firing now (1) or not (0).", "alert"),
		StateBackend:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "afloat_state_backend_healthy", Help: "Whether the shared state backend answers (1) or not (0)."}),
		DrillAge:          gauge("afloat_drill_age_seconds", "Time since the task's last unavailability drill.", "task"),
		Retries:           counter("afloat_retries_total", "Retries on the same provider after a transient failure.", "task", "provider"),
	}
	m.StateBackend.Set(1)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.Requests, m.Attempts, m.CircuitOpened, m.CircuitState,
		m.ContractViolations, m.Reasks, m.ProviderLatency, m.ReadTimeout, m.Tokens, m.Cost,
		m.FallbackShare, m.ReviewQueueDepth, m.ReviewSLABreaches, m.Normalize, m.AlertsFiring,
		m.StateBackend, m.DrillAge, m.Retries} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Sources, in the order of shared/DESIGN.md §3.
var sources = []string{"model", "heuristic", "unavailable", "human"}

// InitProvider exports the series of one provider at zero.
func (m *Metrics) InitProvider(provider string) {
	m.CircuitOpened.WithLabelValues(provider)
	m.CircuitState.WithLabelValues(provider)
}

// InitTask exports, at zero, the series of a task whose labels the configuration already
// knows: each provider × outcome, each source, so that dashboards and alerts see them before
// the first incident. reasons are the values the reason label can take.
func (m *Metrics) InitTask(task string, providers, outcomes, reasons []string) {
	for _, p := range providers {
		for _, o := range outcomes {
			m.Attempts.WithLabelValues(task, p, o)
		}
		for _, stage := range []string{"extract", "repair", "schema"} {
			m.ContractViolations.WithLabelValues(task, p, stage)
		}
		m.Reasks.WithLabelValues(task, p)
		m.Retries.WithLabelValues(task, p)
		m.Tokens.WithLabelValues(p, task)
		m.Cost.WithLabelValues(p, task)
		m.ReadTimeout.WithLabelValues(p, task)
		m.ProviderLatency.WithLabelValues(p, task)
	}
	for _, s := range sources {
		for _, r := range reasons {
			degraded := "true"
			if s == "model" && r == "" {
				degraded = "false"
			}
			m.Requests.WithLabelValues(task, s, degraded, r)
		}
	}
	for _, step := range []string{"locate", "repair", "rename", "coerce"} {
		m.Normalize.WithLabelValues(task, step)
	}
	m.FallbackShare.WithLabelValues(task)
	m.ReviewQueueDepth.WithLabelValues(task)
	m.ReviewSLABreaches.WithLabelValues(task)
	m.DrillAge.WithLabelValues(task)
}
