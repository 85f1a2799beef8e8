package cascade

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/limit"
	"github.com/afloat-dev/afloat/shed"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"
)

// callLog is what one call records across its tiers: every attempt, the usage they add up
// to, and the reason the first tier did not answer. Tasks and routes turn it into their
// envelope once the call is over.
type callLog struct {
	attempts []afloat.Attempt
	usage    afloat.Usage
	reason   afloat.Reason
	// usedCost is the cost of the answer taken (a hedge's loser that answered too has its
	// counted as wasted once the other won).
	usedCost float64
	// sent counts the attempts that reached a provider (not refused at a gate).
	sent int
}

// merge adds a hedged ask's attempts and usage to the call's log.
func (l *callLog) merge(o *callLog) {
	l.attempts = append(l.attempts, o.attempts...)
	l.usage = l.usage.Add(o.usage)
	l.sent += o.sent
}

// spec is one attempt to make on a tier: what to send, and how to judge the answer.
type spec struct {
	tr    *tier
	req   *afloat.Request
	reask bool
	// try counts the attempts on this tier before this one (retries).
	try int
	// below are the tiers after this one, which the attempt keeps a reserve for (see allot).
	below []tier
	// budget is the call's whole budget (the task's or route's), what a fresh call has.
	budget time.Duration
	// emit, when set, streams the answer to the client; nil makes a Complete call.
	emit EmitFunc
	// critical: the call's criticality is critical; it waits for a bulkhead slot ahead of
	// the others (limit.AcquireAhead), never behind enrichment.
	critical bool
}

// checkFunc judges an answer against the call's contract: it returns the answer to keep
// (normalized), or a *afloat.ContractError (the answer as it came is kept for the re-ask). A
// nil checkFunc accepts every answer. It travels beside the spec, not in it, so that the
// request escaping into the provider does not take the caller's closure to the heap.
type checkFunc func(*afloat.Response) (*afloat.Response, error)

// settled is how an attempt ended.
type settled struct {
	resp    *afloat.Response // the answer; for a stream cut after its first chunk, what came
	outcome afloat.Outcome
	err     error // the provider's failure or the contract violation; nil when ok
	emitted bool  // a chunk of the answer reached the client: no other attempt may answer
	failed  bool  // the provider failed (not a gate, a cut by the budget or an invalid answer): a retry may help
}

// clientGone wraps an error of EmitFunc: the client left in the middle of a stream.
type clientGone struct{ err error }

func (c *clientGone) Error() string { return "client gone: " + c.err.Error() }
func (c *clientGone) Unwrap() error { return c.err }

// attempt is one admitted request to a provider. It holds a breaker permit and a bulkhead
// slot from admit until settle, which runs exactly once.
type attempt struct {
	e      *Engine
	s      spec
	est    *latency.Estimator
	permit breaker.Permit
	// slot is the bulkhead's; settle sets load, what the attempt says of the provider's
	// capacity, which releasing the slot reports.
	slot limit.Permit
	load limit.Outcome
	read time.Duration // the provider's read timeout for this task (timeouts.max for a probe)
	// timeout is what the attempt was given (see allot). fair is the least time in which the
	// provider was due to answer (see fairTime): a cut before it says nothing about the
	// provider, which had less than it needs. p95 is the measured p95, 0 until measured.
	timeout time.Duration
	fair    time.Duration
	p95     time.Duration
	began   time.Time
	// lastChunk is when a stream's last chunk arrived; zero before the first.
	lastChunk time.Time
	// sample is the latency to measure for the estimator; 0 means the whole attempt (a
	// stream measures the time to its first chunk).
	sample time.Duration
	// actx is the attempt's context: the call's, cut after timeout. A stream's is cancelled
	// by timer, re-armed for each gap between chunks, which sets fired; a Complete call's
	// has its own deadline.
	actx  context.Context
	timer clockwork.Timer
	fired *atomic.Bool
	// settled is set once settle has started: a panic after it (in the contract check)
	// must not report the attempt twice.
	settled bool
	// skipped counts the stream events the adapter could not parse (afloat.SkipCounter).
	skipped int
	// span is the attempt's trace span from run until settle; nil when tracing is off.
	span trace.Span
	// wire tells when the attempt's HTTP request reached the network (see wire). It is the
	// attempt's own: a retry reuses the attempt, and a hook of the try before it may still run.
	wire *wire
}

// cut reports whether the attempt's own time ran out (rather than the call's, in ctx).
func (a *attempt) cut(ctx context.Context) bool {
	if a.fired != nil && a.fired.Load() {
		return true
	}
	// A stream's context ends only by its timer before settle; a Complete call's, by its own
	// deadline or the call's.
	return a.actx.Err() != nil && ctx.Err() == nil
}

// admit passes the gates of one tier in DESIGN order: circuit, deadline, bulkhead. It returns
// the outcome of the gate that refused, or OutcomeOK with a filled in: an attempt that the
// caller must run (which settles it).
func (e *Engine) admit(ctx context.Context, s *spec, a *attempt) afloat.Outcome {
	u := s.tr.up
	permit, err := u.br.Allow(ctx)
	if err != nil {
		return afloat.OutcomeCircuitOpen
	}
	est := s.tr.estimator(s.emit != nil)
	read := est.ReadTimeout()
	s.tr.readTimeout.Set(read.Seconds())
	if permit.Probe() || e.saturated(read) {
		// A probe may wait up to the longest read timeout: a provider that has become slower
		// but still answers confirms its new latency instead of being cut at the old one
		// forever. So may an attempt made while afloat itself is saturated: the wait may be
		// afloat's own queueing, and a critical call cut for it would fail closed for no fault
		// of the provider's. Both still keep the reserve of the tiers below.
		read = est.Config().Max
	}
	streamed := s.emit != nil
	fair := fairTime(est, read, s.budget)
	p95, measured := est.Percentile()
	floor := need(est) // the least the reserve may cut this attempt to: its need, its p95 once measured
	if measured {
		floor = max(floor, p95)
	}
	timeout, ok := allot(remaining(ctx, e.clock), read, need(est), floor, maxReserve(s.below, streamed),
		func() (time.Duration, time.Duration) { return e.reserve(ctx, s.below, streamed) })
	if !ok {
		permit.Cancel(ctx)
		return afloat.OutcomeDeadline
	}
	slot, err := s.acquire(ctx, u.lim, 0)
	if err != nil {
		// Over the limit: wait for a slot, within what the budget leaves above this attempt's
		// need and the reserve of the tiers below (half of it, at most queue_wait), so that a
		// burst is smoothed instead of spilled to the next tier; then the attempt gets what is
		// left.
		reserve, _ := e.reserve(ctx, s.below, streamed)
		if wait := min(u.queueWait, (remaining(ctx, e.clock)-need(est)-reserve)/2); wait > 0 {
			slot, err = s.acquire(ctx, u.lim, wait)
		}
		if err == nil {
			timeout, ok = allot(remaining(ctx, e.clock), read, need(est), floor, maxReserve(s.below, streamed),
				func() (time.Duration, time.Duration) { return e.reserve(ctx, s.below, streamed) })
			if !ok {
				slot.Release(limit.Ignore)
				permit.Cancel(ctx)
				return afloat.OutcomeDeadline
			}
		}
	}
	e.setConcurrency(u)
	if err != nil {
		permit.Cancel(ctx)
		if ctx.Err() != nil {
			// The call ended while it waited in the queue (another tier answered a hedge, the
			// budget ran out, the client left): not the bulkhead's refusal.
			return afloat.OutcomeDeadline
		}
		return afloat.OutcomeBulkhead
	}
	if s.try == 0 {
		u.budget.call()
	}
	*a = attempt{e: e, s: *s, est: est, permit: permit, slot: slot, read: read, timeout: timeout,
		fair: fair, p95: p95, began: e.clock.Now(), wire: &wire{clock: e.clock}}
	return afloat.OutcomeOK
}

// acquire takes a bulkhead slot of l for the attempt: a critical call's ahead of the others.
func (s *spec) acquire(ctx context.Context, l *limit.Limiter, wait time.Duration) (limit.Permit, error) {
	if s.critical {
		return l.AcquireAhead(ctx, wait)
	}
	return l.Acquire(ctx, wait)
}

// fairTime is the least time in which a provider was due to answer: its measured p95 (it
// answers within that 95 times in 100), or, until that is measured, half of what a fresh call
// gives it (its read timeout, capped by the whole budget). A cut before the fair time is the
// budget's doing (the caller's own deadline, or earlier attempts, left too little) and moves
// neither the breaker nor the estimate; a cut after it is the provider's timeout.
func fairTime(est *latency.Estimator, read, budget time.Duration) time.Duration {
	if p, ok := est.Percentile(); ok {
		return p
	}
	return min(read, budget) / 2
}

// allot returns the time one attempt gets: the provider's read timeout capped by the budget
// left, and capped further so that the next tier keeps its reserve (its p95), but never below
// floor (the attempt's own need, or its measured p95 once there is one; floor ≥ need), and
// only when the cap leaves the next tier at least its own need (else it would be skipped
// anyway, and the cap would only cut this attempt short). The cap stops at a measured p95, the
// attempt's fair time, because a cut before it is not the provider's fault (see blamed): were
// afloat's own reserve to cut every call sooner, a hung provider would never be to blame and
// its breaker would never open, and a healthy one would lose every call slower than the cap.
// below reports the reserve and need of the next tier whose circuit is not open (0, 0 when
// none); it reads breakers, so it is called only when the cap may matter: when what the
// attempt leaves is under maxReserve, the largest reserve of any tier below. ok is false when
// less than need is left: the tier is skipped at once, without a call.
func allot(left, read, need, floor, maxReserve time.Duration, below func() (reserve, need time.Duration)) (time.Duration, bool) {
	if left <= 0 || left < need {
		return 0, false
	}
	t := min(read, left)
	if left-t < maxReserve {
		if reserve, next := below(); left-t < reserve {
			if capped := max(floor, left-reserve); left-capped >= next {
				t = min(t, capped)
			}
		}
	}
	return t, true
}

// need is the least time worth starting an attempt with: the provider's median latency for
// the task (an attempt given that is as likely to be answered as not), or the shortest read
// timeout until the median is measured.
func need(est *latency.Estimator) time.Duration {
	if m, ok := est.Median(); ok {
		return m
	}
	return est.Config().Min
}

// remaining returns the budget left in ctx on clk; a ctx without a deadline has all the time
// there is.
func remaining(ctx context.Context, clk clockwork.Clock) time.Duration {
	if ctx.Err() != nil {
		return 0
	}
	at, ok := ctx.Deadline()
	if !ok {
		return time.Duration(1<<63 - 1)
	}
	return at.Sub(clk.Now())
}

// run makes an admitted attempt and settles it. Settling is deferred, so a provider that
// panics still returns its bulkhead slot and breaker permit (it counts as a failure of the
// provider) before the panic goes on up, as gobreaker's Execute does.
func (e *Engine) run(ctx context.Context, log *callLog, a *attempt, check checkFunc) settled {
	s := &a.s
	var cancel context.CancelFunc
	pctx := a.wire.trace(e.startAttempt(ctx, a)) // the provider's context: ctx under the attempt's span, traced
	if s.emit != nil {
		fired := new(atomic.Bool)
		actx, stop := context.WithCancel(pctx)
		a.timer = e.clock.AfterFunc(a.timeout, func() {
			fired.Store(true)
			stop()
		})
		a.actx, cancel, a.fired = actx, stop, fired
	} else {
		a.actx, cancel = latency.WithTimeout(pctx, e.clock, a.timeout)
	}
	finished := false
	defer func() {
		if finished {
			return
		}
		v := recover() // nil for runtime.Goexit, which goes on by itself
		if !a.settled {
			a.settle(ctx, log, nil, nil, &afloat.ProviderError{Provider: s.tr.up.name, Kind: afloat.Unavailable,
				Err: fmt.Errorf("provider panicked: %v", v)}, false)
		}
		a.release(cancel)
		if v != nil {
			panic(v)
		}
	}()
	var out settled
	if s.emit != nil {
		resp, emitted, err := a.stream(a.actx)
		out = a.settle(ctx, log, check, resp, err, emitted)
	} else {
		resp, err := s.tr.up.p.Complete(a.actx, s.req)
		out = a.settle(ctx, log, check, resp, err, false)
	}
	finished = true
	a.release(cancel)
	return out
}

// release frees what the attempt holds once it is settled: its timer, its context and its
// bulkhead slot.
func (a *attempt) release(cancel context.CancelFunc) {
	if a.timer != nil {
		a.timer.Stop()
	}
	cancel()
	a.closeSpan()
	a.slot.Release(a.load)
	a.e.setConcurrency(a.s.tr.up)
}

// saturated reports whether afloat itself is saturated for an attempt given d: the shedder
// sheds (enrichment at least), or, shedding on or off, goroutines wait to run for a quarter
// of d or more (the scheduler's p99): an answer passes through a few goroutines on its way
// (the connection's reader, the attempt, the handler), and four such waits may add up to d
// in afloat's own queues. A cut then is not the provider's, and a latency says nothing of
// it. A moderately loaded process (a p99 of tens of milliseconds) still blames a provider
// that hangs past a 200 ms read timeout, and its breaker opens.
func (e *Engine) saturated(d time.Duration) bool {
	return e.shed.Level() != shed.Normal || e.shed.Pressure() >= d/4
}

// sample is what an answer tells the provider's concurrency limit: a latency says nothing of
// the provider while afloat's own queueing may have added the rise that would lower the
// limit (limit.Slack), or afloat's overload would shrink a healthy provider's limit and
// spill its calls (a thousand streams opening at once inflate their own first chunks).
func (e *Engine) sample(o limit.Outcome) limit.Outcome {
	if o == limit.Success && e.saturated(limit.Slack) {
		return limit.Ignore
	}
	return o
}

// setConcurrency exports the provider's concurrency limit and queue now.
func (e *Engine) setConcurrency(u *upstream) {
	u.limitGauge.Set(float64(u.lim.Limit()))
	u.queuedGauge.Set(float64(u.lim.Queued()))
}

// settle is the one place that classifies how an attempt ended, reports it to the breaker,
// feeds the estimator, judges the answer, counts the metrics and records the attempt. ctx is
// the call's context (the attempt's own is gone by now).
func (a *attempt) settle(ctx context.Context, log *callLog, check checkFunc, resp *afloat.Response, err error, emitted bool) settled {
	a.settled = true
	e, tr := a.e, a.s.tr
	took := e.clock.Since(a.began)
	rec := afloat.Attempt{Latency: took, Reask: a.s.reask}
	_, gone := err.(*clientGone)
	// A cut: the attempt's own timer or the call's deadline ended it. Only a failure that
	// a cut explains is read as one: an HTTP error that arrived as the timer fired stays
	// what it is (a 429 keeps its wait, a 400 never moves the breaker).
	cut := err != nil && cutError(err) && (a.cut(ctx) || ctx.Err() != nil)
	// What the provider had of the attempt: the time since its request reached the network.
	waited := a.wire.waited(a.began, a.began.Add(took))
	had := took - waited
	failed, lost := false, false
	switch {
	case err == nil:
		a.permit.Done(ctx, nil)
		a.observe(took)
		rec.Outcome = afloat.OutcomeOK
	case cut && context.Cause(ctx) == errHedgeLost:
		// Another tier answered first. Nothing to say about the provider's health; but when
		// it had been hedged from (it was past its p95), its latency was at least this: the
		// estimate keeps the tail the hedge cut off, or its p95 would fall with every hedge won.
		a.permit.Cancel(ctx)
		if a.p95 > 0 && took >= a.p95 {
			a.est.Observe(took) // the tier hedged from; not the hedge, cut when it had barely begun
		}
		rec.Outcome, rec.Error = afloat.OutcomeDeadline, errHedgeLost.Error()
		lost = true
	case gone || cut && errors.Is(ctx.Err(), context.Canceled):
		// The client left: nothing to say about the provider.
		a.permit.Cancel(ctx)
		rec.Outcome, rec.Error = afloat.OutcomeDeadline, "caller cancelled"
	case cut && had == 0 && waited > 0:
		// Its request never reached the network: the wait was afloat's own (its goroutines
		// to run, the transport's queue for a connection), not the provider's.
		a.permit.Cancel(ctx)
		rec.Outcome, rec.Error = afloat.OutcomeDeadline, "cut before its request reached the provider"
	case cut && e.saturated(a.timeout-waited):
		// afloat itself was saturated (its goroutines waited to run): the wait may be its own
		// queueing, not the provider's, and afloat's overload must never look like a
		// provider's outage. It moves neither the breaker nor the estimate. The quarter rule
		// holds against what the provider had of the timeout: an attempt whose connect began
		// late had only the rest.
		a.permit.Cancel(ctx)
		rec.Outcome, rec.Error = afloat.OutcomeDeadline, "cut while afloat itself was saturated"
	case !cut && afloat.IsTimeout(err) && e.saturated(had):
		// A timeout of the client's own (the connect's, a response header's) while afloat was
		// saturated is read as a cut is: the connection may well have been made, or the answer
		// have arrived, while afloat's goroutines waited to run (an overloaded gateway saw its
		// connects to healthy mocks time out, and opened both their breakers).
		a.permit.Cancel(ctx)
		rec.Outcome, rec.Error = afloat.OutcomeDeadline, "timed out while afloat itself was saturated: "+err.Error()
	case cut && !a.blamed(had):
		// Cut before the provider was due to answer (the caller's deadline, or what earlier
		// attempts left of the budget): it moves neither the breaker nor the estimate.
		a.permit.Cancel(ctx)
		rec.Outcome, rec.Error = afloat.OutcomeDeadline, "cut by the call's budget"
	default:
		if cut && !afloat.IsTimeout(err) {
			err = &afloat.ProviderError{Provider: tr.up.name, Kind: afloat.Unavailable, Timeout: true, Err: err}
		}
		a.permit.Done(ctx, err)
		if k := afloat.KindOf(err); k == afloat.Contract || k == afloat.Refused {
			a.observe(took) // the provider answered, if only to refuse
		}
		rec.Outcome, rec.Error = afloat.OutcomeError(err), err.Error()
		failed = true
	}
	a.load = e.sample(loadOf(rec.Outcome, err))
	var cost float64
	billed := resp != nil
	switch {
	case resp != nil:
		if err != nil && resp.Usage == (afloat.Usage{}) && (resp.Content != "" || len(resp.ToolCalls) > 0) {
			// Cut before the provider sent its usage: what it generated is billed anyway.
			resp.Usage = estimateUsage(a.s.req, resp)
		}
		cost = e.account(tr, log, resp)
	case lost:
		// The hedge's other ask ended the call first and this one was cancelled: the provider
		// had the prompt and bills it. Its input is estimated; what it had begun to generate
		// is not in the estimate.
		cost = e.account(tr, log, &afloat.Response{Usage: estimateUsage(a.s.req, nil)})
		billed = true
	}
	if rec.Outcome == afloat.OutcomeOK && check != nil {
		checked, verr := check(resp)
		if verr != nil {
			checked = resp
			err = verr
			rec.Outcome, rec.Error = afloat.OutcomeContractViolation, verr.Error()
			e.violation(tr, verr)
		}
		resp = checked
	}
	switch {
	case rec.Outcome == afloat.OutcomeOK:
		if tr.answered != nil {
			tr.answered.Inc()
		}
	case rec.Outcome == afloat.OutcomeRefused:
		tr.refusals.Inc()
	}
	used := rec.Outcome == afloat.OutcomeOK && err == nil
	if cost > 0 && !used {
		tr.wasted.Add(cost) // an answer not used: the caller is not billed for it
	}
	if used {
		log.usedCost = cost
	}
	if billed {
		tr.spend.record(e.clock.Now(), cost, used)
	}
	if a.skipped > 0 {
		tr.skipped.Add(float64(a.skipped))
	}
	a.endAttempt(ctx, rec, resp, err)
	e.record(log, tr, rec)
	log.sent++
	return settled{resp: resp, outcome: rec.Outcome, err: err, emitted: emitted, failed: failed}
}

// loadOf is what an attempt's outcome says of its provider's capacity: an answer's latency
// is a sample, a timeout or an overload answer (429, 503, 529) a drop, the rest (another
// failure, a cut by the budget, a client gone, a bad request, a spent quota) nothing.
func loadOf(o afloat.Outcome, err error) limit.Outcome {
	switch o {
	case afloat.OutcomeOK, afloat.OutcomeContractViolation, afloat.OutcomeRefused:
		return limit.Success
	case afloat.OutcomeTimeout, afloat.OutcomeRateLimited:
		return limit.Dropped
	case afloat.OutcomeUnavailable:
		// An overload answer (503, 529) is a drop; another failure (a 500, a refused
		// connection) says the provider is broken, not full: the breaker's business.
		var pe *afloat.ProviderError
		if errors.As(err, &pe) && (pe.Status == 503 || pe.Status == 529) {
			return limit.Dropped
		}
	}
	return limit.Ignore
}

// blamed reports whether a cut is the provider's timeout, had being what the provider had
// of the attempt (since its request reached the network, see wire): it had at least its fair
// time to answer (for a stream past its first chunk: the gap it stalled for
// reached its fair time, or the stream's idle timeout).
func (a *attempt) blamed(had time.Duration) bool {
	if !a.lastChunk.IsZero() {
		return a.e.clock.Since(a.lastChunk) >= min(a.fair, a.s.tr.up.streamIdle)
	}
	return min(had, a.timeout) >= a.fair
}

// cutError reports whether err is what a cut call returns: a context's error, a timeout, or
// a transport failure without a status, rather than an answer of the provider's.
func cutError(err error) bool {
	if errors.Is(err, context.Canceled) || afloat.IsTimeout(err) {
		return true
	}
	var pe *afloat.ProviderError
	return !errors.As(err, &pe) || pe.Status == 0
}

// observe feeds the estimator and the latency histogram with an answer's latency. An answer
// to an attempt that was given less than the provider's p95 is left out of the estimate: only
// answers under that cut could arrive, and they would drag the estimate down.
func (a *attempt) observe(took time.Duration) {
	d := took
	if a.sample > 0 {
		d = a.sample
	}
	if a.timeout >= a.p95 {
		a.est.Observe(d)
	}
	a.s.tr.latency.Observe(took.Seconds())
}

// call makes attempts on one tier until one answers or none may follow: a transient failure
// is retried on the same provider (see retryable); an answer, a contract violation (re-asked
// by the caller) or a stream that reached the client is never retried.
func (e *Engine) call(ctx context.Context, log *callLog, s spec, check checkFunc) settled {
	var a attempt
	for ; ; s.try++ {
		if outcome := e.admit(ctx, &s, &a); outcome != afloat.OutcomeOK {
			e.skipped(ctx, &s, outcome)
			e.record(log, s.tr, afloat.Attempt{Outcome: outcome, Reask: s.reask})
			return settled{outcome: outcome}
		}
		out := e.run(ctx, log, &a, check)
		if !out.failed || out.emitted {
			return out
		}
		wait, ok := e.retryable(ctx, s, out.err)
		if !ok || !sleep(ctx, e.clock, wait) {
			return out
		}
		s.tr.retries.Inc()
	}
}

// retryable decides whether a failed attempt is retried on the same provider, and after what
// wait: only a transient failure (afloat.ProviderError.Transient: never a connection that was
// not established, which goes to the next tier at once), within the retry count and budget,
// with the breaker still closed and, after the wait, at least the provider's median left.
func (e *Engine) retryable(ctx context.Context, s spec, err error) (time.Duration, bool) {
	u := s.tr.up
	if s.try >= u.retry.Max {
		return 0, false
	}
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || !pe.Transient() {
		return 0, false
	}
	wait := time.Duration(float64(u.retry.Backoff) * (0.5 + e.rand()))
	if pe.RetryAfter > 0 {
		if pe.RetryAfter > u.retry.MaxWait {
			return 0, false
		}
		wait = pe.RetryAfter
	}
	if remaining(ctx, e.clock)-wait < need(s.tr.estimator(s.emit != nil)) {
		return 0, false
	}
	if u.br.State(ctx) != breaker.StateClosed {
		return 0, false
	}
	if _, ok := u.budget.take(); !ok {
		return 0, false
	}
	return wait, true
}

// sleep waits d on clk, or until ctx is done; it reports whether the wait completed.
func sleep(ctx context.Context, clk clockwork.Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := clk.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}

// record appends an attempt to the call's log and counts it.
func (e *Engine) record(log *callLog, tr *tier, a afloat.Attempt) {
	a.Provider, a.Tier, a.PromptVersion = tr.up.name, tr.idx, tr.version
	if log.attempts == nil {
		log.attempts = make([]afloat.Attempt, 0, 4)
	}
	log.attempts = append(log.attempts, a)
	tr.attempts[a.Outcome].Inc()
}

// account prices a response's usage by its provider's price (stamped on the response, whose
// answer a chat client is billed alone), adds it to the call's log and the tier's metrics,
// and returns the cost.
func (e *Engine) account(tr *tier, log *callLog, resp *afloat.Response) float64 {
	usage := resp.Usage
	usage.Cost, usage.Currency = tr.up.price.cost(usage), tr.up.price.Currency
	resp.Usage = usage
	tr.tokens.Add(float64(usage.InputTokens + usage.OutputTokens))
	tr.cost.Add(usage.Cost)
	log.usage = log.usage.Add(usage)
	return usage.Cost
}

// violation counts a contract violation by its stage.
func (e *Engine) violation(tr *tier, err error) {
	stage := "schema"
	var ce *afloat.ContractError
	if errors.As(err, &ce) {
		stage = ce.Stage
	}
	e.metrics.ContractViolations.WithLabelValues(tr.scope, tr.up.name, stage).Inc()
	if c := tr.answers[stage]; c != nil {
		c.Inc()
	}
}
