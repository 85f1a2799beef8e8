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
