package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/normalize"
	"github.com/afloat-dev/afloat/review"
	"github.com/jonboulle/clockwork"
)

// enqueueTimeout bounds the commit of a review item, which runs even when the call's own
// deadline has passed: nothing is lost because the budget ran out.
const enqueueTimeout = 5 * time.Second

// RunJSON runs the flow of one call and returns the envelope with the answer as JSON. See
// afloat.Runner for its error contract; an *InputError names a missing input field.
func (t *Task) RunJSON(ctx context.Context, in afloat.Input) (afloat.Result[json.RawMessage], error) {
	clk := t.e.clock
	start := clk.Now()
	res := afloat.Result[json.RawMessage]{Task: t.name, Tier: -1}
	if err := t.checkInput(in); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	ctx, cancel := t.e.withBudget(ctx, t.budget)
	defer cancel()

	doc, err := t.e.flags.Flags(ctx)
	if err != nil {
		t.e.log.Warn("flags unreadable; task treated as on", "task", t.name, "err", err)
	}
	if err == nil && !doc.Allow(t.name, Tenant(ctx)) {
		res.Reason = afloat.ReasonKillSwitch
		return t.exhausted(ctx, in, res, start)
	}

	for i := range t.tiers {
		tr := &t.tiers[i]
		val, outcome := t.runTier(ctx, tr, in, &res)
		if outcome == afloat.OutcomeOK {
			res.Value, res.Source = val, afloat.SourceModel
			res.Degraded = tr.idx > 0
			res.Provider, res.Tier, res.PromptVersion = tr.up.name, tr.idx, tr.version
			return t.finish(res, start), nil
		}
		if i == 0 {
			res.Reason = afloat.Reason(outcome)
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// The caller left: no further tier, no policy.
			return res, ctx.Err()
		}
	}
	return t.exhausted(ctx, in, res, start)
}

// runTier asks one tier, re-asking up to maxReasks times after a contract violation, and
// returns the valid answer or the tier's final outcome.
func (t *Task) runTier(ctx context.Context, tr *tier, in afloat.Input, res *afloat.Result[json.RawMessage]) (json.RawMessage, afloat.Outcome) {
	msgs, err := tr.prompt.Render(in)
	if err != nil {
		t.e.addAttempt(res, tr, afloat.Attempt{Outcome: afloat.OutcomeClientError, Error: err.Error()})
		return nil, afloat.OutcomeClientError
	}
	req := &afloat.Request{
		Messages: msgs, ResponseFormat: t.format, MaxTokens: tr.maxTokens,
		Temperature: tr.temperature, Task: t.name,
	}
	for reask := 0; ; reask++ {
		resp, outcome := t.e.call(ctx, tr, req, reask > 0, res)
		if outcome != afloat.OutcomeOK {
			return nil, outcome
		}
		out := t.contract.Normalize(resp.Content)
		if out.Steps != 0 {
			t.steps.count(out.Steps)
		}
		if out.Err == nil {
			tr.attempts[afloat.OutcomeOK].Inc()
			tr.answers["ok"].Inc()
			return out.Value, afloat.OutcomeOK
		}
		t.e.violation(t.name, tr, res, out.Err)
		if reask >= t.maxReasks {
			return nil, afloat.OutcomeContractViolation
		}
		tr.reasks.Inc()
		req = t.e.reaskRequest(tr, req, resp.Content, out.Err, t.contract.Schema())
	}
}

// reaskRequest appends the model's answer and the clarifying message to the conversation:
// the tier's own re-ask template when it has one, else normalize.ReaskText.
func (e *Engine) reaskRequest(tr *tier, req *afloat.Request, answer string, verr error, schema json.RawMessage) *afloat.Request {
	var extra []afloat.Message
	if tr.reask != nil {
		msgs, err := tr.reask.Render(normalize.ReaskData(verr, schema, answer))
		if err == nil {
			extra = msgs
		} else {
			e.log.Error("re-ask template failed; the default message is sent", "provider", tr.up.name, "err", err)
		}
	}
	if extra == nil {
		extra = []afloat.Message{{Role: afloat.RoleUser, Content: normalize.ReaskText(verr, schema)}}
	}
	next := *req
	next.Messages = append(append(make([]afloat.Message, 0, len(req.Messages)+1+len(extra)), req.Messages...),
		afloat.Message{Role: afloat.RoleAssistant, Content: answer})
	next.Messages = append(next.Messages, extra...)
	return &next
}

// call passes the gates of one tier (circuit, deadline, bulkhead) and makes the call, with
// retries on the same provider for transient failures. Every try is appended to res.
func (e *Engine) call(ctx context.Context, tr *tier, req *afloat.Request, reask bool, res *afloat.Result[json.RawMessage]) (*afloat.Response, afloat.Outcome) {
	clk := e.clock
	u := tr.up
	for try := 0; ; try++ {
		permit, err := u.br.Allow(ctx)
		if err != nil {
			e.addAttempt(res, tr, afloat.Attempt{Outcome: afloat.OutcomeCircuitOpen, Reask: reask})
			return nil, afloat.OutcomeCircuitOpen
		}
		read := tr.est.ReadTimeout()
		timeout, ok := latency.AttemptTimeout(ctx, clk, read, u.minAttempt)
		if !ok {
			permit.Cancel(ctx)
			e.addAttempt(res, tr, afloat.Attempt{Outcome: afloat.OutcomeDeadline, Reask: reask})
			return nil, afloat.OutcomeDeadline
		}
		if !u.acquire() {
			permit.Cancel(ctx)
			e.addAttempt(res, tr, afloat.Attempt{Outcome: afloat.OutcomeBulkhead, Reask: reask})
			return nil, afloat.OutcomeBulkhead
		}
		if try == 0 {
			u.budget.call()
		}
		tr.readTimeout.Set(read.Seconds())

		began := clk.Now()
		actx, cancel := latency.WithTimeout(ctx, clk, timeout)
		resp, err := u.p.Complete(actx, req)
		took := clk.Since(began)
		cut := actx.Err() != nil
		cancel()
		u.release()

		if err == nil {
			permit.Done(ctx, nil)
			tr.est.Observe(took)
			tr.latency.Observe(took.Seconds())
			e.account(tr, res, resp)
			e.addAttempt(res, tr, afloat.Attempt{Outcome: afloat.OutcomeOK, Latency: took, Reask: reask})
			return resp, afloat.OutcomeOK
		}

		if errors.Is(ctx.Err(), context.Canceled) {
			// The caller left; this says nothing about the provider.
			permit.Cancel(ctx)
			e.addAttempt(res, tr, afloat.Attempt{Outcome: afloat.OutcomeDeadline, Latency: took, Reask: reask, Error: "caller cancelled"})
			return nil, afloat.OutcomeDeadline
		}
		if cut && !afloat.IsTimeout(err) {
			// Our read timeout or the deadline cut the call, whatever the adapter made of it.
			err = &afloat.ProviderError{Provider: u.name, Kind: afloat.Unavailable, Timeout: true, Err: err}
		}
		if notProviders(ctx, cut && timeout < read) {
			permit.Cancel(ctx)
			e.addAttempt(res, tr, afloat.Attempt{Outcome: afloat.OutcomeTimeout, Latency: took, Reask: reask, Error: "cut by the caller's deadline"})
			return nil, afloat.OutcomeTimeout
		}
		if afloat.IsTimeout(err) && timeout == read {
			// A cut by the read timeout is a censored sample (the latency is at least
			// that); a cut by the deadline's remainder says less and is left out.
			tr.est.ObserveTimeout(took)
		}
		permit.Done(ctx, err)
		outcome := afloat.OutcomeError(err)
		e.addAttempt(res, tr, afloat.Attempt{Outcome: outcome, Latency: took, Reask: reask, Error: err.Error()})

		wait, retry := e.retryable(ctx, tr, err, try)
		if !retry {
			return nil, outcome
		}
		if !sleep(ctx, clk, wait) {
			return nil, outcome
		}
		tr.retries.Inc()
	}
}

// retryable decides whether a failed try is retried on the same provider, and after what
// wait: only a transient failure, within the retry count and budget, with the breaker still
// closed and time left in the deadline for the wait and a useful attempt.
func (e *Engine) retryable(ctx context.Context, tr *tier, err error, try int) (time.Duration, bool) {
	u := tr.up
	if try >= u.retry.Max {
		return 0, false
	}
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || !pe.Transient() {
		return 0, false
	}
	wait := time.Duration(float64(u.retry.Backoff) * (0.5 + rand.Float64()))
	if pe.RetryAfter > 0 {
		if pe.RetryAfter > u.retry.MaxWait {
			return 0, false
		}
		wait = pe.RetryAfter
	}
	if _, ok := latency.AttemptTimeout(ctx, e.clock, time.Hour, wait+u.minAttempt); !ok {
		return 0, false
	}
	if u.br.State(ctx) != breaker.StateClosed {
		return 0, false
	}
	if !u.budget.take() {
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

func (e *Engine) addAttempt(res *afloat.Result[json.RawMessage], tr *tier, a afloat.Attempt) {
	a.Provider, a.Tier, a.PromptVersion = tr.up.name, tr.idx, tr.version
	if res.Attempts == nil {
		res.Attempts = make([]afloat.Attempt, 0, 4)
	}
	res.Attempts = append(res.Attempts, a)
	// An answered call is counted once its contract is checked (ok or contract_violation).
	if a.Outcome != afloat.OutcomeOK {
		tr.attempts[a.Outcome].Inc()
	}
}

// exhausted answers by the task's policy once no tier answered.
func (t *Task) exhausted(ctx context.Context, in afloat.Input, res afloat.Result[json.RawMessage], start time.Time) (afloat.Result[json.RawMessage], error) {
	res.Degraded = true
	res.Source = afloat.SourceUnavailable
	switch t.policy {
	case PolicyHeuristic:
		if t.heuristic == nil {
			break
		}
		val, err := t.heuristic.Answer(in)
		if err == nil {
			err = t.contract.Validate(val)
		}
		if err != nil {
			t.e.log.Error("heuristic answer unusable", "task", t.name, "err", err)
			break
		}
		res.Value, res.Source = val, afloat.SourceHeuristic
	case PolicyHuman:
		id, err := t.enqueue(ctx, in, res)
		if err != nil {
			t.e.log.Error("review queue cannot commit", "task", t.name, "err", err)
			return t.finish(res, start), fmt.Errorf("%w: %w", afloat.ErrReviewUnavailable, err)
		}
		res.Source, res.ReviewID, res.ReviewSLA = afloat.SourceHuman, id, t.reviewSLA
		res.ExpectedBy = t.e.clock.Now().Add(t.reviewSLA).UTC()
	case PolicyBlock:
		return t.finish(res, start), afloat.ErrBlocked
	}
	return t.finish(res, start), nil
}

func (t *Task) enqueue(ctx context.Context, in afloat.Input, res afloat.Result[json.RawMessage]) (string, error) {
	input, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("input: %w", err)
	}
	item := &review.Item{Task: t.name, Tenant: Tenant(ctx), Input: input, Attempts: res.Attempts}
	item.IdempotencyKey, _ = ctx.Value(idempotencyKey{}).(string)
	for _, tr := range t.tiers {
		item.PromptVersions = append(item.PromptVersions, tr.version)
	}
	// The call's deadline may have passed: the commit gets its own bounded time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	return t.e.review.Enqueue(ctx, item)
}

// finish stamps the latency and counts the call.
func (t *Task) finish(res afloat.Result[json.RawMessage], start time.Time) afloat.Result[json.RawMessage] {
	res.Latency = t.e.clock.Since(start)
	if res.Source == afloat.SourceModel && !res.Degraded {
		t.okRequests.Inc()
	} else {
		t.e.metrics.Requests.WithLabelValues(t.name, string(res.Source), strconv.FormatBool(res.Degraded), string(res.Reason)).Inc()
	}
	t.shareGauge.Set(t.share.record(res.Degraded))
	return res
}

// account adds a response's usage and cost to the call's log and the tier's metrics.
func (e *Engine) account(tr *tier, log *afloat.Result[json.RawMessage], resp *afloat.Response) {
	usage := resp.Usage
	usage.Cost, usage.Currency = tr.up.price.cost(usage), tr.up.price.Currency
	tr.tokens.Add(float64(usage.InputTokens + usage.OutputTokens))
	tr.cost.Add(usage.Cost)
	log.Usage = log.Usage.Add(usage)
}
