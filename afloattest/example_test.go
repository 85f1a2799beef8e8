package afloattest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/afloattest"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
)

// TicketTriage is the task's answer: the model's and the heuristic's alike.
type TicketTriage struct {
	Department *string `json:"department"`
	IsUrgent   float64 `json:"is_urgent"`
}

// Example is a drill test: the primary is down, and the triage feature must still answer,
// from the backup, marked degraded; the primary's breaker must open, and once it is open no
// call may wait on the primary. In a test the assertions take the test's t (and the test
// runs in a testing/synctest bubble, so RequireFailFast can time each call); an example has
// no t, so a stand-in prints what would fail the test.
func Example() {
	var t testing.TB = printT{}

	primary := afloattest.Unavailable("primary", 503)
	backup := afloattest.Answering("backup", `{"department": "billing", "is_urgent": 0.3}`)
	engine, err := cascade.New(cascade.Config{Providers: []cascade.ProviderConfig{
		{Name: primary.Name(), Provider: primary},
		{Name: backup.Name(), Provider: backup},
	}})
	if err != nil {
		t.Fatalf("%v", err)
	}
	p0, _ := prompt.Parse("triage/primary.v3.tmpl", "--- system\nTriage the ticket as JSON.\n--- user\n{{.message}}")
	p1, _ := prompt.Parse("triage/backup.v1.tmpl", "--- user\nОпредели отдел и срочность, ответь JSON: {{.message}}")
	triage, err := engine.Task(cascade.TaskConfig{
		Name: "triage", Criticality: afloat.Enrichment,
		Schema: []byte(`{"type": "object", "required": ["department", "is_urgent"], "additionalProperties": false,
			"properties": {"department": {"enum": ["technical", "billing", null]}, "is_urgent": {"type": "number"}}}`),
		Cascade: []cascade.Tier{{Provider: "primary", Prompt: p0}, {Provider: "backup", Prompt: p1}},
		Heuristic: cascade.Rules{
			{Default: map[string]any{"department": nil, "is_urgent": 0.2}},
			{WhenAny: []string{"срочно"}, Set: map[string]any{"is_urgent": 0.8}},
		},
	})
	if err != nil {
		t.Fatalf("%v", err)
	}

	rep := afloattest.Drill[TicketTriage](t, triage, afloat.Input{"message": "Не проходит оплата, срочно"}, 20)
	for _, c := range rep.Calls {
		afloattest.RequireDegraded(t, c.Result, afloat.SourceModel)
		afloattest.RequireModel(t, c.Result, "backup")
	}
	afloattest.RequireBreaker(t, engine, "primary", breaker.StateOpen)
	for _, c := range rep.Calls[3:] {
		// Skipped at once, without a call: the reason says the circuit was open.
		afloattest.RequireReason(t, c.Result, "circuit_open")
	}
	fmt.Println(rep.Sources, rep.Reasons)
	fmt.Println("primary called", primary.Calls(), "times, backup", backup.Calls())
	// Output:
	// map[model:20] map[circuit_open:17 unavailable:3]
	// primary called 5 times, backup 20
}

// printT stands in for a test's t: it prints a failure, and stops at a fatal one.
type printT struct{ testing.TB }

func (printT) Helper()                  {}
func (printT) Context() context.Context { return context.Background() }
func (printT) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("FAIL: "+format, args...))
}
