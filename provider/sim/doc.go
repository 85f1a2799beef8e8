// Package sim is a simulated model provider for demos, drills, benchmarks and tests.
//
// A [Provider] answers like a real endpoint: after a latency drawn from a log-normal
// distribution fitted to a p50 and a p95, with a share of random failures, and with an answer
// that fits the request's JSON Schema when it asks for structured output. A [Fault] set at run
// time makes it go down, hang, slow down or answer prose instead of JSON, so the cascade's
// fallbacks can be exercised without a real provider or a key. Every random choice comes from
// one seeded source and every wait from an injectable clock, so the same seed and the same
// sequence of calls give the same answers and latencies, and tests run on a fake clock. It
// continues a cut answer (afloat.Request's Continue: a partial JSON document is completed
// into a valid one), and its Probe answers at once as the fault in force says.
//
//	p, err := sim.New(sim.Config{Name: "sim-primary", P50: 300 * time.Millisecond, P95: 700 * time.Millisecond, ErrorRate: 0.01})
//	if err != nil { ... }
//	resp, err := p.Complete(ctx, req)                       // JSON valid for req's schema, after ~300ms
//	p.SetFault(sim.Fault{Mode: sim.ModeUnavailable})         // the drill: the provider goes down
//	_, err = p.Complete(ctx, req)                            // *afloat.ProviderError, status 503, kind Unavailable
//	p.SetFault(sim.Fault{})                                  // and comes back
package sim
