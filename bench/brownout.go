package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// brownout slows the primary of the triage task from 300 ms to 5 s mid-run and measures,
// call by call (from the envelope's attempts), how long each call spent on the primary
// before it fell back: with afloat's adaptive read timeout, and with a fixed 1 s and a fixed
// 30 s timeout. The three gateways run side by side, each over mocks of its own.
func brownout(ctx context.Context, p plan, r *report) error {
	type variant struct {
		name, timeouts string
		primary, back  *Upstream
		gw             *instance
		run            *Run
		openedAt       time.Time
		slowAt         time.Time
	}
	variants := []*variant{
		{name: "adaptive (defaults)"},
		{name: "fixed 1 s", timeouts: ", timeouts: {min: 1s, max: 1s, initial: 1s}"},
		{name: "fixed 30 s", timeouts: ", timeouts: {min: 30s, max: 30s, initial: 30s}"},
	}
	const (
		rate    = 20
		healthy = 300 * time.Millisecond
		slow    = 5 * time.Second
	)
	budget := 40 * time.Second
	for _, v := range variants {
		var err error
		if v.primary, err = startUpstream("primary", upstreamOptions{Latency: healthy, Jitter: 0.2}); err != nil {
			return err
		}
		defer v.primary.Close()
		if v.back, err = startUpstream("backup", upstreamOptions{Latency: 50 * time.Millisecond, Jitter: 0.2}); err != nil {
			return err
		}
		defer v.back.Close()
		v.gw, err = startGateway(gwConfig{
			Providers:  []gwProvider{{Name: "primary", URL: v.primary.URL, Extra: v.timeouts}, {Name: "backup", URL: v.back.URL}},
			TaskBudget: budget,
		})
		if err != nil {
			return err
		}
		defer v.gw.Close()
	}
	client := newClient(1024)
	defer client.CloseIdleConnections()
	// The healthy phase gives the estimate its min_samples (20) answers and more.
	healthyFor := p.dur(6*time.Second, 1500*time.Millisecond)
	slowFor := p.dur(12*time.Second, 1500*time.Millisecond)
	grace := min(slow+time.Second, max(time.Second, p.dur(6*time.Second, 6*time.Second)))

	var wg sync.WaitGroup
	for _, v := range variants {
		wg.Go(func() {
			watch := watchBreaker(v.gw, "primary", 2*time.Millisecond)
			var timer *time.Timer
			slowed := make(chan time.Time, 1)
			v.run = OpenLoop{Rate: rate, Duration: healthyFor + slowFor, Grace: grace, OnStart: func(start time.Time) {
				timer = time.AfterFunc(time.Until(start.Add(healthyFor)), func() {
					v.primary.SetLatency(slow)
					slowed <- time.Now()
				})
			}}.Run(ctx, taskCall(client, v.gw.URL))
			timer.Stop()
			v.openedAt = watch.Opened()
			select {
			case v.slowAt = <-slowed:
			default:
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	r.printf("## 4. brownout: the primary slows from 300 ms to 5 s\n\n")
	r.printf("Task `triage` (primary → backup, budget %s), %d req/s open loop: %s with the primary at 300 ms ± 20 %%, "+
		"then %s at 5 s ± 20 %% (backup: 50 ms). \"Wait\" is the time a call spent on the primary (its attempt's `latency_ms`). "+
		"\"First calls\" are those sent after the slowdown and before the breaker opened; after it, only half-open probes wait. "+
		"The three gateways ran at the same time over mocks of their own.\n\n", budget, rate, healthyFor, slowFor)
	var rows [][]string
	for _, v := range variants {
		run := v.run
		slowRel := healthyFor
		if !v.slowAt.IsZero() {
			slowRel = v.slowAt.Sub(run.Start)
		}
		openRel := time.Duration(-1)
		if !v.openedAt.IsZero() {
			openRel = v.openedAt.Sub(run.Start)
		}
		var healthyWaits, firstWaits, laterWaits []time.Duration
		var onPrimary time.Duration
		var brown, answered, cut int
		var brownLat []Outcome
		for _, o := range run.Outcomes {
			switch {
			case o.At < slowRel-200*time.Millisecond: // clear of the switch
				if o.Err == nil && o.PrimaryOutcome == "ok" {
					healthyWaits = append(healthyWaits, o.Primary)
				}
			case o.At >= slowRel:
				brown++
				if o.Err == errCut {
					cut++
					continue
				}
				if o.Err == nil {
					answered++
					brownLat = append(brownLat, o)
				}
				onPrimary += o.Primary
				if !waited(o) {
					continue
				}
				if openRel < 0 || o.At < openRel {
					firstWaits = append(firstWaits, o.Primary)
				} else {
					laterWaits = append(laterWaits, o.Primary)
				}
			}
		}
		p95 := quantile(durationHist(healthyWaits), 95)
		fh := durationHist(firstWaits)
		maxFirst := quantile(fh, 100)
		stopped := "never (the breaker stayed closed)"
		if openRel >= 0 {
			stopped = fmt.Sprintf("%s after the slowdown", ms(openRel-slowRel))
		}
		mean := time.Duration(0)
		if brown-cut > 0 {
			mean = onPrimary / time.Duration(brown-cut)
		}
		probes := "0"
		if len(laterWaits) > 0 {
			probes = fmt.Sprintf("%d (max %s)", len(laterWaits), ms(quantile(durationHist(laterWaits), 100)))
		}
		rows = append(rows, []string{v.name, ms(p95), fmt.Sprint(len(firstWaits)), ms(quantile(fh, 50)), ms(maxFirst),
			ratio(float64(maxFirst), float64(p95)), stopped, probes,
			ms(mean), ms(quantile(histogram(brownLat, nil), 99)), fmt.Sprintf("%s%s", pct(answered, brown), cutNote(cut))})
		if v.name == variants[0].name {
			r.check("brownout: the first calls wait ≤ about 2× the healthy p95, then stop waiting",
				fmt.Sprintf("max wait %s = %s the healthy p95 (%s); %d calls waited; breaker opened %s", ms(maxFirst),
					ratio(float64(maxFirst), float64(p95)), ms(p95), len(firstWaits), stopped),
				openRel >= 0 && p95 > 0 && maxFirst <= 2*p95)
		}
	}
	r.table([]string{"timeouts", "healthy p95", "first calls that waited", "their p50 wait", "max wait", "max / healthy p95",
		"stopped waiting", "probes after (waits)", "mean wait per call, brownout", "p99 latency, brownout", "answered"}, rows)
	return nil
}

// waited says the call was sent to the primary (not skipped by its circuit, the deadline or
// the bulkhead).
func waited(o Outcome) bool {
	switch o.PrimaryOutcome {
	case "", "circuit_open", "deadline", "bulkhead":
		return o.PrimaryOutcome == "deadline" && o.Primary > 0
	}
	return true
}

func cutNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d still waiting at the end)", n)
}
