package sim

import (
	"slices"
	"testing"
	"time"
)

// TestLatencyDistribution draws the latencies of 2000 calls and checks that their p50 and p95
// are within 10% of the configured ones.
func TestLatencyDistribution(t *testing.T) {
	tests := []struct {
		name     string
		p50, p95 time.Duration
	}{
		{"design example", 300 * time.Millisecond, 700 * time.Millisecond},
		{"narrow", 50 * time.Millisecond, 60 * time.Millisecond},
		{"wide", time.Second, 8 * time.Second},
		{"constant", 200 * time.Millisecond, 200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{P50: tc.p50, P95: tc.p95, Seed: 11})
			if err != nil {
				t.Fatal(err)
			}
			const n = 2000
			d := make([]time.Duration, n)
			for i := range d {
				d[i] = p.start().latency
			}
			slices.Sort(d)
			for _, q := range []struct {
				name      string
				got, want time.Duration
			}{{"p50", d[n*50/100], tc.p50}, {"p95", d[n*95/100], tc.p95}} {
				if diff := float64(q.got-q.want) / float64(q.want); diff < -0.1 || diff > 0.1 {
					t.Errorf("%s = %v, want %v ± 10%%", q.name, q.got, q.want)
				}
			}
		})
	}
}

func TestNoLatency(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if d := p.start().latency; d != 0 {
			t.Fatalf("latency %v with no P50 and P95", d)
		}
	}
}

func TestSameSeedSameLatencies(t *testing.T) {
	cfg := Config{P50: 300 * time.Millisecond, P95: 700 * time.Millisecond, ErrorRate: 0.5, Seed: 9}
	a, _ := New(cfg)
	b, _ := New(cfg)
	cfg.Seed = 10
	c, _ := New(cfg)
	same, differ := true, false
	for range 100 {
		pa, pb, pc := a.start(), b.start(), c.start()
		same = same && pa == pb
		differ = differ || pa.latency != pc.latency
	}
	if !same {
		t.Error("the same seed drew different plans")
	}
	if !differ {
		t.Error("seeds 9 and 10 drew the same 100 latencies")
	}
}

func TestLatencyTailSaturates(t *testing.T) {
	l, err := fitLognormal(time.Second, 1000*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.at(40); got != time.Duration(1<<63-1) {
		t.Fatalf("at(40) = %v, want the longest duration", got)
	}
}
