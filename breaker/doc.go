// Package breaker is the per-provider circuit breaker of the cascade (DESIGN.md §2, step 5).
//
// A [Breaker] is closed while its provider answers, opens when the provider fails too often
// (ConsecutiveFailures in a row, or a FailureRate over a sliding Window with at least MinCalls
// calls), skips every call while open, and after the Recovery period admits exactly one probe:
// a good probe closes it, a bad one reopens it for Growth times as long (1.5 by default), up
// to MaxRecovery. Each such open period is jittered (±Jitter, 20% by default), so that many
// breakers do not probe in step. The schedule fits LLM incidents, which mostly last seconds
// to a few minutes: with the defaults the probes of a long outage come 10s, 15s, 22.5s,
// 33.75s, … apart, so a provider back 60s after its breaker opened is probed again, and
// closes, at 81.25s rather than minutes later. Only
// failures of kind [afloat.Unavailable] and [afloat.Throttled] count; an [afloat.Contract]
// failure is a success for availability (the provider answered), and an [afloat.Unusable] one
// (bad key, exhausted quota) opens the breaker at once for UnusableCooldown.
//
// The state lives in a [Store]: a [MemoryStore] for one process, or a shared store (Redis) so
// that every replica of a fleet sees the same breaker. The store is moved only by short atomic
// operations; no lock, local or shared, is held across the call to the provider. When the
// store fails, the breaker keeps serving from a local state and counts the failure.
//
// One call goes through a breaker like this:
//
//	b, err := breaker.New("gigachat-pro", breaker.Config{Clock: clock})
//	...
//	p, err := b.Allow(ctx)
//	if errors.Is(err, breaker.ErrOpen) {
//		return skip(afloat.OutcomeCircuitOpen) // no timeout paid
//	}
//	if !bulkhead.TryAcquire() {
//		p.Cancel(ctx) // the call was not made: free the probe slot, record nothing
//		return skip(afloat.OutcomeBulkhead)
//	}
//	resp, err := provider.Complete(ctx, req)
//	p.Done(ctx, err) // nil is a success; the error's Kind decides the rest
package breaker
