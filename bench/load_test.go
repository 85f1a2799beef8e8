package main

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestInterleaveTakesTurns: the calls of an interleaved call go to each target in turn, and
// each outcome names the target that answered it.
func TestInterleaveTakesTurns(t *testing.T) {
	var mu sync.Mutex
	got := map[int]int{}
	target := func(k int) Call {
		return func(context.Context, time.Time) Outcome {
			mu.Lock()
			got[k]++
			mu.Unlock()
			return Outcome{Provider: string(rune('a' + k))}
		}
	}
	call := interleave(target(0), target(1), target(2))
	var outs []Outcome
	for range 9 {
		outs = append(outs, call(context.Background(), time.Time{}))
	}
	for i, o := range outs {
		if o.Target != i%3 || o.Provider != string(rune('a'+i%3)) {
			t.Errorf("call %d: target %d answered by %q; want target %d", i, o.Target, o.Provider, i%3)
		}
	}
	if got[0] != 3 || got[1] != 3 || got[2] != 3 {
		t.Errorf("calls per target %v; want 3 each", got)
	}
	if h := histogram(outs, ofTarget(1)); h.TotalCount() != 3 {
		t.Errorf("ofTarget(1) kept %d outcomes; want 3", h.TotalCount())
	}
}

// TestRotationGivesEachTargetItsSlices: a run cut into slices sends every request of a slice to
// one target, each round gives every target one slice, the rounds' orders differ, and the
// same seed cuts the same way.
func TestRotationGivesEachTargetItsSlices(t *testing.T) {
	const slice, d = 100 * time.Millisecond, 6 * time.Second
	target := func(k int) Call {
		return func(context.Context, time.Time) Outcome { return Outcome{Provider: string(rune('a' + k))} }
	}
	s := newRotation(slice, d, 7, target(0), target(1), target(2))
	start := time.Unix(1000, 0)
	s.begin(start)
	perTarget := map[int]int{}
	orders := map[[3]int]bool{}
	for round := range int(d / (3 * slice)) {
		var order [3]int
		for i := range 3 {
			first := -1
			for j := range 10 { // ten requests in each slice
				at := time.Duration(round*3+i)*slice + time.Duration(j)*slice/10
				o := s.call(context.Background(), start.Add(at))
				if o.Provider != string(rune('a'+o.Target)) {
					t.Fatalf("request at %v: target %d answered by %q", at, o.Target, o.Provider)
				}
				if got := s.targetAt(at); got != o.Target {
					t.Fatalf("targetAt(%v) = %d, the call went to %d", at, got, o.Target)
				}
				if first == -1 {
					first = o.Target
				} else if o.Target != first {
					t.Fatalf("round %d slice %d: requests went to %d and %d", round, i, first, o.Target)
				}
				perTarget[o.Target]++
			}
			order[i] = first
		}
		if seen := map[int]bool{order[0]: true, order[1]: true, order[2]: true}; len(seen) != 3 {
			t.Fatalf("round %d gave its slices to %v; want each target once", round, order)
		}
		orders[order] = true
	}
	if perTarget[0] != 200 || perTarget[1] != 200 || perTarget[2] != 200 {
		t.Errorf("requests per target %v; want 200 each", perTarget)
	}
	if len(orders) < 2 {
		t.Errorf("every round had the order %v; want them shuffled", orders)
	}
	again := newRotation(slice, d, 7, target(0), target(1), target(2))
	for at := time.Duration(0); at < d; at += slice {
		if a, b := s.targetAt(at), again.targetAt(at); a != b {
			t.Fatalf("the same seed cut differently at %v: %d and %d", at, a, b)
		}
	}
}
