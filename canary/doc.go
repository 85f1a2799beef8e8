// Package canary decides the canary release of a candidate (a new prompt version, or
// another model) on one tier of a task: it sends the candidate a share of the calls, picked
// by a stable hash of each call's key, compares what both arms answered, and then promotes
// the candidate (every call goes to it) or rolls it back (no call does).
//
// A [Canary] counts, for each arm, every [Observation] the caller reports: whether the first
// answer violated the contract, whether the call re-asked, whether it failed, its latency
// and its cost. Once Config.Window has passed since [New] and each arm has Config.MinCalls
// observations, the next [Canary.Observe] or [Canary.Check] decides, over every observation
// since the start. The candidate is rolled back when any of these holds, with the
// [Thresholds] of Config.RollbackIf:
//
//   - its violation rate exceeds the incumbent's by more than ViolationRate (share points);
//   - its re-ask rate exceeds the incumbent's by more than ReaskRate (share points);
//   - its failure rate (calls with no valid answer) exceeds the incumbent's by more than
//     FailureRate (share points);
//   - the incumbent's p95 latency is above 0 and the candidate's exceeds it by more than
//     P95 (relative: 0.25 is 25% above);
//   - the incumbent's cost per answer is above 0 and the candidate's exceeds it by more than
//     Cost (relative).
//
// Otherwise the candidate is as good or better, and it is promoted. The [Decision] records
// the figures of both arms and one reason per figure compared, whose comparison marks it:
// "violation rate 30.0% vs 1.0% (+29.0 points > 2.0)" failed, "re-ask rate 4.0% vs 3.0%
// (+1.0 points <= 5.0)" passed, and "(not compared: the incumbent's is 0)" was skipped.
//
// An operator may [Canary.Pin] a running canary (it keeps its share and decides nothing by
// itself), [Canary.Unpin] it, or decide by hand with [Canary.Promote] or [Canary.Rollback].
// A decision is final: a promoted canary picks the candidate for every key, a rolled-back
// one the incumbent, and a second decision is [ErrDecided].
//
// One call on the canaried tier goes like this:
//
//	c, err := canary.New(canary.Config{Share: 0.1, Window: 24 * time.Hour})
//	...
//	c.OnDecision(func(d canary.Decision) { log.Info("canary", "state", d.State, "reasons", d.Reasons) })
//	arm := c.Pick(tenantID)                  // a tenant stays on one arm
//	prompt := incumbentPrompt
//	if arm == canary.Candidate {
//		prompt = candidatePrompt
//	}
//	start := clock.Now()
//	ans, err := tier.Ask(ctx, prompt, req)
//	c.Observe(arm, canary.Observation{
//		Violation: ans.FirstViolated,
//		Reask:     ans.Reasked,
//		Failed:    err != nil,
//		Latency:   clock.Since(start),
//		Cost:      ans.Cost,
//	})
//
// and a ticker calls [Canary.Check], so that a canary whose traffic stopped is decided too.
package canary
