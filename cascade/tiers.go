package cascade

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/latency"
)

// askFunc asks one tier, given the tiers below it (which its attempts keep a reserve for),
// and records its attempts in log. It returns the answer and whether the tier answered, and
// an error that ends the call at once (a stream cut after its first chunk, a refusal, a
// client that left). A hedged call runs two at once, each with a log of its own.
type askFunc[T any] func(ctx context.Context, tr *tier, below []tier, log *callLog) (T, bool, error)

// Hedge is a task's or route's hedging (DESIGN §2 step 3): when the tier asked has not
// answered after After (or, with P95, after its measured p95 latency), the next tier is asked
// the same, at most Max times a call (each time one tier to the next: a second hedge may go
// out from below the first pair); the first valid answer wins and the other attempt is
// cancelled. Each hedge takes a retry from the tier's provider's retry budget, so hedges stay
// a share of the calls; one that the next tier does not admit (its bulkhead, the budget left)
// gives it back and is not counted, since none went out. A streamed call is never hedged: its
// answer is the first to begin.
type Hedge struct {
	After time.Duration
	P95   bool
	Max   int
}

// check refuses a hedge that cannot work.
func (h Hedge) check() error {
	switch {
	case h.Max < 0:
		return fmt.Errorf("hedge max %d is negative", h.Max)
	case h.After < 0:
		return fmt.Errorf("hedge after %v is negative", h.After)
	case h.Max > 0 && !h.P95 && h.After == 0:
		return errors.New("hedge needs after: p95 or a duration")
	}
	return nil
}

// errHedgeLost is the cause of the context of an attempt that another tier answered first.
var errHedgeLost = errors.New("cancelled: another tier answered first (hedge)")

// hedgeKey marks the context of a hedge's ask: the tier asked because the one above was slow.
type hedgeKey struct{}

// isHedge reports whether ctx is a hedge's ask's.
func isHedge(ctx context.Context) bool { return ctx.Value(hedgeKey{}) != nil }

// eachTier is the one tier loop of tasks, routes and streams: it asks the tiers in order
// until one answers (two at once where the call hedges), and notes in log the reason the
// first tier did not. It returns the tier that answered (or that ended the call with an
// error) and its answer, or nil when every tier was skipped or failed; and the context's
// error when the caller left.
func eachTier[T any](e *Engine, ctx context.Context, tiers []tier, streamed bool, hedge Hedge, log *callLog, ask askFunc[T]) (*tier, T, error) {
	var zero T
	hedges := 0
	for i := 0; i < len(tiers); i++ {
		first := len(log.attempts)
		var b branch[T]
		if delay, ok := e.hedgeDelay(hedge, streamed, tiers, i, hedges); ok {
			var hedged bool
			b, hedged = hedgedAsk(e, ctx, tiers, i, delay, log, ask)
			if hedged {
				hedges++
				i++ // the next tier was asked too: the loop goes on below it
			}
		} else {
			b.tr = &tiers[i]
			b.v, b.ok, b.err = ask(ctx, b.tr, tiers[i+1:], log)
		}
		if first == 0 && first < len(log.attempts) && (!b.ok || b.tr != &tiers[0]) {
			// The first tier's first outcome (a hedge that won included: the first tier's
			// attempt reads deadline): a retry refused by a gate does not hide the 502.
			log.reason = afloat.Reason(log.attempts[first].Outcome)
		}
		if b.ok {
			return b.tr, b.v, nil
		}
		if b.err != nil {
			return b.tr, zero, b.err
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// The caller left: no further tier, no policy.
			return nil, zero, ctx.Err()
		}
	}
	return nil, zero, nil
}

// branch is what one tier's ask came to. panicked holds what the ask panicked with, re-raised
// on the call's goroutine (where the gateway recovers it) once both asks are done.
type branch[T any] struct {
	tr       *tier
	v        T
	ok       bool
	err      error
	log      callLog
	panicked any
}

// hedgeDelay is how long tier i may take before the call hedges to tier i+1, and whether it
// may: the call hedges (hedge.Max not reached, not streamed), a tier follows, and the delay
// is known (a fixed After, or the tier's p95 once measured).
func (e *Engine) hedgeDelay(h Hedge, streamed bool, tiers []tier, i, hedges int) (time.Duration, bool) {
	if streamed || hedges >= h.Max || i+1 >= len(tiers) {
		return 0, false
	}
	if !h.P95 {
		return h.After, h.After > 0
	}
	p, ok := tiers[i].est.Percentile()
	return p, ok && p > 0
}

// hedgedAsk asks tier i, and tier i+1 too if tier i has not answered after delay and its
// provider's retry budget allows. The first valid answer wins and the other ask is cancelled
// (errHedgeLost); both asks' attempts are recorded in log, tier i's first. It reports whether
// tier i+1 was asked.
func hedgedAsk[T any](e *Engine, ctx context.Context, tiers []tier, i int, delay time.Duration, log *callLog, ask askFunc[T]) (branch[T], bool) {
	start := func(ctx context.Context, tr *tier, below []tier) (chan branch[T], context.CancelCauseFunc) {
		bctx, cancel := context.WithCancelCause(ctx)
		done := make(chan branch[T], 1)
		go func() {
			b := branch[T]{tr: tr}
			defer func() {
				if v := recover(); v != nil {
					b.panicked, b.ok, b.err = v, false, nil
				}
				done <- b
			}()
			b.v, b.ok, b.err = ask(bctx, tr, below, &b.log)
		}()
		return done, cancel
	}
	// settled merges a finished branch into the call's log and re-raises its panic here.
	settled := func(bs ...*branch[T]) {
		for _, b := range bs {
			log.merge(&b.log)
		}
		for _, b := range bs {
			if b.panicked != nil {
				panic(b.panicked)
			}
		}
	}
	primary, cancelPrimary := start(ctx, &tiers[i], tiers[i+1:])
	defer cancelPrimary(nil)
	timer := e.clock.NewTimer(delay)
	defer timer.Stop()
	select {
	case b := <-primary: // answered, or failed, before the hedge was due
		settled(&b)
		return b, false
	case <-timer.Chan():
	}
	// A hedge to a tier whose circuit is open would be skipped at once: none goes out, and it
	// takes nothing from the budget.
	var taken time.Time
	ok := false
	if tiers[i+1].up.br.State(ctx) != breaker.StateOpen {
		taken, ok = tiers[i].up.budget.take()
	}
	if !ok {
		b := <-primary
		settled(&b)
		return b, false
	}
	hedge, cancelHedge := start(context.WithValue(ctx, hedgeKey{}, true), &tiers[i+1], tiers[i+2:])
	defer cancelHedge(nil)
	var got [2]*branch[T]
	var win *branch[T]
	for got[0] == nil || got[1] == nil {
		var b branch[T]
		var k int
		select {
		case b = <-primary:
		case b = <-hedge:
			k = 1
		}
		got[k] = &b
		if k == 1 {
			if b.log.sent > 0 {
				tiers[i].hedges.Inc()
			} else {
				// The next tier did not admit the hedge (its bulkhead, the budget left, a
				// circuit opened meanwhile): none went out, and it takes nothing from the budget.
				tiers[i].up.budget.give(taken)
			}
		}
		if win == nil && (b.ok || b.err != nil || b.panicked != nil) {
			// A valid answer, or an error that ends the call: the other ask is not needed.
			win = &b
			if k == 0 {
				cancelHedge(errHedgeLost)
			} else {
				cancelPrimary(errHedgeLost)
			}
		}
	}
	settled(got[0], got[1])
	for _, b := range got {
		if b != win && b.ok && b.log.usedCost > 0 {
			// The loser answered too: an answer paid for, not used.
			b.tr.wasted.Add(b.log.usedCost)
			b.tr.spend.unused(e.clock.Now(), b.log.usedCost)
		}
	}
	if win != nil {
		return *win, true
	}
	return *got[1], true // neither answered: the cascade goes on below the hedge
}

// reserve is the time an attempt leaves for the tiers below it, so that when it fails the
// next tier can still answer: the measured p95 of the first tier below whose circuit is not
// open (its shortest read timeout until measured), with that tier's need; 0, 0 when none is
// left.
func (e *Engine) reserve(ctx context.Context, below []tier, streamed bool) (reserve, next time.Duration) {
	for i := range below {
		if below[i].up.br.State(ctx) == breaker.StateOpen {
			continue
		}
		est := below[i].estimator(streamed)
		return reserveOf(est), need(est)
	}
	return 0, 0
}

// maxReserve is the largest reserve any tier below may need, read without their breakers.
func maxReserve(below []tier, streamed bool) time.Duration {
	var m time.Duration
	for i := range below {
		m = max(m, reserveOf(below[i].estimator(streamed)))
	}
	return m
}

func reserveOf(est *latency.Estimator) time.Duration {
	if p, ok := est.Percentile(); ok {
		return p
	}
	return est.Config().Min
}

// estimator returns the tier's latency estimator: time to the first chunk for a stream
// (routes learn it apart), time to the whole answer otherwise.
func (tr *tier) estimator(streamed bool) *latency.Estimator {
	if streamed && tr.streamEst != nil {
		return tr.streamEst
	}
	return tr.est
}
