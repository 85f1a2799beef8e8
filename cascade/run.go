package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/normalize"
	"github.com/afloat-dev/afloat/review"
)

// enqueueTimeout bounds the commit of a review item, which runs even when the call's own
// deadline has passed: nothing is lost because the budget ran out.
const enqueueTimeout = 5 * time.Second

// RunJSON runs the flow of one call and returns the envelope with the answer as JSON. See
// afloat.Runner for its error contract; an *InputError names a missing input field. The
// envelope carries the request id ctx carries (afloat.WithRequestID), and the call is one
// span ("afloat.task NAME") with a child per attempt.
func (t *Task) RunJSON(ctx context.Context, in afloat.Input) (afloat.Result[json.RawMessage], error) {
	ctx, span := t.e.startCall(ctx, spanTask, t.name)
	res, err := t.runJSON(ctx, in)
	res.RequestID = afloat.RequestID(ctx)
	endTask(span, &res, err)
	return res, err
}

// runJSON is RunJSON inside the call's span.
func (t *Task) runJSON(ctx context.Context, in afloat.Input) (afloat.Result[json.RawMessage], error) {
	start := t.e.clock.Now()
	res := afloat.Result[json.RawMessage]{Task: t.name, Tier: -1}
	if err := t.checkInput(in); err != nil {
		return res, err
	}
	if first, ok, err := t.replay(ctx, in, start); ok || err != nil {
		return first, err
	}
	var log callLog
	switch err := ctx.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		// The budget ran out before the call began (what the caller gave it was spent
		// waiting, as for a turn while afloat is saturated): no tier can answer in it, and
		// the policy answers at once, as for a call whose budget ran out on its tiers.
		log.reason = afloat.Reason(afloat.OutcomeDeadline)
		return t.exhausted(ctx, in, &log, start)
	case err != nil:
		return res, err // the caller left
	}
	ctx, cancel := t.e.withBudget(ctx, t.budget)
	defer cancel()

	doc, err := t.e.flags.Flags(ctx)
	if err != nil {
		t.e.log.WarnContext(ctx, "flags unreadable; task treated as on", "task", t.name, "err", err)
	}
	if err == nil && !doc.Allow(t.name, Tenant(ctx)) {
		log.reason = afloat.ReasonKillSwitch
		return t.exhausted(ctx, in, &log, start)
	}
	if t.e.shed.Shed(t.crit) {
		log.reason = afloat.ReasonShed
		t.shed.Inc()
		return t.exhausted(ctx, in, &log, start)
	}
	kc := t.cached(ctx, in)
	if en, ok := kc.fresh(ctx); ok {
		return t.fromCache(en, &log, start, false), nil
	}
	tr, ans, err := eachTier(t.e, ctx, t.tiers, false, t.hedge, &log, t.askTier(in))
	switch {
	case refused(err):
		return t.exhausted(ctx, in, &log, start) // the policy answers what the provider refused
	case err != nil:
		return res, err
	case tr == nil:
		if en, ok := kc.stale(ctx); ok {
			return t.fromCache(en, &log, start, true), nil
		}
		return t.exhausted(ctx, in, &log, start)
	}
	tr = ans.tr // a canary's candidate stands in for the tier eachTier asked
	kc.keep(ctx, tr, tr.version, ans.val)
	res.Value, res.Source, res.Degraded = ans.val, afloat.SourceModel, tr.idx > 0
	res.Provider, res.Tier, res.PromptVersion = tr.up.name, tr.idx, tr.version
	return t.finish(res, &log, start), nil
}

// tierAnswer is a tier's valid answer, with the tier that gave it: a canary's candidate stands
// in for the tier it is canaried on.
type tierAnswer struct {
	val json.RawMessage
	tr  *tier
}

// askTier returns the ask of each tier for input in: the tier's own, or its canary's
// candidate's for the calls in the candidate's share, with the ask's figures recorded for
// the canary.
func (t *Task) askTier(in afloat.Input) askFunc[tierAnswer] {
	if t.canary == nil {
		return func(ctx context.Context, tr *tier, below []tier, log *callLog) (tierAnswer, bool, error) {
			val, ok, err := t.ask(ctx, tr, in, below, log)
			return tierAnswer{val, tr}, ok, err
		}
	}
	return func(ctx context.Context, tr *tier, below []tier, log *callLog) (tierAnswer, bool, error) {
		tr = t.canary.pick(ctx, tr)
		first, spent, began := len(log.attempts), log.usage.Cost, t.e.clock.Now()
		val, ok, err := t.ask(ctx, tr, in, below, log)
		t.canary.observe(ctx, tr, log, first, log.usage.Cost-spent, t.e.clock.Since(began), ok)
		return tierAnswer{val, tr}, ok, err
	}
}

// ask asks one tier, re-asking up to maxReasks times after a contract violation, and returns
// the valid answer, or a *RefusalError that ends the cascade.
func (t *Task) ask(ctx context.Context, tr *tier, in afloat.Input, below []tier, log *callLog) (json.RawMessage, bool, error) {
	msgs, err := tr.prompt.Render(in)
	if err != nil {
		t.e.record(log, tr, afloat.Attempt{Outcome: afloat.OutcomeClientError, Error: err.Error()})
		return nil, false, nil
	}
	req := &afloat.Request{
		Messages: msgs, ResponseFormat: t.format, MaxTokens: tr.maxTokens,
		Temperature: tr.temperature, Task: t.name,
	}
	var val json.RawMessage
	check := func(resp *afloat.Response) (*afloat.Response, error) {
		out := t.contract.NormalizeAnswer(resp.Content, resp.FinishReason)
		if out.Steps != 0 {
			t.steps.count(out.Steps)
		}
		if out.Err != nil { // a *ContractError: never return it typed nil
			return resp, out.Err
		}
		val = out.Value
		return resp, nil
	}
	for reask := 0; ; reask++ {
		out := t.e.call(ctx, log, spec{tr: tr, req: req, reask: reask > 0, below: below, budget: t.budget, critical: t.crit == afloat.Critical}, check)
		switch {
		case out.outcome == afloat.OutcomeOK:
			return val, true, nil
		case out.outcome != afloat.OutcomeContractViolation || reask >= t.maxReasks:
			return nil, false, refusal(t.onRefusal, tr, out)
		}
		tr.reasks.Inc()
		req = t.e.reaskRequest(ctx, tr, req, out.resp.Content, out.err, t.contract.Schema())
	}
}

// reaskRequest appends the model's answer and the clarifying message to the conversation:
// the tier's own re-ask template when it has one, else normalize.ReaskText.
func (e *Engine) reaskRequest(ctx context.Context, tr *tier, req *afloat.Request, answer string, verr error, schema json.RawMessage) *afloat.Request {
	var extra []afloat.Message
	if tr.reask != nil {
		msgs, err := tr.reask.Render(normalize.ReaskData(verr, schema, answer))
		if err == nil {
			extra = msgs
		} else {
			e.log.ErrorContext(ctx, "re-ask template failed; the default message is sent", "provider", tr.up.name, "err", err)
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

// exhausted answers by the task's policy once no tier answered.
func (t *Task) exhausted(ctx context.Context, in afloat.Input, log *callLog, start time.Time) (afloat.Result[json.RawMessage], error) {
	res := afloat.Result[json.RawMessage]{Task: t.name, Tier: -1, Degraded: true}
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
			t.e.log.ErrorContext(ctx, "heuristic answer unusable", "task", t.name, "err", err)
			break
		}
		res.Value, res.Source = val, afloat.SourceHeuristic
	case PolicyHuman:
		id, err := t.enqueue(ctx, in, log)
		switch {
		case errors.Is(err, review.ErrIdempotencyMismatch):
			// The caller reused its key with another input: its error, not the store's.
			return t.finish(res, log, start), err
		case err != nil:
			t.e.log.ErrorContext(ctx, "review queue cannot commit", "task", t.name, "err", err)
			return t.finish(res, log, start), fmt.Errorf("%w: %w", afloat.ErrReviewUnavailable, err)
		}
		res.Source, res.ReviewID, res.ReviewSLA = afloat.SourceHuman, id, t.reviewSLA
		res.ExpectedBy = t.e.clock.Now().Add(t.reviewSLA).UTC()
	case PolicyBlock:
		return t.finish(res, log, start), afloat.ErrBlocked
	}
	return t.finish(res, log, start), nil
}

func (t *Task) enqueue(ctx context.Context, in afloat.Input, log *callLog) (string, error) {
	item, err := t.item(ctx, in)
	if err != nil {
		return "", err
	}
	item.Attempts = log.attempts
	for _, tr := range t.tiers {
		item.PromptVersions = append(item.PromptVersions, tr.version)
	}
	// The call's deadline may have passed: the commit gets its own bounded time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	return t.e.review.Enqueue(ctx, item)
}

// item is the review item of a call with in: its task, tenant, input and idempotency key.
func (t *Task) item(ctx context.Context, in afloat.Input) (*review.Item, error) {
	input, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	item := &review.Item{Task: t.name, Tenant: Tenant(ctx), Input: input}
	item.IdempotencyKey, _ = ctx.Value(idempotencyKey{}).(string)
	return item, nil
}

// replay answers a call of a task that queues for review, whose idempotency key queued an
// item already, with that item, as the first call was answered, before any model is asked:
// a retry after a restart (the gateway's replay cache is in memory) or once the providers are
// back must not get a model's verdict while an operator judges the first call. ok is false
// when the call has no key, no item holds it, or the store cannot answer (the call runs: its
// enqueue meets the key too); a key the item holds with another input is
// review.ErrIdempotencyMismatch.
func (t *Task) replay(ctx context.Context, in afloat.Input, start time.Time) (res afloat.Result[json.RawMessage], ok bool, err error) {
	res = afloat.Result[json.RawMessage]{Task: t.name, Tier: -1, Degraded: true, Source: afloat.SourceUnavailable}
	if t.policy != PolicyHuman || ctx.Value(idempotencyKey{}) == nil {
		return res, false, nil
	}
	item, err := t.item(ctx, in)
	if err != nil {
		return res, false, nil // enqueue says it
	}
	lctx, cancel := context.WithTimeout(ctx, enqueueTimeout)
	defer cancel()
	first, err := t.e.review.Queued(lctx, item)
	switch {
	case errors.Is(err, review.ErrIdempotencyMismatch):
		return res, false, err
	case errors.Is(err, review.ErrNotFound):
		return res, false, nil
	case err != nil:
		t.e.log.WarnContext(ctx, "review queue cannot find an idempotency key; the call runs", "task", t.name, "err", err)
		return res, false, nil
	}
	res.Source, res.ReviewID, res.ReviewSLA = afloat.SourceHuman, first.ID, t.reviewSLA
	res.ExpectedBy = first.CreatedAt.Add(t.reviewSLA).UTC()
	res.Attempts, res.Replayed = first.Attempts, true
	if len(first.Attempts) > 0 {
		res.Reason = afloat.Reason(first.Attempts[0].Outcome)
	}
	res.Latency = t.e.clock.Since(start)
	return res, true, nil
}

// finish fills the envelope in from the call's log, stamps the latency and counts the call.
func (t *Task) finish(res afloat.Result[json.RawMessage], log *callLog, start time.Time) afloat.Result[json.RawMessage] {
	res.Attempts, res.Usage, res.Reason = log.attempts, log.usage, log.reason
	res.Latency = t.e.clock.Since(start)
	if res.Source == afloat.SourceModel && !res.Degraded {
		t.okRequests.Inc()
	} else {
		t.e.metrics.Requests.WithLabelValues(t.name, string(res.Source), strconv.FormatBool(res.Degraded), string(res.Reason)).Inc()
	}
	share, bySource := t.share.record(res.Degraded, sourceOf(res.Source, res.Degraded))
	t.shareGauge.Set(share)
	t.sourceGauges.set(bySource)
	return res
}
