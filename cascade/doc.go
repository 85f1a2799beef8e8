// Package cascade runs the flow of one call (shared/DESIGN.md §2): flags, then for each tier
// its circuit, deadline, bulkhead, the call with its adaptive read timeout and bounded
// retries, and the contract check with one clarifying re-ask; the first valid answer wins,
// and when every tier is skipped or fails the task's on_exhausted policy answers (a
// heuristic, nothing, a human review item, or a block).
//
// The contract check is normalize's pipeline over the task's schema and synonyms (a route's:
// the request's json_schema response format, and its tools' parameter schemas for tool-call
// arguments). A violation is re-asked on the same provider (Tier.Reask overrides the
// clarifying message), at most MaxReasks times and inside the budget, then the next tier is
// tried; it never moves the provider's breaker. Each step that changed an answer is counted in
// afloat_normalize_total, and each answer in afloat_prompt_answers_total by prompt version.
//
// With a Config.TracerProvider each call is a span ("afloat.task NAME", "afloat.route NAME")
// continuing the trace its context carries, with a child span per attempt ("afloat.attempt
// PROVIDER") under which the provider is called, so the adapters' traceparent names it.
//
// An Engine holds the providers and what they share across tasks (one breaker, one
// bulkhead, one retry budget per provider); a Task is one use of AI with its criticality,
// schema, budget and tiers:
//
//	e, err := cascade.New(cascade.Config{Providers: []cascade.ProviderConfig{
//		{Name: "primary", Provider: primary},
//		{Name: "backup", Provider: backup},
//	}})
//	triage, err := e.Task(cascade.TaskConfig{
//		Name: "triage", Criticality: afloat.Enrichment, Budget: 1500 * time.Millisecond,
//		Schema: schema,
//		Cascade: []cascade.Tier{{Provider: "primary", Prompt: p0}, {Provider: "backup", Prompt: p1}},
//		Heuristic: cascade.Rules{{Default: map[string]any{"department": nil, "is_urgent": 0.2, "urgency_score": 0.5}}},
//	})
//	res, err := afloat.Run[Triage](ctx, triage, afloat.Input{"subject": s, "message": m})
//
// A config reload builds a new Engine over the one in service (Config.Previous), which it
// takes the unchanged providers from, breakers and latency estimates included, then puts it
// in service with TakeOver once its tasks and routes are served (reload.go).
package cascade
