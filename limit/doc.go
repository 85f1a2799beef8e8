// Package limit is an adaptive concurrency limit for one provider, with a short bounded
// queue in front of it.
//
// The limit follows the latency the provider answers with, as TCP Vegas follows a link's
// round-trip time (Brakmo and Peterson, "TCP Vegas: End to End Congestion Avoidance on a
// Global Internet", IEEE JSAC 13(8), 1995) and as Netflix's concurrency-limits library does
// for services (its Gradient2 limit, github.com/Netflix/concurrency-limits): while calls keep
// answering as fast as they have over the long run, the limit grows by about its square root
// every window, or by as many calls as waited for a slot (it doubles at most), so that a fast
// provider's limit rises with demand; when a window's latency
// rises above the long-run latency by more than the tolerance (×1.5, and 100 ms: a smaller
// change is noise for a model call), the limit falls by the ratio
// (smoothed: at most a quarter a window), before the provider melts; a window with a call the provider
// dropped (a timeout, an overload answer) backs the limit off by a tenth. A window is at
// least 10 answers and lasts twice the mean latency (between 100 ms and 1 s), so a model that
// answers in 5 s still moves the limit every few seconds.
//
// Calls beyond the limit wait in a bounded FIFO queue for at most the wait they were given
// (a share of their budget), so that a burst is smoothed instead of spilled to the next tier;
// the queue is refused at once when it is full. A critical call (AcquireAhead) waits ahead of
// the others, and a full queue does not refuse it: it never waits behind enrichment.
package limit
