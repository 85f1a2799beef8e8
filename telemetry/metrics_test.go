package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNamesOfDesign(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.InitProvider("gigachat-pro")
	m.InitTask("triage", []string{"gigachat-pro", "yandexgpt"}, []string{"ok", "circuit_open"}, []string{"", "circuit_open"})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, name := range []string{"afloat_requests_total", "afloat_attempts_total", "afloat_circuit_opened_total",
		"afloat_circuit_state", "afloat_contract_violations_total", "afloat_reasks_total",
		"afloat_provider_latency_seconds", "afloat_read_timeout_seconds", "afloat_tokens_total", "afloat_cost_total",
		"afloat_fallback_share", "afloat_source_share", "afloat_review_queue_depth", "afloat_normalize_total",
		"afloat_review_sla_breaches_total"} {
		if !have[name] {
			t.Errorf("%s not exported at start", name)
		}
	}
	// New exports none of these: they are registered apart, by the work that moves them.
	for _, name := range []string{"afloat_state_backend_healthy", "afloat_drill_age_seconds", "afloat_alerts_firing"} {
		if have[name] {
			t.Errorf("%s exported, but nothing moves it", name)
		}
	}
	if n := testutil.CollectAndCount(m.Attempts); n != 4 {
		t.Fatalf("%d attempt series, want 2 providers × 2 outcomes", n)
	}
	want := `
# HELP afloat_circuit_state State of a provider's circuit breaker: 0 closed, 1 half-open, 2 open.
# TYPE afloat_circuit_state gauge
afloat_circuit_state{provider="gigachat-pro"} 0
`
	if err := testutil.CollectAndCompare(m.CircuitState, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg); err == nil {
		t.Fatal("registering twice on one registry succeeded")
	}
}
