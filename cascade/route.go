package cascade

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/normalize"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/prometheus/client_golang/prometheus"
)

// SystemMode says how a tier's system prompt meets the client's system message.
type SystemMode string

const (
	// SystemReplace drops the client's system messages for the tier's own.
	SystemReplace SystemMode = "replace"
	// SystemPrepend puts the tier's system message before the client's.
	SystemPrepend SystemMode = "prepend"
)

// RouteTier is one step of a route's cascade.
type RouteTier struct {
	// Provider names a provider of the engine.
	Provider string
	// System is this provider's system prompt for the route, a text/template whose data is
	// {"system": the client's system message}; "" passes the client's messages unchanged.
	// A prompt tuned for one model produces garbage on another: each tier has its own.
	System string
	// SystemMode is SystemReplace or SystemPrepend; "" means SystemReplace.
	SystemMode SystemMode
	// MaxTokens caps the answer below the client's max_tokens; 0 keeps the client's.
	MaxTokens int
	// Temperature replaces the client's; nil keeps it.
	Temperature *float64
	// Reask overrides the clarifying message of a re-ask after an answer that breaks the
	// request's json_schema response format, as Tier.Reask does for a task. nil uses
	// normalize.ReaskText. Tool calls with invalid arguments are re-asked with one tool
	// message per call instead (normalize.ToolReaskText).
	Reask *prompt.Template
}

// RouteConfig is a named cascade for chat completions: the client's own messages, tools and
// response format, sent to each tier in turn.
type RouteConfig struct {
	// Name is the route's name, the "model" a client asks for; required.
	Name string
	// Criticality is required. A route answers its client directly and has no human queue:
	// when every tier fails, it returns ErrExhausted whatever its criticality.
	Criticality afloat.Criticality
	// Budget covers every attempt, retry and re-ask of one call. 0 means 30s.
	Budget time.Duration
	// Cascade is the ordered tiers; at least one.
	Cascade []RouteTier
	// MaxReasks bounds the re-asks after an answer that breaks the request's json_schema
	// response format or calls a tool with arguments that break the tool's parameter schema,
	// per tier. 0 means 1; a negative value disables them.
	MaxReasks int
	// OnRefusal is what follows a provider's content-policy refusal: RefusalStop (the
	// default: the refusal reaches the client as a *RefusalError, with the provider's reason)
	// or RefusalNextTier (the next tier is asked).
	OnRefusal RefusalPolicy
	// Hedge asks the next tier too when a tier is slow to answer a non-streamed call; the
	// zero Hedge never hedges. See Hedge.
	Hedge Hedge
	// Cache serves an earlier valid answer to the same request when every tier fails; nil
	// means none. See Cache.
	Cache *Cache
}

// ErrExhausted: every tier of a route was skipped or failed. The Reply says how.
var ErrExhausted = errors.New("cascade: no tier answered")

// ErrShed: afloat was saturated and shed the route's call without asking a provider (its
// Reply's reason is shed). It is an ErrExhausted: the client is answered as for one.
var ErrShed = fmt.Errorf("%w: afloat is saturated and shed the call", ErrExhausted)

// RefusalError is a provider's content-policy refusal, ending a call whose OnRefusal is
// RefusalStop. Reason is the provider's own words.
type RefusalError struct {
	Provider string
	Code     string
	Reason   string
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("%s refused the request: %s", e.Provider, e.Reason)
}

// RefusalPolicy is what follows a provider's content-policy refusal.
type RefusalPolicy string

const (
	// RefusalStop ends the call with the refusal (a task then answers by its policy).
	RefusalStop RefusalPolicy = "stop"
	// RefusalNextTier asks the next tier, as after any other failure.
	RefusalNextTier RefusalPolicy = "next_tier"
)

// ParseRefusalPolicy reads an on_refusal value; "" is RefusalStop.
func ParseRefusalPolicy(s string) (RefusalPolicy, error) {
	switch p := RefusalPolicy(s); p {
	case "":
		return RefusalStop, nil
	case RefusalStop, RefusalNextTier:
		return p, nil
	}
	return "", fmt.Errorf("unknown on_refusal %q (want stop or next_tier)", s)
}

// refused reports whether err is a *RefusalError (kept apart so that the happy path, whose err
// is nil, allocates no target for errors.As).
func refused(err error) bool {
	if err == nil {
		return false
	}
	var re *RefusalError
	return errors.As(err, &re)
}

// refusal returns the *RefusalError of a refused attempt, or nil when out is no refusal or the
// policy asks the next tier.
func refusal(policy RefusalPolicy, tr *tier, out settled) error {
	if out.outcome != afloat.OutcomeRefused || policy == RefusalNextTier {
		return nil
	}
	re := &RefusalError{Provider: tr.up.name, Reason: "declined under the provider's usage policy"}
	var pe *afloat.ProviderError
	if errors.As(out.err, &pe) {
		re.Code = pe.Code
		if pe.Err != nil {
			re.Reason = pe.Err.Error()
		}
	}
	return re
}

// StreamError is a stream that failed after its first chunk reached the client: no other
// tier may answer any more, and the client must be told the answer is cut.
type StreamError struct {
	Provider string
	Err      error
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("stream from %s cut after the first chunk: %v", e.Provider, e.Err)
}

func (e *StreamError) Unwrap() error { return e.Err }

// Reply is a route's answer and where it came from.
type Reply struct {
	Route string
	// Response is the answer; nil when no tier answered. For a stream it holds what was
	// streamed, assembled.
	Response *afloat.Response
	// Source is SourceModel; SourceCache when the route's cache answered (CachedAt says
	// when the model did); or SourceUnavailable when no tier answered.
	Source   afloat.Source
	CachedAt time.Time
	Degraded bool
	Reason   afloat.Reason
	Provider string
	Tier     int
	Attempts []afloat.Attempt
	Usage    afloat.Usage
	Latency  time.Duration
}

// Route is a configured route. It is safe for concurrent use.
type Route struct {
	e            *Engine
	hedge        Hedge
	name         string
	crit         afloat.Criticality
	budget       time.Duration
	maxReasks    int
	onRefusal    RefusalPolicy
	tiers        []tier
	systems      []*template.Template
	modes        []SystemMode
	okRequests   prometheus.Counter
	shareGauge   prometheus.Gauge
	shed         prometheus.Counter // afloat_shed_total
	sourceGauges sourceGauges
	share        *shareWindow
	steps        stepCounters
	cache        *taskCache // nil without a cache
	contractsMu  sync.Mutex
	contracts    map[string]*normalize.Contract // SHA-256 of the schema → compiled; at most maxContracts
}

// maxContracts bounds the compiled client schemas a route keeps. Schemas come from clients:
// the cache may not grow without limit, and normalize.FromClient bounds each one.
const maxContracts = 64

// Route builds a route over the engine's providers.
func (e *Engine) Route(cfg RouteConfig) (*Route, error) {
	r, err := e.newRoute(cfg)
	if err != nil {
		return nil, fmt.Errorf("cascade: route %q: %w", cfg.Name, err)
	}
	return r, nil
}

func (e *Engine) newRoute(cfg RouteConfig) (*Route, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("name is required")
	case cfg.Criticality == 0:
		return nil, errors.New("criticality is required (enrichment, assistance or critical)")
	case len(cfg.Cascade) == 0:
		return nil, errors.New("cascade has no tiers")
	case cfg.Budget < 0:
		return nil, fmt.Errorf("budget %v is negative", cfg.Budget)
	}
	if err := cfg.Hedge.check(); err != nil {
		return nil, err
	}
	onRefusal, err := ParseRefusalPolicy(string(cfg.OnRefusal))
	if err != nil {
		return nil, err
	}
	r := &Route{e: e, hedge: cfg.Hedge, name: cfg.Name, crit: cfg.Criticality, budget: cfg.Budget, maxReasks: cfg.MaxReasks,
		onRefusal: onRefusal, share: e.shareOf(cfg.Name), contracts: map[string]*normalize.Contract{}}
	if r.budget == 0 {
		r.budget = 30 * time.Second
	}
	switch {
	case r.maxReasks == 0:
		r.maxReasks = 1
	case r.maxReasks < 0:
		r.maxReasks = 0
	}
	for i, rt := range cfg.Cascade {
		tr, err := e.newTier(cfg.Name, i, rt.Provider, "")
		if err != nil {
			return nil, err
		}
		tr.maxTokens, tr.temperature = rt.MaxTokens, rt.Temperature
		if rt.Reask != nil {
			if err := checkReask(rt.Reask, json.RawMessage(`{"type": "object"}`)); err != nil {
				return nil, fmt.Errorf("tier %d (%s): %w", i, rt.Provider, err)
			}
			tr.reask = rt.Reask
		}
		if tr.streamEst, err = e.estimator(tr.up, cfg.Name+"/stream", tr.up.firstToken); err != nil {
			return nil, err
		}
		var sys *template.Template
		if rt.System != "" {
			sys, err = template.New(cfg.Name + "/" + rt.Provider).Option("missingkey=error").Parse(rt.System)
			if err != nil {
				return nil, fmt.Errorf("tier %d (%s): system prompt: %w", i, rt.Provider, err)
			}
			if _, err := renderSystem(sys, ""); err != nil {
				return nil, fmt.Errorf("tier %d (%s): system prompt: %w", i, rt.Provider, err)
			}
		}
		mode := rt.SystemMode
		switch mode {
		case "":
			mode = SystemReplace
		case SystemReplace, SystemPrepend:
		default:
			return nil, fmt.Errorf("tier %d (%s): unknown system mode %q (want replace or prepend)", i, rt.Provider, mode)
		}
		r.tiers = append(r.tiers, tr)
		r.systems = append(r.systems, sys)
		r.modes = append(r.modes, mode)
	}
	if cfg.Cache != nil {
		if err := cfg.Cache.check(cfg.Criticality); err != nil {
			return nil, err
		}
		r.cache = e.taskCache(cfg.Name, cfg.Cache, versions(cfg.Name, cfg.Cascade), nil)
	}
	if err := e.claimName(cfg.Name, r.tiers); err != nil {
		return nil, err
	}
	r.okRequests, r.shareGauge = e.initSeries(cfg.Name, r.tiers)
	r.shed = e.metrics.Shed.WithLabelValues(cfg.Name)
	r.sourceGauges = e.sourceGauges(cfg.Name)
	r.steps = e.stepCounters(cfg.Name)
	return r, nil
}

// Name returns the route's name.
func (r *Route) Name() string { return r.name }

// Criticality returns the route's criticality.
func (r *Route) Criticality() afloat.Criticality { return r.crit }

// FallbackShare returns the share of the last minute's calls not answered by tier 0.
func (r *Route) FallbackShare() float64 { return r.share.share() }

// FallbackHistory is Task.FallbackHistory for the route.
func (r *Route) FallbackHistory() []float64 { return r.share.history() }

func renderSystem(t *template.Template, client string) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, map[string]any{"system": client}); err != nil {
		return "", err
	}
	return strings.TrimSpace(b.String()), nil
}

// request builds tier i's request from the client's.
func (r *Route) request(i int, in *afloat.Request) (*afloat.Request, error) {
	req := *in
	req.Task = r.name
	tr := &r.tiers[i]
	if tr.maxTokens > 0 && (req.MaxTokens == 0 || req.MaxTokens > tr.maxTokens) {
		req.MaxTokens = tr.maxTokens
	}
	if tr.temperature != nil {
		req.Temperature = tr.temperature
	}
	sys := r.systems[i]
	if sys == nil {
		return &req, nil
	}
	var client []string
	rest := make([]afloat.Message, 0, len(in.Messages)+1)
	for _, m := range in.Messages {
		if m.Role == afloat.RoleSystem {
			client = append(client, m.Content)
			continue
		}
		rest = append(rest, m)
	}
	text, err := renderSystem(sys, strings.Join(client, "\n\n"))
	if err != nil {
		return nil, err
	}
	msgs := []afloat.Message{{Role: afloat.RoleSystem, Content: text}}
	if r.modes[i] == SystemPrepend {
		for _, c := range client {
			msgs = append(msgs, afloat.Message{Role: afloat.RoleSystem, Content: c})
		}
	}
	req.Messages = append(msgs, rest...)
	return &req, nil
}

// contract returns the compiled contract of a json_schema response format, or nil.
func (r *Route) contract(in *afloat.Request) (*normalize.Contract, error) {
	rf := in.ResponseFormat
	if rf == nil || rf.Type != "json_schema" || len(rf.Schema) == 0 {
		return nil, nil
	}
	c, err := r.compiled(sha256.Sum256(rf.Schema), func() (*normalize.Contract, error) {
		return normalize.Compile(r.name, rf.Schema, normalize.FromClient())
	})
	if err != nil {
		return nil, &RequestError{Field: "response_format.json_schema.schema", Problem: err.Error()}
	}
	return c, nil
}

// tools returns the contracts of the request's tools, by name, or nil when it has none.
func (r *Route) tools(in *afloat.Request) (map[string]*normalize.Contract, error) {
	if len(in.Tools) == 0 {
		return nil, nil
	}
	out := make(map[string]*normalize.Contract, len(in.Tools))
	for i, tool := range in.Tools {
		// The name is part of the key: it names the contract and its errors.
		h := sha256.New()
		h.Write([]byte("tool\x00" + tool.Name + "\x00"))
		h.Write(tool.Parameters)
		c, err := r.compiled([sha256.Size]byte(h.Sum(nil)), func() (*normalize.Contract, error) {
			return normalize.CompileTool(tool, normalize.FromClient())
		})
		if err != nil {
			return nil, &RequestError{Field: fmt.Sprintf("tools[%d].parameters", i), Problem: err.Error()}
		}
		out[tool.Name] = c
	}
	return out, nil
}

// compiled returns the contract cached under the hash of its source, compiling it on a miss.
// A refused schema is not kept: normalize.FromClient bounds the work of refusing it again.
func (r *Route) compiled(sum [sha256.Size]byte, compile func() (*normalize.Contract, error)) (*normalize.Contract, error) {
	key := string(sum[:])
	r.contractsMu.Lock()
	c, ok := r.contracts[key]
	r.contractsMu.Unlock()
	if ok {
		return c, nil
	}
	c, err := compile()
	if err != nil {
		return nil, err
	}
	r.contractsMu.Lock()
	if len(r.contracts) >= maxContracts {
		clear(r.contracts) // a client cycling schemas pays for compiling; memory stays bounded
	}
	r.contracts[key] = c
	r.contractsMu.Unlock()
	return c, nil
}

// RequestError says that a client's request cannot be sent to any tier.
type RequestError struct {
	Field   string
	Problem string
}

func (e *RequestError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Problem) }

// Complete runs the route for one chat request. It returns ErrExhausted with the Reply when
// no tier answered, a *RequestError for a request no tier can take, and the context's error
// when the caller left. The call is one span ("afloat.route NAME") with a child per attempt.
func (r *Route) Complete(ctx context.Context, in *afloat.Request) (*Reply, error) {
	ctx, span := r.e.startCall(ctx, spanRoute, r.name)
	rep, err := r.complete(ctx, in)
	endRoute(span, rep, err)
	return rep, err
}

// complete is Complete inside the call's span.
func (r *Route) complete(ctx context.Context, in *afloat.Request) (*Reply, error) {
	start := r.e.clock.Now()
	contract, err := r.contract(in)
	if err != nil {
		return nil, err
	}
	tools, err := r.tools(in)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := r.e.withBudget(ctx, r.budget)
	defer cancel()
	var log callLog
	if !r.allowed(ctx) {
		log.reason = afloat.ReasonKillSwitch
		return r.exhausted(&log, start)
	}
	if r.e.shed.Shed(r.crit) {
		return r.shedCall(&log, start)
	}
	kc := r.cached(ctx, in)
	if rep, ok := r.fromCache(kc.fresh(ctx)); ok {
		return r.cachedReply(rep, &log, start, false), nil
	}
	tr, resp, err := eachTier(r.e, ctx, r.tiers, false, r.hedge, &log, func(ctx context.Context, tr *tier, below []tier, log *callLog) (*afloat.Response, bool, error) {
		resp, err := r.ask(ctx, tr, in, below, contract, tools, log)
		return resp, resp != nil, err
	})
	switch {
	case refused(err):
		rep, _ := r.exhausted(&log, start)
		return rep, err
	case err != nil:
		return nil, err
	case tr == nil:
		return r.exhaustedOrCached(ctx, &kc, &log, start)
	}
	r.keep(ctx, &kc, tr, resp)
	return r.answered(&log, tr, resp, start, tr.idx > 0), nil
}

// ask calls one tier, checks the answer (tool calls against their tools' parameters, text
// against the json_schema response format) and re-asks after a violation. It returns the
// valid answer, or nil, with a *RefusalError when the provider refused and the route stops
// there.
func (r *Route) ask(ctx context.Context, tr *tier, in *afloat.Request, below []tier, c *normalize.Contract, tools map[string]*normalize.Contract, log *callLog) (*afloat.Response, error) {
	req, err := r.request(tr.idx, in)
	if err != nil {
		r.e.record(log, tr, afloat.Attempt{Outcome: afloat.OutcomeClientError, Error: err.Error()})
		return nil, nil
	}
	var chk normalize.ToolCheck // the last tool check, for a re-ask
	forced := forcedTool(in.ToolChoice)
	var notCalled string // the forced tool the last answer did not call
	check := func(resp *afloat.Response) (*afloat.Response, error) {
		chk, notCalled = normalize.ToolCheck{}, ""
		if forced != "" && (len(resp.ToolCalls) == 0 || forced != "any tool" && !calls(resp.ToolCalls, forced)) {
			notCalled = forced
		}
		switch {
		case forced != "" && len(resp.ToolCalls) == 0:
			// tool_choice asked for a call and the model wrote text: the answer to another
			// question.
			return nil, &afloat.ContractError{Stage: normalize.StageSchema,
				Details: []string{"the request requires a tool call (" + forced + "), and the answer is text: call the tool"}}
		case forced != "" && forced != "any tool" && !calls(resp.ToolCalls, forced):
			return nil, &afloat.ContractError{Stage: normalize.StageSchema,
				Details: []string{"the request requires a call of " + forced + ", and the answer calls another tool"}}
		case len(resp.ToolCalls) > 0 && tools != nil:
			chk = normalize.CheckToolCalls(resp.ToolCalls, tools)
			if chk.Steps != 0 {
				r.steps.count(chk.Steps)
			}
			if chk.Err != nil {
				return nil, chk.Err
			}
			out := *resp
			out.ToolCalls = chk.Calls
			return &out, nil
		case c == nil || len(resp.ToolCalls) > 0:
			return resp, nil
		}
		res := c.NormalizeAnswer(resp.Content, resp.FinishReason)
		if res.Steps != 0 {
			r.steps.count(res.Steps)
		}
		if res.Err != nil {
			return nil, res.Err
		}
		out := *resp
		out.Content = string(res.Value)
		return &out, nil
	}
	for reask := 0; ; reask++ {
		out := r.e.call(ctx, log, spec{tr: tr, req: req, reask: reask > 0, below: below, budget: r.budget, critical: r.crit == afloat.Critical}, check)
		switch {
		case out.outcome == afloat.OutcomeOK:
			return out.resp, nil
		case out.outcome != afloat.OutcomeContractViolation || reask >= r.maxReasks:
			return nil, refusal(r.onRefusal, tr, out)
		}
		tr.reasks.Inc()
		switch {
		case notCalled != "":
			next := *req
			what := "a tool"
			if notCalled != "any tool" {
				what = "the tool " + notCalled
			}
			next.Messages = slices.Clip(req.Messages)
			if out.resp.Content != "" { // an empty assistant turn is refused by some providers
				next.Messages = append(next.Messages, afloat.Message{Role: afloat.RoleAssistant, Content: out.resp.Content})
			}
			next.Messages = append(next.Messages, afloat.Message{Role: afloat.RoleUser,
				Content: "This request requires you to call " + what + ". Call it now, with arguments that fit its parameters, instead of answering in text."})
			req = &next
		case chk.Err != nil:
			req = toolReaskRequest(req, out.resp, chk, tools)
		default:
			var schema json.RawMessage
			if c != nil {
				schema = c.Schema()
			}
			req = r.e.reaskRequest(ctx, tr, req, out.resp.Content, out.err, schema)
		}
	}
}

// forcedTool names the tool call that tool_choice requires: the named function, "any tool"
// for "required", "" when none is required.
func forcedTool(tc *afloat.ToolChoice) string {
	switch {
	case tc == nil:
		return ""
	case tc.Mode == "required":
		return "any tool"
	case tc.Mode == "tool" && tc.Name != "":
		return tc.Name
	}
	return ""
}

// calls reports whether one of the calls is of the tool named name.
func calls(tcs []afloat.ToolCall, name string) bool {
	for _, c := range tcs {
		if c.Name == name {
			return true
		}
	}
	return false
}

// toolReaskRequest appends the model's tool calls to the conversation and answers each with
// a tool message: why its arguments do not fit, or that it was not made because another
// call's did not. The model then calls again.
func toolReaskRequest(req *afloat.Request, resp *afloat.Response, chk normalize.ToolCheck, tools map[string]*normalize.Contract) *afloat.Request {
	next := *req
	msgs := make([]afloat.Message, 0, len(req.Messages)+1+len(resp.ToolCalls))
	msgs = append(msgs, req.Messages...)
	msgs = append(msgs, afloat.Message{Role: afloat.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
	for i, call := range resp.ToolCalls {
		text := "This call was not made: another call's arguments do not fit their tool. Call it again if you still need it."
		if e := chk.Errs[i]; e != nil {
			var schema json.RawMessage
			if c := tools[call.Name]; c != nil {
				schema = c.Schema()
			}
			text = normalize.ToolReaskText(e, call.Name, schema)
		}
		msgs = append(msgs, afloat.Message{Role: afloat.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: text})
	}
	next.Messages = msgs
	return &next
}

func (r *Route) allowed(ctx context.Context) bool {
	doc, err := r.e.flags.Flags(ctx)
	if err != nil {
		r.e.log.WarnContext(ctx, "flags unreadable; route treated as on", "route", r.name, "err", err)
		return true
	}
	return doc.Allow(r.name, Tenant(ctx))
}

func (r *Route) answered(log *callLog, tr *tier, resp *afloat.Response, start time.Time, degraded bool) *Reply {
	rep := &Reply{
		Route: r.name, Response: resp, Source: afloat.SourceModel, Degraded: degraded, Reason: log.reason,
		Provider: tr.up.name, Tier: tr.idx, Attempts: log.attempts, Usage: log.usage,
	}
	r.finish(rep, start)
	return rep
}

func (r *Route) exhausted(log *callLog, start time.Time) (*Reply, error) {
	rep := &Reply{
		Route: r.name, Source: afloat.SourceUnavailable, Degraded: true, Reason: log.reason,
		Tier: -1, Attempts: log.attempts, Usage: log.usage,
	}
	r.finish(rep, start)
	return rep, ErrExhausted
}

// shedCall answers a call shed under afloat's own overload.
func (r *Route) shedCall(log *callLog, start time.Time) (*Reply, error) {
	log.reason = afloat.ReasonShed
	r.shed.Inc()
	rep, _ := r.exhausted(log, start)
	return rep, ErrShed
}

func (r *Route) finish(rep *Reply, start time.Time) {
	rep.Latency = r.e.clock.Since(start)
	if rep.Source == afloat.SourceModel && !rep.Degraded {
		r.okRequests.Inc()
	} else {
		r.e.metrics.Requests.WithLabelValues(r.name, string(rep.Source), fmt.Sprint(rep.Degraded), string(rep.Reason)).Inc()
	}
	share, bySource := r.share.record(rep.Degraded, sourceOf(rep.Source, rep.Degraded))
	r.shareGauge.Set(share)
	r.sourceGauges.set(bySource)
}

// EmitFunc passes one chunk of a streamed answer to the client, with the provider and tier
// it comes from (the first call tells the client who answers). An error means the client
// is gone.
type EmitFunc func(provider string, tier int, c afloat.Chunk) error

// Stream runs the route for one chat request and passes the answer to emit as it arrives.
// Until emit is first called another attempt may still answer: a stream that fails before
// its first chunk is retried or passed on to the next tier like a failed call. Once a chunk
// went out, a failure ends the call with a *StreamError. With a json_schema response format
// the answer is checked whole first (re-asked or passed on to the next tier like Complete's)
// and then emitted. Without one, tool calls are streamed as they come: their arguments,
// checked by Complete, cannot be re-asked once a chunk is out. An error from emit (the client
// left) stops the call and is returned. The call is one span, as Complete's.
func (r *Route) Stream(ctx context.Context, in *afloat.Request, emit EmitFunc) (*Reply, error) {
	ctx, span := r.e.startCall(ctx, spanRoute, r.name)
	rep, err := r.stream(ctx, in, emit)
	endRoute(span, rep, err)
	return rep, err
}

// stream is Stream inside the call's span.
func (r *Route) stream(ctx context.Context, in *afloat.Request, emit EmitFunc) (*Reply, error) {
	contract, err := r.contract(in)
	if err != nil {
		return nil, err
	}
	if contract != nil {
		rep, err := r.complete(ctx, in)
		if err != nil || rep.Source == afloat.SourceCache {
			return rep, err // the caller streams a cached answer whole
		}
		resp := rep.Response
		u := rep.Usage
		if err := emit(rep.Provider, rep.Tier, afloat.Chunk{Delta: resp.Content, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Usage: &u, Model: resp.Model}); err != nil {
			return rep, err
		}
		return rep, nil
	}
	start := r.e.clock.Now()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := r.e.withBudget(ctx, r.budget)
	defer cancel()
	var log callLog
	if !r.allowed(ctx) {
		log.reason = afloat.ReasonKillSwitch
		return r.exhausted(&log, start)
	}
	if r.e.shed.Shed(r.crit) {
		return r.shedCall(&log, start)
	}
	kc := r.cached(ctx, in)
	if rep, ok := r.fromCache(kc.fresh(ctx)); ok {
		return r.cachedReply(rep, &log, start, false), nil // the caller streams it whole
	}
	var out settled
	var by *tier // the tier whose answer the client got last: the one that continued a cut stream
	tr, _, err := eachTier(r.e, ctx, r.tiers, true, Hedge{}, &log, func(ctx context.Context, tr *tier, below []tier, _ *callLog) (struct{}, bool, error) {
		req, err := r.request(tr.idx, in)
		if err != nil {
			r.e.record(&log, tr, afloat.Attempt{Outcome: afloat.OutcomeClientError, Error: err.Error()})
			return struct{}{}, false, nil
		}
		out, by = r.e.call(ctx, &log, spec{tr: tr, req: req, below: below, budget: r.budget, emit: emit, critical: r.crit == afloat.Critical}, nil), tr
		switch {
		case out.outcome == afloat.OutcomeOK:
			return struct{}{}, true, nil
		case !out.emitted:
			return struct{}{}, false, refusal(r.onRefusal, tr, out)
		}
		var gone *clientGone
		if errors.As(out.err, &gone) {
			return struct{}{}, false, gone.err
		}
		// Cut after the first chunk: the client got part of an answer. A tier below that can
		// continue from it may still finish the answer; no other may. A refusal mid-stream
		// is never continued: that would finish what the provider's policy stopped.
		if out.outcome == afloat.OutcomeRefused || ctx.Err() != nil {
			return struct{}{}, false, &StreamError{Provider: tr.up.name, Err: out.err}
		}
		rescued, last, done := r.rescue(ctx, &log, in, below, out, emit)
		out, by = rescued, cmp.Or(last, tr)
		switch {
		case done:
			return struct{}{}, true, nil
		case errors.As(out.err, &gone):
			return struct{}{}, false, gone.err // the client left during the continuation
		}
		return struct{}{}, false, &StreamError{Provider: by.up.name, Err: out.err}
	})
	switch {
	case refused(err):
		rep, _ := r.exhausted(&log, start)
		return rep, err
	case tr == nil && err != nil:
		return nil, err
	case tr == nil:
		return r.exhaustedOrCached(ctx, &kc, &log, start)
	case err != nil:
		var cut *StreamError
		return r.answered(&log, by, out.resp, start, errors.As(err, &cut) || by.idx > 0), err
	}
	r.keep(ctx, &kc, by, out.resp)
	return r.answered(&log, by, out.resp, start, by.idx > 0), nil
}

// rescue continues a stream cut after its first chunk on the first tier of below that
// declares continuation from an assistant prefill (ProviderConfig.Continuation), asking it to
// continue the text the client has; the continuation streams on to the client, so that it
// reads one coherent answer. A tier that cannot continue is not asked: its refusal of a
// prefill would only hide the real failure. A continuation cut in turn is continued further
// down. It returns the last attempt that reached the client (its response holds the whole
// text the client has), the tier that made it (nil when none continued), and whether the
// answer was finished.
func (r *Route) rescue(ctx context.Context, log *callLog, in *afloat.Request, below []tier, cut settled, emit EmitFunc) (settled, *tier, bool) {
	partial := cut.resp.Content
	if partial == "" || len(cut.resp.ToolCalls) > 0 {
		return cut, nil, false // only text can be continued
	}
	var last *tier
	for j := range below {
		if ctx.Err() != nil {
			break
		}
		tr := &below[j]
		if !tr.up.continues {
			continue
		}
		req, err := r.request(tr.idx, in)
		if err != nil {
			continue
		}
		req.Messages = append(slices.Clip(req.Messages), afloat.Message{Role: afloat.RoleAssistant, Content: partial})
		req.Continue = true
		out := r.e.call(ctx, log, spec{tr: tr, req: req, below: below[j+1:], budget: r.budget, emit: emit, critical: r.crit == afloat.Critical}, nil)
		if !out.emitted {
			continue // it added nothing: the next one may
		}
		partial += out.resp.Content
		out.resp.Content = partial
		cut, last = out, tr
		if _, gone := out.err.(*clientGone); out.outcome == afloat.OutcomeOK || gone || out.outcome == afloat.OutcomeRefused {
			break
		}
	}
	return cut, last, last != nil && cut.outcome == afloat.OutcomeOK
}
