package alerts

import (
	"fmt"
	"strings"
	"time"

	"github.com/afloat-dev/afloat"
)

// Name names an alert: the key it is written under in the config's alerts: block.
type Name string

// The alerts of shared/DESIGN.md §4.
const (
	// FallbackShare: a task's (or route's) share of calls not answered by tier 0, over a
	// sliding window, is above the threshold. Value is the share, in [0, 1].
	FallbackShare Name = "fallback_share"
	// PrimaryOpen: a task's tier-0 provider has its breaker open (or half-open: probing).
	// Value is 1 while it is.
	PrimaryOpen Name = "primary_open"
	// ContractViolationRate: a provider's share of answers to a task that failed the
	// contract, over a sliding window, is above the threshold while its breaker stays
	// closed: the provider answers, but not what the task asks (a model update is the usual
	// cause). Value is the share, in [0, 1].
	ContractViolationRate Name = "contract_violation_rate"
	// ReviewSLA: a task has more review items past its review SLA, not answered yet, than
	// the threshold (0: any). Value is the number of those items.
	ReviewSLA Name = "review_sla"
	// Unusable: a provider's breaker opened on an unusable failure (bad key, exhausted
	// quota): every call would fail alike until someone acts. Value is 1 while it is open.
	Unusable Name = "unusable"
	// DrillStale: a task or route was drilled, and its last passing drill is older than the
	// drill's max age (or none passed). Value is the age, in seconds, of its last passing
	// drill (of its last drill when none passed).
	DrillStale Name = "drill_stale"
	// CanaryRolledBack: a task's canary release was rolled back (its candidate did worse
	// than the incumbent, or an operator rolled it back). Value is 1 while the canary in the
	// config stays rolled back: it resolves when the config drops or renews the canary.
	CanaryRolledBack Name = "canary_rolled_back"
)

// Names lists every alert, in the order of shared/DESIGN.md.
var Names = []Name{FallbackShare, PrimaryOpen, ContractViolationRate, ReviewSLA, Unusable, DrillStale, CanaryRolledBack}

// rate reports whether the alert is measured over a sliding window of calls.
func (n Name) rate() bool { return n == FallbackShare || n == ContractViolationRate }

// Rule is one configured alert.
type Rule struct {
	// Name is the alert; required, one of Names, each at most once.
	Name Name
	// Above is the threshold the value must exceed. For the rate alerts a share in [0, 1];
	// for ReviewSLA a number of items (0: the first item past its SLA fires); the other
	// alerts have no threshold and must leave it 0.
	Above float64
	// For is how long the condition must hold before the alert fires, and how long it must
	// have stopped holding before a firing alert resolves. 0 means at the first evaluation.
	For time.Duration
	// Window is the period the rate alerts count calls over. 0 means 5m; the other alerts
	// must leave it 0.
	Window time.Duration
	// MinCalls is the fewest calls in Window for a rate alert's share to count: with fewer,
	// its condition does not hold. 0 means 20; the other alerts must leave it 0.
	MinCalls int
	// Webhook receives a POST at each firing and each resolution. "" means none. It is
	// never logged nor shown: a webhook URL often holds a token.
	Webhook string
	// Secret signs each webhook body (the X-Afloat-Signature header). "" sends it unsigned.
	Secret afloat.Secret
}

// Defaults of Rule's zero fields.
const (
	DefaultWindow   = 5 * time.Minute
	DefaultMinCalls = 20
)

// Scope is what an alert is about: a task (or route) and a provider, each set when it
// applies (FallbackShare: a task; PrimaryOpen and ContractViolationRate: both; Unusable: a
// provider).
type Scope struct {
	Task     string `json:"task,omitempty"`
	Provider string `json:"provider,omitempty"`
}

func (s Scope) String() string {
	switch {
	case s.Task != "" && s.Provider != "":
		return "task " + s.Task + ", provider " + s.Provider
	case s.Provider != "":
		return "provider " + s.Provider
	}
	return "task " + s.Task
}

// Status is whether an alert is firing or has resolved.
type Status string

const (
	StatusFiring   Status = "firing"
	StatusResolved Status = "resolved"
)

// State is one alert of one scope, as /admin/status lists it and the webhook is told of it.
type State struct {
	Alert Name   `json:"alert"`
	Scope Scope  `json:"scope"`
	State Status `json:"state"`
	// Since is when the alert entered State: when it fired, or when it resolved.
	Since time.Time `json:"since"`
	// Value is the alert's value at the last evaluation (see each Name for its unit), and
	// Threshold what it is compared with.
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	// Webhook is the delivery of the last notification of this alert to its webhook; nil
	// without a webhook.
	Webhook *Delivery `json:"webhook,omitempty"`
}

// Delivery is where one webhook notification stands.
type Delivery struct {
	// State is the notification's: firing or resolved.
	State Status `json:"state"`
	// Result is "pending" (queued, or waiting to retry), "delivered" (a 2xx answer) or
	// "failed" (every attempt failed, or the receiver refused it with a 4xx).
	Result string `json:"result"`
	// Attempts counts the POSTs made so far; LastAttempt is when the last one started.
	Attempts    int        `json:"attempts"`
	LastAttempt *time.Time `json:"last_attempt"`
	// Status is the HTTP status of the last attempt; 0 when it got no answer (Error says
	// why).
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Delivery results.
const (
	resultPending   = "pending"
	resultDelivered = "delivered"
	resultFailed    = "failed"
)

// text is the Slack-compatible one-line message of a state.
func (s State) text() string {
	var b strings.Builder
	if s.State == StatusFiring {
		b.WriteString("[afloat] FIRING ")
	} else {
		b.WriteString("[afloat] resolved ")
	}
	fmt.Fprintf(&b, "%s on %s: %s", s.Alert, s.Scope, describe(s.Alert, s.Value, s.Threshold))
	return b.String()
}

// describe writes an alert's value against its threshold for people.
func describe(n Name, value, threshold float64) string {
	switch n {
	case FallbackShare:
		return fmt.Sprintf("%.0f%% of calls not answered by tier 0 (threshold %.0f%%)", 100*value, 100*threshold)
	case ContractViolationRate:
		return fmt.Sprintf("%.0f%% of answers fail the contract while the breaker is closed (threshold %.0f%%)", 100*value, 100*threshold)
	case ReviewSLA:
		return fmt.Sprintf("%.0f review items past their SLA (threshold %.0f)", value, threshold)
	case DrillStale:
		return fmt.Sprintf("no passing drill in %s (max age %s)", seconds(value), seconds(threshold))
	case PrimaryOpen:
		if value > 0 {
			return "the tier-0 provider's breaker is open"
		}
		return "the tier-0 provider's breaker is closed"
	case CanaryRolledBack:
		if value > 0 {
			return "the canary's candidate was rolled back (see /admin/status for its figures)"
		}
		return "the canary is no longer rolled back"
	case Unusable:
		if value > 0 {
			return "the breaker opened on an unusable failure (bad key, exhausted quota)"
		}
		return "the breaker is no longer open on an unusable failure"
	}
	return fmt.Sprintf("value %g (threshold %g)", value, threshold)
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
