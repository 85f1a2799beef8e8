// Package alerts evaluates the alerts of the config's alerts: block (shared/DESIGN.md §4)
// inside afloat, on sliding windows, so that an outage pages someone without an external
// rule engine:
//
//   - fallback_share: a task's share of calls not answered by tier 0 is above `above`;
//   - primary_open: a task's tier-0 provider has its breaker open;
//   - contract_violation_rate: a provider's share of answers to a task that fail the
//     contract is above `above` while its breaker stays closed (the canary of a model
//     update: the provider answers, but not what the task asks);
//   - review_sla: a task has review items past its review_sla;
//   - unusable: a provider's breaker opened on an unusable failure (bad key, quota);
//   - drill_stale: a drilled task has no passing drill within drill.max_age.
//   - canary_rolled_back: a task's canary release was rolled back.
//
// Each alert of each scope fires once, when its condition has held for the rule's For, and
// resolves once, when the condition has stopped holding for as long again: a share that dips
// under its threshold for a moment keeps the alert firing, without a second page. Rate
// alerts count the calls of the last Window (5m) and need MinCalls (20) of them.
//
// A firing is logged at warn and a resolution at info, counted in
// afloat_alerts_firing{alert}, listed in /admin/status while firing, and posted as JSON
// (Payload) to the rule's webhook, signed with its secret (SignatureHeader), retried with a
// jittered exponential backoff:
//
//	ev, err := alerts.New(alerts.Config{
//		Rules:  []alerts.Rule{{Name: alerts.FallbackShare, Above: 0.3, For: 10 * time.Minute, Webhook: url, Secret: secret}},
//		Counts: alerts.MetricCounts{Metrics: engine.Metrics()}, Breakers: engine, Clock: clock, Logger: log,
//	})
//	ev.Start()       // evaluates every Interval (5s) until Close
//	defer ev.Close()
//	for _, s := range ev.Firing() { fmt.Println(s.Alert, s.Scope, s.Value) }
//
// The evaluator reads what it watches through small interfaces (Counts, Breakers, Reviews,
// Drills), which the engine, the review store and the state backend meet as they are.
package alerts
