// Package fault injects failures into any provider, for unavailability drills against real
// adapters (shared/DESIGN.md §6, PUT /admin/faults/{provider}).
//
//	p := fault.Wrap("gigachat-pro", gigachat, nil)
//	p.Set(fault.Fault{Mode: fault.ModeUnavailable, Status: 503, TTL: 15 * time.Minute})
//	_, err := p.Complete(ctx, req) // a *afloat.ProviderError with status 503; gigachat is not called
//	p.Set(fault.Fault{Mode: fault.ModeStreamCut, AfterChunks: 5})
//	s, _ := p.Stream(ctx, req)     // five chunks from gigachat, then an Unavailable error
//	p.Set(fault.Fault{})           // cleared (or by itself, once a TTL has passed)
//
// The modes, each with the fields it takes besides ttl (the JSON names; a zero or absent
// field means the default in brackets, and a field the mode does not take is an error):
//
//	unavailable       status [503]          every call fails at once with status
//	timeout                                 every call hangs until its context ends
//	slow              delay [5s]            every call waits delay, then is made
//	malformed                               every call answers prose that holds no JSON
//	reset                                   every call fails at once as a connection reset (transient)
//	rate_limited      retry_after [30s]     every call fails at once with a 429 that asks for retry_after
//	stream_cut        after_chunks [3]      a stream dies after after_chunks chunks; a call is made and its answer lost
//	stream_stall                            a stream opens and stays silent until its context ends; a call hangs
//	first_token_slow  delay [5s]            a stream's first chunk waits delay, then it flows; a call waits delay
//	flap              down [10s] up [10s]   down (failing with status [503]) then up, repeating from the Set
//	                  status [503]
//	error_rate        rate (required)       a share rate (0 < rate ≤ 1) of calls fail with status [503]
//	                  status [503]
//
// Probe passes through the fault too, so a provider forced unavailable fails its probe (a
// flapping one while down; under error_rate each probe draws); it reaches the wrapped
// provider's probe only when CanProbe. The stream modes and malformed spoil answers, not the
// models list a probe reads: their probes go through. A fault is read when a call starts.
// error_rate draws from math/rand/v2 unless Wrap is given WithRand (a seeded source makes a
// test deterministic). A fault with a TTL clears itself once the TTL has passed at the
// wrapper's clock (the admin API gives every fault one, DefaultTTL unless it names its
// own); flap's phases count on the same clock. The wrapper holds the fault of one process; a
// shared state backend sets it on every replica (SetUntil), where a flap with a TTL (the
// admin API's always has one) keeps the phases it has where it was set.
package fault
