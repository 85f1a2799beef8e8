package cascade

import (
	"context"
	"errors"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/latency"
)

// askFunc asks one tier, given the tiers below it (which its attempts keep a reserve for). It
// reports whether the tier answered, and returns an error that ends the call at once (a
// stream cut after its first chunk, a refusal, a client that left).
type askFunc func(ctx context.Context, tr *tier, below []tier) (bool, error)

// eachTier is the one tier loop of tasks, routes and streams: it asks the tiers in order
// until one answers, and notes in log the reason the first tier did not. It returns the tier
// that answered (or that ended the call with an error), or nil when every tier was skipped or
// failed; and the context's error when the caller left.
func (e *Engine) eachTier(ctx context.Context, tiers []tier, streamed bool, log *callLog, ask askFunc) (*tier, error) {
	for i := range tiers {
		tr := &tiers[i]
		first := len(log.attempts)
		answered, err := ask(ctx, tr, tiers[i+1:])
		if answered {
			return tr, nil
		}
		if i == 0 && first < len(log.attempts) {
			// The tier's first outcome: a retry refused by a gate does not hide the 502.
			log.reason = afloat.Reason(log.attempts[first].Outcome)
		}
		if err != nil {
			return tr, err
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// The caller left: no further tier, no policy.
			return nil, ctx.Err()
		}
	}
	return nil, nil
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
