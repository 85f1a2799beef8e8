package breaker

import (
	"context"
	"testing"
	"time"
)

func TestMemoryStoreSwap(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	if rec, _ := s.Load(ctx, "p"); rec != (Record{}) {
		t.Fatalf("new name loads %+v, want the zero Record", rec)
	}
	open := Record{State: StateOpen, Epoch: 1, Since: start, Until: start.Add(time.Second)}
	got, ok, err := s.Swap(ctx, "p", 0, open)
	if err != nil || !ok || got.Revision != 1 || got.State != StateOpen {
		t.Fatalf("Swap at revision 0 = %+v, %t, %v; want swapped at revision 1", got, ok, err)
	}
	got, ok, _ = s.Swap(ctx, "p", 0, Record{State: StateClosed, Epoch: 1})
	if ok || got.Revision != 1 || got.State != StateOpen {
		t.Fatalf("Swap at a stale revision = %+v, %t; want refused with the current record", got, ok)
	}
	if rec, _ := s.Load(ctx, "other"); rec != (Record{}) {
		t.Errorf("another name loads %+v, want the zero Record", rec)
	}
}

func TestMemoryStoreEpochClearsCountsAndProbe(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	for range 3 {
		if _, err := s.Count(ctx, "p", 0, true, start, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// A swap within the epoch keeps the counts.
	if _, ok, _ := s.Swap(ctx, "p", 0, Record{Recovery: time.Minute}); !ok {
		t.Fatal("swap refused")
	}
	if c, _ := s.Count(ctx, "p", 0, true, start, time.Minute); c.Calls != 4 || c.Consecutive != 4 {
		t.Fatalf("counts after a same-epoch swap = %+v, want 4 calls in a row", c)
	}
	if _, ok, _ := s.Swap(ctx, "p", 1, Record{State: StateHalfOpen, Epoch: 1}); !ok {
		t.Fatal("swap refused")
	}
	if c, _ := s.Count(ctx, "p", 0, true, start, time.Minute); c != (Counts{}) {
		t.Errorf("Count in an ended epoch = %+v, want nothing recorded", c)
	}
	if _, ok, _ := s.AcquireProbe(ctx, "p", 0, start, time.Minute); ok {
		t.Error("AcquireProbe in an ended epoch succeeded")
	}
	if _, ok, _ := s.AcquireProbe(ctx, "p", 1, start, time.Minute); !ok {
		t.Fatal("AcquireProbe in the current epoch refused")
	}
	if _, ok, _ := s.Swap(ctx, "p", 2, Record{State: StateHalfOpen, Epoch: 2}); !ok {
		t.Fatal("swap refused")
	}
	if _, ok, _ := s.AcquireProbe(ctx, "p", 2, start, time.Minute); !ok {
		t.Error("AcquireProbe in a new epoch refused: the slot of the old one was kept")
	}
	if c, _ := s.Count(ctx, "p", 2, false, start, time.Minute); c.Calls != 1 || c.Failures != 0 {
		t.Errorf("counts in a new epoch = %+v, want 1 call", c)
	}
}

func TestMemoryStoreWindow(t *testing.T) {
	// A 10s window has 1s buckets; a call leaves the window once its bucket is 10 behind.
	tests := []struct {
		name      string
		at        []time.Duration // offsets of failed calls, then one success at the last
		wantCalls int
	}{
		{"all in one bucket", []time.Duration{0, 0, 0}, 3},
		{"spread over the window", []time.Duration{0, 5 * time.Second, 9 * time.Second}, 3},
		{"first bucket left", []time.Duration{0, 5 * time.Second, 10 * time.Second}, 2},
		{"all but the last left", []time.Duration{0, time.Second, time.Minute}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewMemoryStore()
			var c Counts
			for i, d := range tt.at {
				var err error
				if c, err = s.Count(context.Background(), "p", 0, i < len(tt.at)-1, start.Add(d), 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if c.Calls != tt.wantCalls || c.Failures != tt.wantCalls-1 || c.Consecutive != 0 {
				t.Errorf("counts = %+v, want %d calls, %d failures", c, tt.wantCalls, tt.wantCalls-1)
			}
		})
	}
}

func TestMemoryStoreProbeSlot(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	tok, ok, _ := s.AcquireProbe(ctx, "p", 0, start, time.Second)
	if !ok || tok == 0 {
		t.Fatalf("AcquireProbe = %d, %t; want a non-zero token", tok, ok)
	}
	if _, ok, _ := s.AcquireProbe(ctx, "p", 0, start.Add(time.Second-1), time.Second); ok {
		t.Fatal("slot taken twice within its ttl")
	}
	if err := s.ReleaseProbe(ctx, "p", 0, tok+1); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.AcquireProbe(ctx, "p", 0, start, time.Second); ok {
		t.Fatal("a release with another token freed the slot")
	}
	if err := s.ReleaseProbe(ctx, "p", 0, tok); err != nil {
		t.Fatal(err)
	}
	tok2, ok, _ := s.AcquireProbe(ctx, "p", 0, start, time.Second)
	if !ok || tok2 == tok {
		t.Fatalf("after release: AcquireProbe = %d, %t; want a new token", tok2, ok)
	}
	if _, ok, _ := s.AcquireProbe(ctx, "p", 0, start.Add(time.Second), time.Second); !ok {
		t.Error("slot still held after its ttl")
	}
}
