package telemetry

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every afloat metric this build moves. Its collectors are safe for concurrent
// use.
//
// Two metrics of shared/DESIGN.md §8 are not exported yet, since nothing in this build would
// move them and a series frozen at "all fine" misleads: afloat_concurrency_limit (with
// adaptive concurrency) and afloat_shed_total (with shedding). Each comes with the work that
// moves it. afloat_state_backend_healthy, afloat_drill_age_seconds and afloat_alerts_firing
// are registered apart, by RegisterStateBackend, RegisterDrillAge and NewAlertsFiring (when
// the config turns an alert on).
type Metrics struct {
	Requests           *prometheus.CounterVec   // task, source, degraded, reason
	Attempts           *prometheus.CounterVec   // task, provider, outcome
	CircuitOpened      *prometheus.CounterVec   // provider
	CircuitState       *CircuitStates           // provider: 0 closed, 1 half-open, 2 open
	ContractViolations *prometheus.CounterVec   // task, provider, stage
	Reasks             *prometheus.CounterVec   // task, provider
	ProviderLatency    *prometheus.HistogramVec // provider, task
	ReadTimeout        *prometheus.GaugeVec     // provider, task
	Tokens             *prometheus.CounterVec   // provider, task
	Cost               *prometheus.CounterVec   // provider, task
	FallbackShare      *prometheus.GaugeVec     // task
	SourceShare        *prometheus.GaugeVec     // task, source (ShareSources), over FallbackShare's window
	ReviewQueueDepth   *prometheus.GaugeVec     // task
	Normalize          *prometheus.CounterVec   // task, step
	Retries            *prometheus.CounterVec   // task, provider
	// Refusals counts attempts a provider declined under its content policy; WastedCost the
	// cost of answers that were not used (a contract violation, a stream cut before its end),
	// which the caller is not billed for; StreamEventsSkipped the stream events an adapter
	// could not parse and skipped.
	Refusals            *prometheus.CounterVec // task, provider
	WastedCost          *prometheus.CounterVec // provider, task
	StreamEventsSkipped *prometheus.CounterVec // provider, task
	// The review queue's: items queued, resolved, rejected and purged by retention, by
	// task; the age of the oldest unanswered item by task; whether the store commits.
	ReviewEnqueued      *prometheus.CounterVec // task
	ReviewResolved      *prometheus.CounterVec // task
	ReviewRejected      *prometheus.CounterVec // task
	ReviewPurged        *prometheus.CounterVec // task
	ReviewOldestPending *AgeVec                // task
	ReviewStoreHealthy  prometheus.Gauge       // 1 healthy, 0 not
	// ReviewSLABreaches counts the items that outlived their task's review_sla unanswered,
	// each once (review.SLAWatch, brought up to date when scraped).
	ReviewSLABreaches *RefreshedCounterVec // task
	// Hedges counts the calls hedged from a tier to the next; Shed the calls shed under
	// afloat's own overload; ConcurrencyLimit and ConcurrencyQueued each provider's adaptive
	// concurrency limit and the calls waiting for a slot under it.
	Hedges            *prometheus.CounterVec // task, provider (the tier hedged from)
	Shed              *prometheus.CounterVec // task
	ConcurrencyLimit  *prometheus.GaugeVec   // provider
	ConcurrencyQueued *prometheus.GaugeVec   // provider
	// Cache counts a task's answer-cache lookups and stores (result hit, miss, retired: an
	// answer of a prompt version no longer served, stored); CanaryShare is the share of a
	// task's calls its canary's candidate takes now, CanaryDecisions the canaries promoted or
	// rolled back.
	Cache           *prometheus.CounterVec // task, result
	CanaryShare     *prometheus.GaugeVec   // task
	CanaryDecisions *prometheus.CounterVec // task, decision (promoted, rolled_back), by (auto, operator)
}

// RegisterRuntime registers on reg the collectors of the Go runtime (go_*: goroutines,
// heap, GC pauses) and of the process (process_*: CPU, resident memory, open file
// descriptors, start time), which an operator reads beside afloat's own. A registry holds
// them once: registering twice is an error.
func RegisterRuntime(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
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
		CircuitState:       newCircuitStates(),
		ContractViolations: counter("afloat_contract_violations_total", "Model answers that did not fit the task's contract, by stage.", "task", "provider", "stage"),
		Reasks:             counter("afloat_reasks_total", "Clarifying re-asks after a contract violation.", "task", "provider"),
		ProviderLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "afloat_provider_latency_seconds", Help: "Latency of completed provider calls.",
			Buckets: []float64{.025, .05, .1, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 10, 30},
		}, []string{"provider", "task"}),
		ReadTimeout:      gauge("afloat_read_timeout_seconds", "Read timeout in force, derived from measured latency.", "provider", "task"),
		Tokens:           counter("afloat_tokens_total", "Tokens used, input and output.", "provider", "task"),
		Cost:             counter("afloat_cost_total", "Cost of the tokens used, in the provider's price currency.", "provider", "task"),
		FallbackShare:    gauge("afloat_fallback_share", "Share of recent calls not answered by tier 0.", "task"),
		SourceShare:      gauge("afloat_source_share", "Share of recent calls by where the answer came from (model: tier 0, model_degraded: a lower tier or a cut stream).", "task", "source"),
		ReviewQueueDepth: gauge("afloat_review_queue_depth", "Items waiting for human review.", "task"),
		Normalize:        counter("afloat_normalize_total", "Normalization steps that changed a model's answer.", "task", "step"),
		Retries:          counter("afloat_retries_total", "Retries on the same provider after a transient failure.", "task", "provider"),
		Refusals:         counter("afloat_refusals_total", "Attempts the provider declined under its content policy.", "task", "provider"),
		WastedCost:       counter("afloat_wasted_cost_total", "Cost of answers that were not used (contract violations, cut streams, hedges' losing attempts), not billed to the caller.", "provider", "task"),
		StreamEventsSkipped: counter("afloat_stream_events_skipped_total",
			"Stream events that could not be parsed and were skipped.", "provider", "task"),
		ReviewEnqueued: counter("afloat_review_enqueued_total", "Items queued for human review.", "task"),
		ReviewResolved: counter("afloat_review_resolved_total", "Review items an operator answered.", "task"),
		ReviewRejected: counter("afloat_review_rejected_total", "Review items an operator rejected.", "task"),
		ReviewPurged:   counter("afloat_review_purged_total", "Answered review items deleted after the retention period.", "task"),
		ReviewOldestPending: NewAgeVec("afloat_review_oldest_pending_seconds",
			"Age of the oldest review item not answered yet (pending or claimed); 0 when none.", "task"),
		ReviewStoreHealthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "afloat_review_store_healthy", Help: "Whether the review store commits (1) or not (0)."}),
		ReviewSLABreaches: NewRefreshedCounterVec(prometheus.CounterOpts{Name: "afloat_review_sla_breaches_total",
			Help: "Review items that outlived their task's review_sla unanswered, each counted once."}, []string{"task"}),
		Hedges:            counter("afloat_hedges_total", "Calls hedged: the tier (provider) had not answered by its hedge delay, and the next tier was asked too.", "task", "provider"),
		Shed:              counter("afloat_shed_total", "Calls shed, without a provider call, because afloat itself was saturated.", "task"),
		ConcurrencyLimit:  gauge("afloat_concurrency_limit", "The provider's adaptive concurrency limit now.", "provider"),
		ConcurrencyQueued: gauge("afloat_concurrency_queued", "Calls waiting for a slot under the provider's concurrency limit now.", "provider"),
		Cache:             counter("afloat_cache_total", "Answer-cache lookups and stores of a task (hit, miss, retired: an answer of a prompt version no longer served, stored).", "task", "result"),
		CanaryShare:       gauge("afloat_canary_share", "Share of a task's calls its canary's candidate takes now (0 rolled back, 1 promoted).", "task"),
		CanaryDecisions:   counter("afloat_canary_decisions_total", "Canaries decided: promoted or rolled back, automatically or by an operator.", "task", "decision", "by"),
	}
	m.ReviewStoreHealthy.Set(1)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.Requests, m.Attempts, m.CircuitOpened, m.CircuitState,
		m.ContractViolations, m.Reasks, m.ProviderLatency, m.ReadTimeout, m.Tokens, m.Cost,
		m.FallbackShare, m.SourceShare, m.ReviewQueueDepth, m.Normalize, m.Retries, m.Refusals, m.WastedCost,
		m.StreamEventsSkipped, m.ReviewEnqueued, m.ReviewResolved,
		m.ReviewRejected, m.ReviewPurged, m.ReviewOldestPending, m.ReviewStoreHealthy, m.ReviewSLABreaches,
		m.Hedges, m.Shed, m.ConcurrencyLimit, m.ConcurrencyQueued, m.Cache, m.CanaryShare, m.CanaryDecisions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Sources, in the order of shared/DESIGN.md §3.
var sources = []string{"model", "cache", "heuristic", "unavailable", "human"}

// InitProvider exports the series of one provider at zero; a circuit state already watched
// keeps its func.
func (m *Metrics) InitProvider(provider string) {
	m.CircuitOpened.WithLabelValues(provider)
	m.ConcurrencyLimit.WithLabelValues(provider)
	m.ConcurrencyQueued.WithLabelValues(provider)
	m.CircuitState.Init(provider)
}

// InitTask exports, at zero, the series of a task whose labels the configuration already
// knows: each provider × outcome, each source, so that dashboards and alerts see them before
// the first incident. reasons are the values the reason label can take.
func (m *Metrics) InitTask(task string, providers, outcomes, reasons []string) {
	for _, p := range providers {
		for _, o := range outcomes {
			m.Attempts.WithLabelValues(task, p, o)
		}
		for _, stage := range []string{"extract", "repair", "truncated", "schema"} {
			m.ContractViolations.WithLabelValues(task, p, stage)
		}
		m.Reasks.WithLabelValues(task, p)
		m.Retries.WithLabelValues(task, p)
		m.Refusals.WithLabelValues(task, p)
		m.Hedges.WithLabelValues(task, p)
		m.WastedCost.WithLabelValues(p, task)
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
	m.Requests.WithLabelValues(task, "cache", "false", "") // a fresh hit (serve: always_fresh)
	for _, step := range []string{"locate", "repair", "rename", "coerce"} {
		m.Normalize.WithLabelValues(task, step)
	}
	m.FallbackShare.WithLabelValues(task)
	m.Shed.WithLabelValues(task)
	for _, s := range ShareSources() {
		m.SourceShare.WithLabelValues(task, s)
	}
	m.ReviewQueueDepth.WithLabelValues(task)
	m.ReviewEnqueued.WithLabelValues(task)
	m.ReviewResolved.WithLabelValues(task)
	m.ReviewRejected.WithLabelValues(task)
	m.ReviewPurged.WithLabelValues(task)
	m.ReviewOldestPending.Init(task)
	m.ReviewSLABreaches.WithLabelValues(task)
}

// AgeVec is a gauge of ages by one label, computed when collected from the start times it
// holds, so that an age keeps growing between the events that set it. The zero start time
// reads as age 0. It is safe for concurrent use.
type AgeVec struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	since map[string]time.Time
	now   func() time.Time
}

// NewAgeVec returns an AgeVec on real time with the one label named label.
func NewAgeVec(name, help, label string) *AgeVec {
	return &AgeVec{desc: prometheus.NewDesc(name, help, []string{label}, nil), since: map[string]time.Time{}, now: time.Now}
}

// SetClock makes the ages count on now (a fake clock's Now in tests).
func (a *AgeVec) SetClock(now func() time.Time) {
	a.mu.Lock()
	a.now = now
	a.mu.Unlock()
}

// Set records since as the start of value's age; the zero time means none (age 0).
func (a *AgeVec) Set(value string, since time.Time) {
	a.mu.Lock()
	a.since[value] = since
	a.mu.Unlock()
}

// Init exports value's series at 0 unless it is set already.
func (a *AgeVec) Init(value string) {
	a.mu.Lock()
	if _, ok := a.since[value]; !ok {
		a.since[value] = time.Time{}
	}
	a.mu.Unlock()
}

// Age returns value's age now, 0 when it has no start time.
func (a *AgeVec) Age(value string) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.age(a.since[value])
}

func (a *AgeVec) age(since time.Time) time.Duration {
	if since.IsZero() {
		return 0
	}
	return max(a.now().Sub(since), 0)
}

// Describe implements prometheus.Collector.
func (a *AgeVec) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

// Collect implements prometheus.Collector.
func (a *AgeVec) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for value, since := range a.since {
		ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, a.age(since).Seconds(), value)
	}
}
