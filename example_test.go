package afloat_test

import (
	"context"
	"fmt"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/provider/sim"
)

// Triage is the task's answer: the model's and the heuristic's alike.
type Triage struct {
	Department   *string `json:"department"`
	IsUrgent     float64 `json:"is_urgent"`
	UrgencyScore float64 `json:"urgency_score"`
}

const triageSchema = `{"type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}},
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false}`

// ExampleRun runs a typed enrichment task over a primary and a backup model. While the
// primary answers, the result is the model's; when both fail, the task's heuristic rules
// answer with the same type, marked degraded.
func ExampleRun() {
	primary, _ := sim.New(sim.Config{Name: "primary", Seed: 7})
	backup, _ := sim.New(sim.Config{Name: "backup", Seed: 7})
	engine, _ := cascade.New(cascade.Config{Providers: []cascade.ProviderConfig{
		{Name: "primary", Provider: primary},
		{Name: "backup", Provider: backup},
	}})
	p0, _ := prompt.Parse("triage/primary.v3.tmpl", "--- system\nTriage the ticket as JSON.\n--- user\n{{.message}}")
	p1, _ := prompt.Parse("triage/backup.v1.tmpl", "--- user\nОпредели отдел и срочность, ответь JSON: {{.message}}")
	triage, err := engine.Task(cascade.TaskConfig{
		Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema),
		Cascade: []cascade.Tier{{Provider: "primary", Prompt: p0}, {Provider: "backup", Prompt: p1}},
		Heuristic: cascade.Rules{
			{Default: map[string]any{"department": nil, "is_urgent": 0.2, "urgency_score": 0.5}},
			{WhenAny: []string{"не работает", "urgente"}, Set: map[string]any{"is_urgent": 0.8, "urgency_score": 2.0}},
			{WhenAny: []string{"ошибка", "erro"}, Set: map[string]any{"department": "technical"}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	in := afloat.Input{"message": "Ошибка: сайт не работает"}

	res, _ := afloat.Run[Triage](ctx, triage, in)
	fmt.Println(res.Source, res.Degraded, res.Provider, res.PromptVersion)

	primary.SetFault(sim.Fault{Mode: sim.ModeUnavailable, Status: 502})
	res, _ = afloat.Run[Triage](ctx, triage, in)
	fmt.Println(res.Source, res.Degraded, res.Provider, res.Reason)

	backup.SetFault(sim.Fault{Mode: sim.ModeMalformed})
	res, _ = afloat.Run[Triage](ctx, triage, in)
	fmt.Println(res.Source, res.Degraded, res.Reason, *res.Value.Department, res.Value.IsUrgent)
	// Output:
	// model false primary triage/primary/v3
	// model true backup unavailable
	// heuristic true unavailable technical 0.8
}
