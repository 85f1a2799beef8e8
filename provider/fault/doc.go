// Package fault injects failures into any provider, for unavailability drills against real
// adapters (shared/DESIGN.md §6, PUT /admin/faults/{provider}).
//
//	p := fault.Wrap("gigachat-pro", gigachat, nil)
//	p.Set(fault.Fault{Mode: fault.ModeUnavailable, Status: 503, TTL: 15 * time.Minute})
//	_, err := p.Complete(ctx, req) // a *afloat.ProviderError with status 503; gigachat is not called
//	p.Set(fault.Fault{})           // cleared (or by itself, 15 minutes after the Set)
//
// Probe passes through the fault too, so a provider forced unavailable fails its probe; it
// reaches the wrapped provider's probe only when CanProbe. A fault is read when a call starts.
// A fault with a TTL clears itself once the TTL has passed at the wrapper's clock (the admin
// API gives every fault one, DefaultTTL unless it names its own). The wrapper holds the
// fault of one process; a shared state backend sets it on every replica.
package fault
