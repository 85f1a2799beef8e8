package shed

import (
	"context"
	"math"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
)

func TestShedsTheLeastCriticalFirst(t *testing.T) {
	var p time.Duration
	s := New(10*time.Millisecond, func() time.Duration { return p })
	for _, c := range []struct {
		pressure             time.Duration
		level                Level
		enrich, assist, crit bool
	}{
		{0, Normal, false, false, false},
		{9 * time.Millisecond, Normal, false, false, false},
		{10 * time.Millisecond, Saturated, true, false, false},
		{19 * time.Millisecond, Saturated, true, false, false},
		{20 * time.Millisecond, Overloaded, true, true, false},
		{time.Hour, Overloaded, true, true, false},
	} {
		p = c.pressure
		if got := s.Level(); got != c.level {
			t.Errorf("pressure %s: level %d, want %d", c.pressure, got, c.level)
		}
		if got := [3]bool{s.Shed(afloat.Enrichment), s.Shed(afloat.Assistance), s.Shed(afloat.Critical)}; got != [3]bool{c.enrich, c.assist, c.crit} {
			t.Errorf("pressure %s: shed enrichment, assistance, critical = %v; want %v", c.pressure, got, [3]bool{c.enrich, c.assist, c.crit})
		}
	}
}

func TestOffSheddsNothing(t *testing.T) {
	for _, s := range []*Shedder{nil, {}, New(0, func() time.Duration { return time.Hour }), New(time.Millisecond, nil)} {
		if s.Shed(afloat.Enrichment) || s.Level() != Normal {
			t.Errorf("%+v sheds; want nothing shed when off", s)
		}
	}
}

func TestQuantileOfTheWindow(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0.001, 0.002, 0.004, 0.008, math.Inf(1)}
	last := []uint64{0, 0, 0, 0, 0}
	// 100 samples: 98 under 1 ms, 1 in [2, 4) ms, 1 in [4, 8) ms → p99 is the 99th: [2, 4).
	counts := []uint64{98, 0, 1, 1, 0}
	if got := quantile(buckets, counts, last, 0.99); got != 2*time.Millisecond {
		t.Errorf("p99 %s; want 2ms, the lower bound of the 99th sample's bucket", got)
	}
	// The next window counts only what was added: 10 samples in [4, 8) ms.
	counts = []uint64{98, 0, 1, 11, 0}
	if got := quantile(buckets, counts, last, 0.99); got != 4*time.Millisecond {
		t.Errorf("p99 of the second window %s; want 4ms", got)
	}
	if got := quantile(buckets, counts, last, 0.99); got != 0 {
		t.Errorf("p99 of an empty window %s; want 0", got)
	}
}

func TestSamplerReadsTheRuntime(t *testing.T) {
	s := &Sampler{sample: []metrics.Sample{{Name: schedLatencies}}}
	s.read()
	if len(s.last) == 0 {
		t.Fatalf("the runtime has no %s histogram", schedLatencies)
	}
	if l := s.read(); l < 0 || l > time.Minute {
		t.Errorf("scheduling latency %s; want a sane figure", l)
	}
	running := NewSampler(context.Background(), time.Millisecond)
	running.Close() // stops its goroutine: Close returns only once it has
	running.Close() // and a second Close is harmless
}
