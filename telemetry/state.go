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

// RegisterDrillAge exports afloat_drill_age_seconds{task}: the seconds since each task's (or
// route's) last passing drill, read at scrape time from ages. A task never drilled with
// success has no series (absent, not 0: an age of 0 would read as "drilled just now").
func RegisterDrillAge(reg prometheus.Registerer, ages func() map[string]float64) error {
	return reg.Register(&drillAges{ages: ages, desc: prometheus.NewDesc("afloat_drill_age_seconds",
		"Seconds since the task's or route's last passing drill (afloat drill); absent before one.", []string{"task"}, nil)})
}

type drillAges struct {
	ages func() map[string]float64
	desc *prometheus.Desc
}

func (d *drillAges) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *drillAges) Collect(ch chan<- prometheus.Metric) {
	for task, age := range d.ages() {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, age, task)
	}
}
