package breaker

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestJitterSpreadsOpenPeriods(t *testing.T) {
	low := func() float64 { return 0 }
	high := func() float64 { return 1 - 1e-9 } // Rand never returns 1
	tests := []struct {
		name   string
		cfg    Config
		probe  bool          // measure the opening by a failed probe, not the first one
		err    error         // the failure that opens; nil means errUnavailable
		want   time.Duration // the open period
		within time.Duration // tolerance (the high end is just below its bound)
	}{
		{"default jitter, low end", Config{Rand: low}, false, nil, 8 * time.Second, 0},
		{"default jitter, high end", Config{Rand: high}, false, nil, 12 * time.Second, time.Microsecond},
		{"custom jitter", Config{Jitter: 0.5, Rand: low}, false, nil, 5 * time.Second, 0},
		{"failed probe, low end", Config{Rand: low}, true, nil, 12 * time.Second, 0},
		{"failed probe, high end", Config{Rand: high}, true, nil, 18 * time.Second, time.Microsecond},
		{"capped by max recovery", Config{MaxRecovery: 11 * time.Second, Rand: high}, false, nil, 11 * time.Second, 0},
		{"unusable cooldown is not jittered", Config{Rand: low}, false, errUnusable, DefaultUnusableCooldown, 0},
		{"a longer retry-after is not jittered", Config{Rand: low}, false, throttled(9 * time.Second), 9 * time.Second, 0},
		{"a shorter retry-after keeps the jittered period", Config{Rand: high}, false, throttled(9 * time.Second), 12 * time.Second, time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.ConsecutiveFailures = 1
			b, clock, _ := newTest(t, cfg)
			if tt.probe {
				openAndWait(t, b, 1, clock)
			}
			err := tt.err
			if err == nil {
				err = errUnavailable
			}
			calls(t, b, 1, err)
			snap := b.Snapshot(context.Background())
			got := snap.Until.Sub(clock.Now())
			if snap.State != StateOpen || got > tt.want || got < tt.want-tt.within {
				t.Fatalf("snapshot = %+v: open for %v, want %v (within %v)", snap, got, tt.want, tt.within)
			}
			wantRecovery := DefaultRecovery
			if tt.probe {
				wantRecovery = 15 * time.Second
			}
			if snap.Recovery != wantRecovery {
				t.Errorf("Recovery = %v, want %v: the schedule keeps the period before jitter", snap.Recovery, wantRecovery)
			}
		})
	}
	t.Run("real rand stays within bounds", func(t *testing.T) {
		clock := newTestClock()
		b, err := New("p", Config{ConsecutiveFailures: 1, Clock: clock, MaxRecovery: DefaultRecovery})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[time.Duration]bool{}
		for i := range 200 {
			calls(t, b, 1, errUnavailable) // the first opening, then failed probes
			d := b.Snapshot(context.Background()).Until.Sub(clock.Now())
			if d < 8*time.Second || d > 10*time.Second { // 10s: capped by MaxRecovery
				t.Fatalf("opening %d: open for %v, want within [8s, 10s]", i+1, d)
			}
			seen[d] = true
			clock.Advance(d)
		}
		if len(seen) < 2 {
			t.Errorf("200 openings all lasted %v: no jitter", seen)
		}
	})
}

// TestBackAfterOneMinute: with the defaults (and no jitter), a provider that is down for 60 s
// after its breaker opened, and probed as soon as each open period ends (as the cascade's
// background probe does), is closed again within one open period of the new schedule after
// it came back. The old schedule (30 s, doubling) is measured beside it.
func TestBackAfterOneMinute(t *testing.T) {
	const down = 60 * time.Second
	run := func(t *testing.T, cfg Config) (closedAfter, period time.Duration, probes []time.Duration) {
		t.Helper()
		b, clock, _ := newTest(t, cfg)
		t0 := clock.Now()
		calls(t, b, DefaultConsecutiveFailures, errUnavailable)
		for range 20 {
			snap := b.Snapshot(context.Background())
			if snap.State == StateClosed {
				return clock.Now().Sub(t0), period, probes
			}
			period = snap.Until.Sub(clock.Now())
			clock.Advance(period)
			var err error
			if clock.Now().Sub(t0) < down {
				err = errUnavailable
			}
			probes = append(probes, clock.Now().Sub(t0))
			if aerr := call(b, err); aerr != nil {
				t.Fatalf("probe at +%v: Allow: %v", clock.Now().Sub(t0), aerr)
			}
		}
		t.Fatalf("still not closed after 20 probes at %v", probes)
		return 0, 0, nil
	}
	closedAfter, period, probes := run(t, Config{})
	t.Logf("new schedule: probes at %v, closed at +%v (the last open period %v)", probes, closedAfter, period)
	if closedAfter < down || closedAfter > down+period {
		t.Errorf("closed at +%v, want within one open period (%v) after +%v", closedAfter, period, down)
	}
	if want := 81250 * time.Millisecond; closedAfter != want {
		t.Errorf("closed at +%v, want +%v (probes at 10s, 25s, 47.5s, 81.25s)", closedAfter, want)
	}
	oldAfter, _, oldProbes := run(t, Config{Recovery: 30 * time.Second, Growth: 2})
	t.Logf("old schedule: probes at %v, closed at +%v", oldProbes, oldAfter)
	if closedAfter >= oldAfter {
		t.Errorf("new schedule closed at +%v, no sooner than the old one at +%v", closedAfter, oldAfter)
	}
}

func TestForcedOpeningIsNotJittered(t *testing.T) {
	b, clock, _ := newTest(t, Config{Rand: func() float64 { return 0 }})
	if err := b.Force(context.Background(), StateOpen); err != nil {
		t.Fatal(err)
	}
	clock.Advance(DefaultRecovery - time.Nanosecond)
	if err := call(b, nil); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow before Recovery ended = %v, want ErrOpen", err)
	}
	clock.Advance(time.Nanosecond)
	if err := call(b, nil); err != nil {
		t.Fatalf("Allow when Recovery ended = %v, want the probe", err)
	}
}
