package alerts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat/afloattest"
	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/telemetry"
)

// TestAlertFallbackShareOutage plays an outage on a fake clock: the primary answers 503 from
// 60s to 120s, the breaker opens and the backup answers. The fallback_share alert (above 0.3
// for 30s) must fire at the first evaluation 30s after the share was first seen above 0.3,
// not one before, and resolve once the share has been back under it for 30s; each
// evaluation is checked against that rule. The webhook gets each transition delivered once,
// signed, the firing after a retry of a 500; afloat_alerts_firing goes 0 → 1 → 0.
func TestAlertFallbackShareOutage(t *testing.T) {
	ctx := t.Context()
	const (
		tick     = 5 * time.Second
		hold     = 30 * time.Second
		perTick  = 4
		faultAt  = 60 * time.Second
		clearAt  = 120 * time.Second
		lastTick = 240 * time.Second
	)
	fc := clockwork.NewFakeClockAt(start)
	primary := fault.Wrap("primary", afloattest.Answering("primary", validAnswer), fc)
	eng, task := triageOver(t, fc, primary, afloattest.Answering("backup", validAnswer))
	hook := newReceiver(t, fc, 1)
	reg := prometheus.NewRegistry()
	gauge, err := telemetry.NewAlertsFiring(reg, []string{string(alerts.FallbackShare)})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "afloat_alerts_firing"); n != 1 {
		t.Fatalf("%d afloat_alerts_firing series before any evaluation, want 1 at 0", n)
	}
	ev, err := alerts.New(alerts.Config{
		Rules: []alerts.Rule{{Name: alerts.FallbackShare, Above: 0.3, For: hold, Window: tick, MinCalls: perTick,
			Webhook: hook.URL, Secret: hookSecret}},
		Counts: alerts.MetricCounts{Metrics: eng.Metrics()}, Breakers: eng, Clock: fc, Firing: gauge,
		Rand: half, WebhookBackoff: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	firingGauge := func() float64 { return testutil.ToFloat64(gauge.WithLabelValues(string(alerts.FallbackShare))) }

	ev.Evaluate(ctx) // the baseline
	var (
		holding, clearing time.Time // the rule, mirrored from what the calls showed
		firing            bool
		firedAt, resolved time.Time
		gauges            []float64
		first             hookRequest
	)
	for at := time.Duration(0); at < lastTick; at += tick {
		switch at {
		case faultAt:
			if err := primary.Set(fault.Fault{Mode: fault.ModeUnavailable, Status: 503}); err != nil {
				t.Fatal(err)
			}
		case clearAt:
			if err := primary.Set(fault.Fault{}); err != nil {
				t.Fatal(err)
			}
		}
		degraded := 0
		for range perTick {
			res, err := task.RunJSON(ctx, ticket)
			if err != nil {
				t.Fatal(err)
			}
			if res.Degraded {
				degraded++
			}
		}
		fc.Advance(tick)
		ev.Evaluate(ctx)
		now := fc.Now()
		holds := float64(degraded)/perTick > 0.3
		wasFiring := firing
		switch {
		case !firing && !holds:
			holding = time.Time{}
		case !firing:
			if holding.IsZero() {
				holding = now
			}
			firing = now.Sub(holding) >= hold
		case holds:
			clearing = time.Time{}
		default:
			if clearing.IsZero() {
				clearing = now
			}
			firing = now.Sub(clearing) < hold
		}
		got := ev.Firing()
		if (len(got) == 1) != firing {
			t.Fatalf("at %v (%d of %d degraded): firing %v, want %v", now.Sub(start), degraded, perTick, got, firing)
		}
		if firing && !wasFiring {
			firedAt = now
			s := got[0]
			if s.Alert != alerts.FallbackShare || s.Scope != (alerts.Scope{Task: "triage"}) || s.State != alerts.StatusFiring ||
				!s.Since.Equal(now) || s.Value != 1 || s.Threshold != 0.3 {
				t.Errorf("firing state %+v", s)
			}
			// The receiver answers the first POST 500; the retry waits a second on the clock,
			// which the next tick's advance passes.
			if first = hook.next(t); first.answered != 500 || first.payload.State != alerts.StatusFiring || !first.valid {
				t.Fatalf("first webhook request %+v, want the firing, signed, answered 500", first)
			}
			fc.BlockUntilContext(ctx, 1)
		}
		if !firing && wasFiring {
			resolved = now
		}
		gauges = append(gauges, firingGauge())
	}

	if want := start.Add(faultAt + tick + hold); !firedAt.Equal(want) {
		t.Errorf("fired at %v, want %v: the first evaluation %v after the share was seen above 0.3", firedAt.Sub(start), want.Sub(start), hold)
	}
	if resolved.IsZero() || !resolved.After(start.Add(clearAt+hold)) {
		t.Fatalf("resolved at %v, want after the fault cleared at %v and %v more", resolved.Sub(start), clearAt, hold)
	}
	if snap := eng.Breaker("primary").Snapshot(ctx); snap.State != breaker.StateClosed {
		t.Errorf("primary breaker %v at the end", snap.State)
	}
	var moves []float64
	for _, g := range gauges {
		if len(moves) == 0 || moves[len(moves)-1] != g {
			moves = append(moves, g)
		}
	}
	if len(moves) != 3 || moves[0] != 0 || moves[1] != 1 || moves[2] != 0 {
		t.Errorf("afloat_alerts_firing moved %v, want 0 → 1 → 0", moves)
	}

	// The webhook: the firing's retry and the resolution, each answered 200, each signed.
	retry, res := hook.next(t), hook.next(t)
	ev.Close()
	select {
	case extra := <-hook.got:
		t.Errorf("an extra webhook request: %+v", extra)
	default:
	}
	tests := []struct {
		name string
		hr   hookRequest
		want alerts.Status
		at   time.Time
	}{{"firing, retried", retry, alerts.StatusFiring, firedAt}, {"resolved", res, alerts.StatusResolved, resolved}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.hr.payload
			switch {
			case !tc.hr.valid:
				t.Error("signature does not verify")
			case tc.hr.answered != 200:
				t.Errorf("answered %d", tc.hr.answered)
			case p.State != tc.want || p.Alert != alerts.FallbackShare || p.Scope.Task != "triage" || !p.Since.Equal(tc.at) || p.Threshold != 0.3:
				t.Errorf("payload %+v, want %s since %v", p, tc.want, tc.at.Sub(start))
			case !strings.Contains(p.Text, "fallback_share on task triage"):
				t.Errorf("text %q", p.Text)
			}
		})
	}
	if retry.delivery == "" || retry.delivery != first.delivery || retry.delivery == res.delivery {
		t.Errorf("delivery ids %q, %q and %q: want one per notification, the same on its retry", first.delivery, retry.delivery, res.delivery)
	}
	t.Logf("fired at %v, resolved at %v (fault %v–%v, for %v)", firedAt.Sub(start), resolved.Sub(start), faultAt, clearAt, hold)
}
