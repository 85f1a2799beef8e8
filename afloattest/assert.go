package afloattest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
)

// RequireDegraded stops the test (t.Fatalf) unless res is a degraded answer from source
// with a reason: the feature degraded as designed. For an answer of a lower tier, source is
// afloat.SourceModel (RequireModel then says which).
func RequireDegraded[T any](t testing.TB, res afloat.Result[T], source afloat.Source) {
	t.Helper()
	if res.Degraded && res.Source == source && res.Reason != "" {
		return
	}
	t.Fatalf("afloattest: want a degraded %s answer with a reason; got source %q, degraded %v, reason %q\n%s",
		source, res.Source, res.Degraded, res.Reason, envelope(res))
}

// RequireModel stops the test unless res is a model's answer from provider.
func RequireModel[T any](t testing.TB, res afloat.Result[T], provider string) {
	t.Helper()
	if res.Source == afloat.SourceModel && res.Provider == provider {
		return
	}
	t.Fatalf("afloattest: want an answer of model %q; got source %q, provider %q\n%s",
		provider, res.Source, res.Provider, envelope(res))
}

// RequireReason stops the test unless res's reason is one of reasons; with no reasons, unless
// res has none (tier 0 answered). Reasons other than afloat.ReasonKillSwitch are attempt
// outcomes: "circuit_open", "timeout", or afloat.Reason(afloat.OutcomeCircuitOpen).
func RequireReason[T any](t testing.TB, res afloat.Result[T], reasons ...afloat.Reason) {
	t.Helper()
	if (len(reasons) == 0 && res.Reason == "") || slices.Contains(reasons, res.Reason) {
		return
	}
	want := "no reason"
	if len(reasons) > 0 {
		want = fmt.Sprintf("reason %q", reasons)
	}
	t.Fatalf("afloattest: want %s; got reason %q\n%s", want, res.Reason, envelope(res))
}

// Breakers holds the providers' circuit breakers: *cascade.Engine does.
type Breakers interface {
	// Breaker returns the named provider's breaker, or nil when there is no such provider.
	Breaker(provider string) *breaker.Breaker
}

// RequireBreaker stops the test unless the breaker of provider in b is in state want. An
// open breaker past its open period reads half-open (breaker.Breaker.State).
func RequireBreaker(t testing.TB, b Breakers, provider string, want breaker.State) {
	t.Helper()
	br := b.Breaker(provider)
	if br == nil {
		t.Fatalf("afloattest: no breaker for provider %q", provider)
		return
	}
	snap := br.Snapshot(t.Context())
	if snap.State == want {
		return
	}
	t.Fatalf("afloattest: breaker of %q is %v, want %v (%s)", provider, snap.State, want, describe(snap))
}

// RequireFailFast stops the test unless took, the time a call took, is under bound: the call
// did not pay a timeout. Measure took inside a testing/synctest bubble, where time moves only
// when every goroutine waits, so a call that skipped an open circuit takes no time at all and
// one that waited on a hanging provider takes exactly its timeout.
func RequireFailFast(t testing.TB, took, bound time.Duration) {
	t.Helper()
	if took < bound {
		return
	}
	t.Fatalf("afloattest: the call took %v, want under %v: it paid a timeout instead of failing fast", took, bound)
}

// envelope renders res as the JSON envelope of shared/DESIGN.md §3, for failure messages.
func envelope[T any](res afloat.Result[T]) string {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Sprintf("envelope: %+v", res)
	}
	return "envelope: " + string(b)
}

// describe says when a breaker entered its state and, if open, until when.
func describe(s breaker.Snapshot) string {
	switch {
	case s.Since.IsZero():
		return "it never changed state"
	case s.State == breaker.StateOpen:
		return fmt.Sprintf("since %s, until %s", s.Since.Format(time.RFC3339Nano), s.Until.Format(time.RFC3339Nano))
	}
	return "since " + s.Since.Format(time.RFC3339Nano)
}
