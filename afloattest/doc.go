// Package afloattest is for drill tests of your own features: switch a provider off and
// check that the feature degrades as designed, as the seeds' @pytest.mark.drill did.
//
// Its providers play one failure on every call, with provider/fault's errors (the ones
// PUT /admin/faults injects in production): [Unavailable] fails at once with an HTTP status,
// classified as an adapter classifies it; [Hanging] never answers until the call's context
// ends; [Slow] answers after a delay; [Malformed] answers prose without JSON; [Flapping] goes
// down and up in turn; [Answering] is healthy. Each counts its calls, so a test can say "the
// dead primary was called at most five times". [Drill] runs a task a number of times and
// reports every envelope and how long each call took; the Require functions check an
// envelope, a breaker or a call's time, and stop the test with the envelope printed when it
// is not as designed.
//
// Run a drill inside a testing/synctest bubble, with the engine on its default (real) clock:
// time in a bubble moves only when every goroutine waits, so a call that waits on a hanging
// provider takes exactly its timeout, one that skips an open circuit takes no time at all, and
// the test takes no time either. Build the engine inside the bubble. (On a clockwork fake clock
// nothing moves until the test advances it: a retry's backoff, a slow or a hanging provider
// would wait forever.)
//
// In the test below, schema, p0, p1, rules and Triage are the task's own (its JSON Schema, the
// tiers' prompts, its heuristic and its answer type); the package's example defines each of
// them, in a drill of a primary that answers 503.
//
//	func TestTriageDrill(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			primary := afloattest.Hanging("primary")
//			backup := afloattest.Answering("backup", `{"department": "technical", "is_urgent": 0.8, "urgency_score": 2}`)
//			engine, err := cascade.New(cascade.Config{Providers: []cascade.ProviderConfig{
//				{Name: "primary", Provider: primary},
//				{Name: "backup", Provider: backup},
//			}})
//			if err != nil {
//				t.Fatal(err)
//			}
//			triage, err := engine.Task(cascade.TaskConfig{
//				Name: "triage", Criticality: afloat.Enrichment, Budget: 1500 * time.Millisecond,
//				Schema:    schema,
//				Cascade:   []cascade.Tier{{Provider: "primary", Prompt: p0}, {Provider: "backup", Prompt: p1}},
//				Heuristic: rules,
//			})
//			if err != nil {
//				t.Fatal(err)
//			}
//
//			rep := afloattest.Drill[Triage](t, triage, afloat.Input{"message": "Сайт не работает"}, 20)
//			for _, c := range rep.Calls {
//				afloattest.RequireDegraded(t, c.Result, afloat.SourceModel) // answered, marked degraded
//				afloattest.RequireModel(t, c.Result, "backup")
//			}
//			afloattest.RequireBreaker(t, engine, "primary", breaker.StateOpen)
//			if n := primary.Calls(); n > 5 {
//				t.Errorf("the hanging primary was called %d times; its open breaker must stop that", n)
//			}
//			for _, c := range rep.Calls[15:] {
//				afloattest.RequireReason(t, c.Result, "circuit_open")
//				afloattest.RequireFailFast(t, c.Took, 100*time.Millisecond) // no timeout paid
//			}
//		})
//	}
//
// The first five calls each wait 1.3 s on the primary (the budget less the backup's reserve),
// then its breaker opens and the other fifteen take no time. With the primary's breaker
// disabled (breaker.Config{Disabled: true}) the same test fails: every call waits.
//
// With the backup down as well (afloattest.Malformed("backup"), say), the task's rules answer:
// RequireDegraded(t, c.Result, afloat.SourceHeuristic), and c.Result.Value has the type of the
// model's answer.
package afloattest
