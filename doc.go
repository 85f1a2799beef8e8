// Package afloat keeps the AI features of a product working when the model provider fails.
//
// The root package holds the domain types shared by every part: the canonical [Request] and
// [Response] of one model call, the small [Provider] interface that each vendor adapter
// implements, [ProviderError] with its [Kind] (which decides whether a failure moves a circuit
// breaker), the [Criticality] of a task, and the generic envelope [Result] that every call
// returns on the happy path and on every fallback alike.
//
// The flow of one call (flags, circuit, deadline, bulkhead, call, contract, downgrade,
// exhausted policy) lives in package cascade; [Run] decodes a cascade's answer into the
// caller's own type:
//
//	res, err := afloat.Run[Triage](ctx, task, afloat.Input{"subject": s, "message": m})
//	if err != nil { ... }               // only configuration and input errors
//	if res.Degraded { ... }             // a backup tier, a heuristic or nothing answered
//	use(res.Value)                      // the same type on every path
package afloat
