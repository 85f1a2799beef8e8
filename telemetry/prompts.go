package telemetry

import "github.com/prometheus/client_golang/prometheus"

// PromptMetrics extends shared/DESIGN.md §8 with the prompt's version: what became of the
// answers each version of each prompt got, so that a team comparing triage/gigachat-pro v3
// with v2 reads it off a dashboard. Its collectors are safe for concurrent use.
type PromptMetrics struct {
	// Answers counts the answers checked against the task's contract, by prompt version and
	// result: "ok", or the stage a violation was found at ("extract", "repair", "truncated":
	// cut by the provider's limit on tokens, "schema").
	// Labels: task, provider, version.
	Answers *prometheus.CounterVec
}

// PromptResults are the values of the result label, in order.
func PromptResults() []string { return []string{"ok", "extract", "repair", "truncated", "schema"} }

// NewPromptMetrics creates the prompt metrics and registers them on reg; a nil reg registers
// nowhere (they still count).
func NewPromptMetrics(reg prometheus.Registerer) (*PromptMetrics, error) {
	m := &PromptMetrics{
		Answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "afloat_prompt_answers_total",
			Help: "Model answers checked against the task's contract, by prompt version and result (ok or the stage of the violation).",
		}, []string{"task", "provider", "version", "result"}),
	}
	if reg != nil {
		if err := reg.Register(m.Answers); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Init exports the series of one prompt (a task's tier) at zero, one per result.
func (m *PromptMetrics) Init(task, provider, version string) {
	for _, r := range PromptResults() {
		m.Answers.WithLabelValues(task, provider, version, r)
	}
}
