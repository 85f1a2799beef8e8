package afloat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Criticality says what the absence of a task's answer costs, and so how the task degrades.
// It is required on every task: the zero value is invalid.
type Criticality int

const (
	// Enrichment: absence is an inconvenience; the task fails open (a heuristic answer).
	Enrichment Criticality = iota + 1
	// Assistance: absence is invisible; the task fails silent (no answer).
	Assistance
	// Critical: absence is a risk; the task fails closed (human review, or block).
	Critical
)

var criticalityNames = map[Criticality]string{Enrichment: "enrichment", Assistance: "assistance", Critical: "critical"}

func (c Criticality) String() string {
	if s, ok := criticalityNames[c]; ok {
		return s
	}
	return fmt.Sprintf("criticality(%d)", int(c))
}

// ParseCriticality reads "enrichment", "assistance" or "critical".
func ParseCriticality(s string) (Criticality, error) {
	for c, name := range criticalityNames {
		if name == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown criticality %q (want enrichment, assistance or critical)", s)
}

// Source says where a result came from.
type Source string

const (
	SourceModel Source = "model"
	// SourceCache: every tier failed (or, with the cache's serve: always_fresh, none was
	// asked) and the answer is a model's earlier valid answer to the same input, for the
	// same tenant, by a prompt version still in the cascade; CachedAt says when.
	SourceCache       Source = "cache"
	SourceHeuristic   Source = "heuristic"
	SourceUnavailable Source = "unavailable"
	SourceHuman       Source = "human"
)

// Outcome is what happened to one attempt on one tier.
type Outcome string

const (
	OutcomeOK                Outcome = "ok"
	OutcomeCircuitOpen       Outcome = "circuit_open"
	OutcomeDeadline          Outcome = "deadline"
	OutcomeBulkhead          Outcome = "bulkhead"
	OutcomeTimeout           Outcome = "timeout"
	OutcomeUnavailable       Outcome = "unavailable"
	OutcomeRateLimited       Outcome = "rate_limited"
	OutcomeUnusable          Outcome = "unusable"
	OutcomeClientError       Outcome = "client_error"
	OutcomeContractViolation Outcome = "contract_violation"
	// OutcomeRefused: the provider declined the content under its usage policy.
	OutcomeRefused Outcome = "refused"
)

// Outcomes lists every attempt outcome, for exporting metric series from start-up.
var Outcomes = []Outcome{OutcomeOK, OutcomeCircuitOpen, OutcomeDeadline, OutcomeBulkhead, OutcomeTimeout,
	OutcomeUnavailable, OutcomeRateLimited, OutcomeUnusable, OutcomeClientError, OutcomeContractViolation, OutcomeRefused}

// Reason says why a result is degraded: the outcome of the first tier that did not answer,
// ReasonKillSwitch or ReasonShed. It is empty when tier 0 answered.
type Reason string

// ReasonKillSwitch: a flag turned the task off for this call.
const ReasonKillSwitch Reason = "kill_switch"

// ReasonShed: afloat itself was saturated and shed the call, the least critical first; no
// provider was asked, and none is blamed.
const ReasonShed Reason = "shed"

// OutcomeError classifies a failed call's error into an attempt outcome.
func OutcomeError(err error) Outcome {
	if IsTimeout(err) {
		return OutcomeTimeout
	}
	var ce *ContractError
	if errors.As(err, &ce) {
		return OutcomeContractViolation
	}
	switch KindOf(err) {
	case Throttled:
		return OutcomeRateLimited
	case Unusable:
		return OutcomeUnusable
	case Contract:
		return OutcomeClientError
	case Refused:
		return OutcomeRefused
	}
	return OutcomeUnavailable
}

// Attempt is one try on one tier, a skipped tier included.
type Attempt struct {
	Provider string
	Tier     int
	Outcome  Outcome
	Latency  time.Duration
	// Reask is set on the attempt that re-asked after a contract violation.
	Reask         bool
	PromptVersion string
	// Error is the failure, readable; it never holds a credential.
	Error string
}

type attemptJSON struct {
	Provider      string  `json:"provider"`
	Tier          int     `json:"tier"`
	Outcome       Outcome `json:"outcome"`
	LatencyMS     int64   `json:"latency_ms"`
	Reask         bool    `json:"reask"`
	PromptVersion string  `json:"prompt_version,omitempty"`
	Error         string  `json:"error,omitempty"`
}

func (a Attempt) MarshalJSON() ([]byte, error) {
	return json.Marshal(attemptJSON{a.Provider, a.Tier, a.Outcome, a.Latency.Milliseconds(), a.Reask, a.PromptVersion, a.Error})
}

func (a *Attempt) UnmarshalJSON(b []byte) error {
	var j attemptJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*a = Attempt{j.Provider, j.Tier, j.Outcome, time.Duration(j.LatencyMS) * time.Millisecond, j.Reask, j.PromptVersion, j.Error}
	return nil
}

// Result is the envelope every call returns: on the happy path and on every fallback alike
// Value has type T, and Source and Degraded say where it came from.
type Result[T any] struct {
	Task string
	// Value is the answer. It is T's zero value when Source is SourceUnavailable, or
	// SourceHuman before an operator answered.
	Value    T
	Source   Source
	Degraded bool
	Reason   Reason
	// Provider and Tier name the tier that answered; Tier is -1 when no model answered.
	Provider      string
	Tier          int
	PromptVersion string
	// CachedAt is when the model gave a SourceCache answer; zero for every other source.
	CachedAt time.Time
	// ReviewID, ReviewSLA and ExpectedBy are set when the call was queued for human review.
	ReviewID   string
	ReviewSLA  time.Duration
	ExpectedBy time.Time
	Attempts   []Attempt
	Latency    time.Duration
	// Usage sums every attempt.
	Usage Usage
	// RequestID is the id of the request the call served (WithRequestID: the gateway's
	// X-Request-Id); "" outside a request, and then left out of the JSON.
	RequestID string
	// Replayed is set when the call's idempotency key had queued an item for human review
	// already: the result is that first call's (its review id, its attempts), and no model was
	// asked. It is not in the JSON (the gateway sends the header Idempotent-Replayed).
	Replayed bool
}

// HasValue reports whether Value holds an answer: a model's (now or cached) or a
// heuristic's. (An operator's answer arrives later, through the review queue.)
func (r *Result[T]) HasValue() bool {
	return r.Source == SourceModel || r.Source == SourceCache || r.Source == SourceHeuristic
}

type resultJSON struct {
	Task          string          `json:"task"`
	Result        json.RawMessage `json:"result"`
	Source        Source          `json:"source"`
	Degraded      bool            `json:"degraded"`
	Reason        *Reason         `json:"reason"`
	Provider      *string         `json:"provider"`
	Tier          *int            `json:"tier"`
	PromptVersion *string         `json:"prompt_version"`
	CachedAt      *time.Time      `json:"cached_at,omitempty"`
	ReviewID      *string         `json:"review_id"`
	ReviewSLA     *string         `json:"review_sla,omitempty"`
	ExpectedBy    *time.Time      `json:"expected_by,omitempty"`
	Attempts      []Attempt       `json:"attempts"`
	LatencyMS     int64           `json:"latency_ms"`
	Usage         Usage           `json:"usage"`
	RequestID     string          `json:"request_id,omitempty"`
}

func ptrIf[V comparable](v V) *V {
	var zero V
	if v == zero {
		return nil
	}
	return &v
}

// MarshalJSON writes the envelope of shared/DESIGN.md §3: absent values are null.
func (r Result[T]) MarshalJSON() ([]byte, error) {
	j := resultJSON{
		Task: r.Task, Source: r.Source, Degraded: r.Degraded, Reason: ptrIf(r.Reason),
		Provider: ptrIf(r.Provider), PromptVersion: ptrIf(r.PromptVersion), ReviewID: ptrIf(r.ReviewID),
		Attempts: r.Attempts, LatencyMS: r.Latency.Milliseconds(), Usage: r.Usage, RequestID: r.RequestID,
	}
	if j.Attempts == nil {
		j.Attempts = []Attempt{}
	}
	if r.Tier >= 0 && r.Provider != "" {
		j.Tier = &r.Tier
	}
	if r.ReviewSLA > 0 {
		s := r.ReviewSLA.String()
		j.ReviewSLA = &s
	}
	if !r.ExpectedBy.IsZero() {
		j.ExpectedBy = &r.ExpectedBy
	}
	if !r.CachedAt.IsZero() {
		at := r.CachedAt.UTC()
		j.CachedAt = &at
	}
	j.Result = json.RawMessage("null")
	if r.HasValue() {
		b, err := json.Marshal(r.Value)
		if err != nil {
			return nil, err
		}
		j.Result = b
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the envelope MarshalJSON writes.
func (r *Result[T]) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var out Result[T]
	out.Task, out.Source, out.Degraded, out.Attempts, out.Usage = j.Task, j.Source, j.Degraded, j.Attempts, j.Usage
	out.RequestID = j.RequestID
	out.Latency = time.Duration(j.LatencyMS) * time.Millisecond
	out.Tier = -1
	if j.Reason != nil {
		out.Reason = *j.Reason
	}
	if j.Provider != nil {
		out.Provider = *j.Provider
	}
	if j.Tier != nil {
		out.Tier = *j.Tier
	}
	if j.PromptVersion != nil {
		out.PromptVersion = *j.PromptVersion
	}
	if j.ReviewID != nil {
		out.ReviewID = *j.ReviewID
	}
	if j.ReviewSLA != nil {
		d, err := time.ParseDuration(*j.ReviewSLA)
		if err != nil {
			return fmt.Errorf("review_sla: %w", err)
		}
		out.ReviewSLA = d
	}
	if j.ExpectedBy != nil {
		out.ExpectedBy = *j.ExpectedBy
	}
	if j.CachedAt != nil {
		out.CachedAt = *j.CachedAt
	}
	if len(j.Result) > 0 && string(j.Result) != "null" {
		if err := json.Unmarshal(j.Result, &out.Value); err != nil {
			return fmt.Errorf("result: %w", err)
		}
	}
	*r = out
	return nil
}

// Input is the input of a task: the variables its prompt templates and heuristic rules read.
type Input map[string]any

// Runner runs a task and returns its result as raw JSON. *cascade.Task implements it.
type Runner interface {
	// RunJSON runs the task for input. It returns an error only when the call cannot be
	// made at all (bad input, a cancelled context before any work) or when the task's
	// policy refuses to answer (ErrBlocked, ErrReviewUnavailable); every provider failure
	// is folded into the returned envelope.
	RunJSON(ctx context.Context, in Input) (Result[json.RawMessage], error)
}

var (
	// ErrBlocked: a critical task whose tiers all failed, with the block policy.
	ErrBlocked = errors.New("afloat: task blocked: no tier answered")
	// ErrReviewUnavailable: a critical task could not queue its item for human review.
	ErrReviewUnavailable = errors.New("afloat: review queue cannot commit")
)

// Run runs a task and decodes its answer into T, so that the happy path and every fallback
// return the same type. The envelope is returned with the error too, for its attempts.
func Run[T any](ctx context.Context, r Runner, in Input) (Result[T], error) {
	raw, err := r.RunJSON(ctx, in)
	out := Result[T]{
		Task: raw.Task, Source: raw.Source, Degraded: raw.Degraded, Reason: raw.Reason,
		Provider: raw.Provider, Tier: raw.Tier, PromptVersion: raw.PromptVersion,
		ReviewID: raw.ReviewID, ReviewSLA: raw.ReviewSLA, ExpectedBy: raw.ExpectedBy,
		Attempts: raw.Attempts, Latency: raw.Latency, Usage: raw.Usage, RequestID: raw.RequestID,
	}
	if len(raw.Value) > 0 && out.HasValue() {
		if uerr := json.Unmarshal(raw.Value, &out.Value); uerr != nil && err == nil {
			err = fmt.Errorf("afloat: decode %s result: %w", raw.Task, uerr)
		}
	}
	return out, err
}
