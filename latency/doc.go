// Package latency turns measured latency into timeouts: the adaptive read timeout of one
// attempt and the total deadline of one call (DESIGN.md §2 steps 2.2 and 2.4, §4
// defaults.timeouts).
//
// An [Estimator] keeps a streaming percentile (a DDSketch, 1% relative accuracy) of a
// provider's recent latency for one task, and derives the read timeout
// clamp(p95 × Multiplier, Min, Max) from it. Only answers are measured: a call cut by that
// timeout holds the estimate instead of raising it, so a brownout cannot drag the timeout up
// to the call's whole budget (see [Estimator.Observe]). A [Set] holds one Estimator per
// provider × task.
//
// [WithBudget] puts the call's total budget into its context as a [Deadline]; every attempt,
// retry and re-ask draws from it. How much of it each attempt gets (the reserve for the tiers
// below, the median as the least worth starting, who is to blame for a cut) is the cascade's
// rule, in cascade/attempt.go.
//
//	ctx, cancel := latency.WithBudget(ctx, clk, task.Budget)
//	defer cancel()
//	est, err := estimators.Estimator("gigachat-pro", "triage", cfg.Timeouts)
//	if err != nil { ... }                  // invalid configuration
//	read := est.ReadTimeout()              // clamp(p95 × multiplier, min, max), or initial
//	start := clk.Now()
//	resp, err := call(ctx, read)
//	if err == nil {
//		est.Observe(clk.Since(start))      // an answer; a cut holds the estimate
//	}
package latency
