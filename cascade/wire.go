package cascade

import (
	"context"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// wire tells, for an attempt whose provider is an HTTP client, when its request reached the
// network, from the transport's httptrace hooks on the attempt's context: the first DNS
// lookup, connect or connection got. Until then the attempt waited in afloat itself (its
// goroutines to run, the transport's own queue for a connection), and a cut in that wait is
// not the provider's: an overloaded gateway saw attempts to healthy mocks wait 1.4 s of a
// 2 s timeout before their connect even began. A connect that began is the provider's time:
// a host that drops SYNs is to blame for it. The hooks run on the transport's goroutines,
// and may still run after the attempt is settled.
type wire struct {
	clock clockwork.Clock
	asked atomic.Bool  // the provider asked its transport for a connection (GetConn)
	at    atomic.Int64 // when the request reached the network, in Unix nanoseconds; 0 before
	hooks httptrace.ClientTrace
}

// trace returns ctx with w's hooks, composed with any hooks ctx already has.
func (w *wire) trace(ctx context.Context) context.Context {
	w.hooks = httptrace.ClientTrace{
		GetConn:      func(string) { w.asked.Store(true) },
		DNSStart:     func(httptrace.DNSStartInfo) { w.reached() },
		ConnectStart: func(string, string) { w.reached() },
		GotConn:      func(httptrace.GotConnInfo) { w.reached() },
	}
	return httptrace.WithClientTrace(ctx, &w.hooks)
}

func (w *wire) reached() { w.at.CompareAndSwap(0, w.clock.Now().UnixNano()) }

// waited is how long of an attempt that began at began and ended at end was afloat's own
// wait before its request reached the network: all of it when the provider asked for a
// connection and never got to dial, none when no hook ran (a provider that is not an HTTP
// client, or one that failed before asking).
func (w *wire) waited(began, end time.Time) time.Duration {
	at := w.at.Load()
	switch {
	case at != 0:
		return min(max(time.Unix(0, at).Sub(began), 0), end.Sub(began))
	case w.asked.Load():
		return end.Sub(began)
	}
	return 0
}
