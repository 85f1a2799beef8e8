package afloattest

import (
	"errors"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
)

// Call is one call of a drill: its envelope, its error, and how long it took.
type Call[T any] struct {
	Result afloat.Result[T]
	// Err is the call's error: nil, or a policy's refusal to answer (afloat.ErrBlocked,
	// afloat.ErrReviewUnavailable). Drill stops the test on any other.
	Err error
	// Took is the time the caller waited, on the time package's clock: a testing/synctest
	// bubble's time inside one, so exact there (Result.Latency is the same span measured on
	// the engine's clock).
	Took time.Duration
}

// Report is what a drill saw.
type Report[T any] struct {
	// Calls are the drill's calls, in order.
	Calls []Call[T]
	// Sources counts the calls by the source of their answer.
	Sources map[afloat.Source]int
	// Reasons counts the calls by reason; "" counts the answers of tier 0.
	Reasons map[afloat.Reason]int
}

// Drill runs calls calls of r with in, one after another, on t's context, and reports what
// each returned. It stops the test (t.Fatalf) on an error that is no policy's answer, such
// as a missing input field: a drill of a call that cannot be made proves nothing. The
// assertions are the caller's, on the report:
//
//	rep := afloattest.Drill[Triage](t, triage, in, 20)
//	for _, c := range rep.Calls[15:] {
//		afloattest.RequireDegraded(t, c.Result, afloat.SourceHeuristic)
//		afloattest.RequireFailFast(t, c.Took, 100*time.Millisecond)
//	}
func Drill[T any](t testing.TB, r afloat.Runner, in afloat.Input, calls int) *Report[T] {
	t.Helper()
	rep := &Report[T]{
		Calls:   make([]Call[T], 0, calls),
		Sources: map[afloat.Source]int{},
		Reasons: map[afloat.Reason]int{},
	}
	ctx := t.Context()
	for i := range calls {
		start := time.Now()
		res, err := afloat.Run[T](ctx, r, in)
		took := time.Since(start)
		if err != nil && !errors.Is(err, afloat.ErrBlocked) && !errors.Is(err, afloat.ErrReviewUnavailable) {
			t.Fatalf("afloattest: drill call %d of %d: %v\n%s", i+1, calls, err, envelope(res))
			return rep
		}
		rep.Calls = append(rep.Calls, Call[T]{Result: res, Err: err, Took: took})
		rep.Sources[res.Source]++
		rep.Reasons[res.Reason]++
	}
	return rep
}
