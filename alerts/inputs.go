package alerts

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/state"
	"github.com/afloat-dev/afloat/telemetry"
)

// The evaluator reads what it watches through the small interfaces below, each met by a part
// of afloat as it is: Counts by MetricCounts over the engine's metrics, Breakers by
// *cascade.Engine, Reviews by review.Store, Drills by *state.State.

// Count is a pair of totals that only grow: All the events, Hits those the alert counts.
type Count struct{ All, Hits float64 }

// Counts reads totals counted since the process started, as Prometheus counters are: the
// evaluator takes their increase over each rate alert's window. Implementations must be safe
// for concurrent use and cheap enough to read at every evaluation.
type Counts interface {
	// Calls returns, by task or route, its calls so far (All) and, of them, those not
	// answered by tier 0 (Hits).
	Calls() map[string]Count
	// Answers returns, by task (or route) and provider, the answers the provider gave it so
	// far (All) and, of them, those that failed the contract (Hits).
	Answers() map[Scope]Count
}

// Breakers reads the providers' breakers; *cascade.Engine is one.
type Breakers interface {
	// Breaker returns the provider's breaker, nil for a provider it does not know.
	Breaker(provider string) *breaker.Breaker
}

// Reviews reads the review queue; review.Store is one. An error leaves the review SLA alert
// as it was until the next evaluation.
type Reviews interface {
	// Stats returns, per task, the items not answered yet.
	Stats(ctx context.Context) (map[string]review.TaskStats, error)
	// List returns a page of items, oldest first.
	List(ctx context.Context, f review.Filter) (*review.Page, error)
}

// Drills reads the drill records; *state.State is one.
type Drills interface {
	// Drills returns each scope's drills, keyed "task:NAME" or "route:NAME".
	Drills() map[string]state.Drills
}

// Canaries reads the tasks' canary releases.
type Canaries interface {
	// RolledBack returns, for each task with a canary, whether it is rolled back.
	RolledBack() map[string]bool
}

// MetricCounts reads Counts from the engine's metrics: the calls from
// afloat_requests_total{task, source, degraded, reason} (degraded="true" is a call tier 0
// did not answer, as the engine's fallback share counts it), the answers from
// afloat_attempts_total{task, provider, outcome} (outcomes ok and contract_violation; a
// re-ask is an answer like any other). It is safe for concurrent use.
type MetricCounts struct {
	Metrics *telemetry.Metrics
}

// Calls implements Counts.
func (c MetricCounts) Calls() map[string]Count {
	out := map[string]Count{}
	collect(c.Metrics.Requests, func(l map[string]string, v float64) {
		n := out[l["task"]]
		n.All += v
		if l["degraded"] == "true" {
			n.Hits += v
		}
		out[l["task"]] = n
	})
	return out
}

// Answers implements Counts.
func (c MetricCounts) Answers() map[Scope]Count {
	out := map[Scope]Count{}
	collect(c.Metrics.Attempts, func(l map[string]string, v float64) {
		var hit bool
		switch afloat.Outcome(l["outcome"]) {
		case afloat.OutcomeOK:
		case afloat.OutcomeContractViolation:
			hit = true
		default:
			return
		}
		s := Scope{Task: l["task"], Provider: l["provider"]}
		n := out[s]
		n.All += v
		if hit {
			n.Hits += v
		}
		out[s] = n
	})
	return out
}

// collect reads every series of a counter vector, with its labels.
func collect(vec *prometheus.CounterVec, each func(labels map[string]string, v float64)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		vec.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.Counter == nil {
			continue
		}
		labels := make(map[string]string, len(d.Label))
		for _, lp := range d.Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		each(labels, d.Counter.GetValue())
	}
}

// Openings remembers which providers' breakers opened on an unusable failure (bad key,
// exhausted quota), from the breakers' own events: give Record to every provider's
// breaker.Config.OnStateChange. A breaker only reports the changes it makes itself, so with a
// shared breaker store the replica whose call opened it is the one that knows. The zero
// Openings is not ready: use NewOpenings. It is safe for concurrent use.
type Openings struct {
	mu       sync.Mutex
	unusable map[string]bool
}

// NewOpenings returns an Openings that knows of no opening.
func NewOpenings() *Openings { return &Openings{unusable: map[string]bool{}} }

// Record takes one breaker event: an opening records its kind (a forced one is not
// unusable), a closing forgets it, a half-open probe keeps it.
func (o *Openings) Record(ev breaker.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.To {
	case breaker.StateOpen:
		o.unusable[ev.Name] = !ev.Forced && ev.Kind == afloat.Unusable
	case breaker.StateClosed:
		delete(o.unusable, ev.Name)
	}
}

// Unusable reports whether the provider's breaker last opened on an unusable failure and
// has not closed since.
func (o *Openings) Unusable(provider string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unusable[provider]
}
