package main

import (
	"context"
	"fmt"
	"time"
)

// outage runs the triage task (primary → backup → heuristic rules) at 200 req/s; at a sixth
// of the run the primary starts answering 503 and stays down. It reports who answered
// before and during the outage, the p99s, the calls spent on the dead primary (counted at
// the mock) and how long the breaker took to open, and draws the run to a PNG.
func outage(ctx context.Context, p plan, r *report) error {
	primary, err := startUpstream("primary", upstreamOptions{Latency: 20 * time.Millisecond, Jitter: 0.2})
	if err != nil {
		return err
	}
	defer primary.Close()
	backup, err := startUpstream("backup", upstreamOptions{Latency: 40 * time.Millisecond, Jitter: 0.2})
	if err != nil {
		return err
	}
	defer backup.Close()
	gw, err := startGateway(gwConfig{
		Providers:  []gwProvider{{Name: "primary", URL: primary.URL}, {Name: "backup", URL: backup.URL}},
		TaskBudget: 1500 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	client := newClient(512)
	defer client.CloseIdleConnections()

	const rate = 200
	// The backup's own latency, called directly at the same rate.
	base := OpenLoop{Rate: rate, Duration: p.dur(5*time.Second, 500*time.Millisecond)}.Run(ctx, chatCall(client, backup.ChatURL(), "chat", ""))
	backupP99 := quantile(histogram(base.Outcomes, nil), 99)

	d := p.dur(60*time.Second, 6*time.Second)
	failAfter := d / 6
	failed := make(chan time.Time, 1)
	var failTimer *time.Timer
	watch := watchBreaker(gw, "primary", 2*time.Millisecond)
	run := OpenLoop{Rate: rate, Duration: d, Grace: 5 * time.Second, OnStart: func(start time.Time) {
		failTimer = time.AfterFunc(time.Until(start.Add(failAfter)), func() {
			primary.SetFail(503)
			failed <- time.Now()
		})
	}}.Run(ctx, taskCall(client, gw.URL))
	failTimer.Stop()
	openedAt := watch.Opened()
	primary.SetFail(0)
	var failAt time.Time
	select {
	case failAt = <-failed:
	default:
		return fmt.Errorf("the run ended before the primary failed")
	}
	failRel := failAt.Sub(run.Start)
	openRel := time.Duration(-1)
	if !openedAt.IsZero() {
		openRel = openedAt.Sub(run.Start)
	}

	// Calls the dead primary got: before its breaker opened, and after (probes).
	wasted, probes := 0, 0
	for _, t := range primary.FailedAt() {
		if openRel < 0 || t.Sub(run.Start) < openRel {
			wasted++
		} else {
			probes++
		}
	}

	type phase struct {
		name string
		keep func(Outcome) bool
	}
	phases := []phase{
		{"before the outage", func(o Outcome) bool { return o.At < failRel }},
		{"during the outage", func(o Outcome) bool { return o.At >= failRel }},
		{"  of which before the breaker opened", func(o Outcome) bool { return o.At >= failRel && (openRel < 0 || o.At < openRel) }},
		{"  of which after the breaker opened", func(o Outcome) bool { return openRel >= 0 && o.At >= openRel }},
	}
	var rows [][]string
	answeredDuring, during := 0, 0
	var afterOpenP99 time.Duration
	for i, ph := range phases {
		var n, ok, tier0, tier1, heur, other int
		for _, o := range run.Outcomes {
			if !ph.keep(o) {
				continue
			}
			n++
			if o.Err != nil {
				continue
			}
			ok++
			switch {
			case o.Source == "model" && o.Tier == 0:
				tier0++
			case o.Source == "model" && o.Tier == 1:
				tier1++
			case o.Source == "heuristic":
				heur++
			default:
				other++
			}
		}
		h := histogram(run.Outcomes, func(o Outcome) bool { return o.Err == nil && ph.keep(o) })
		if i == 1 {
			answeredDuring, during = ok, n
		}
		if i == 3 {
			afterOpenP99 = quantile(h, 99)
		}
		rows = append(rows, []string{ph.name, fmt.Sprint(n), pct(ok, n), pct(tier0, n), pct(tier1, n), pct(heur, n), pct(other, n),
			ms(quantile(h, 50)), ms(quantile(h, 99)), ms(quantile(h, 100))})
	}

	r.printf("## 3. outage: the primary fails during the run\n\n")
	r.printf("Task `triage` (enrichment: primary → backup → heuristic rules, budget 1.5 s, the default breaker, retry and timeouts), "+
		"%d req/s open loop for %s; the primary mock (20 ms ± 20 %%) answers 503 from %s on; the backup mock answers in 40 ms ± 20 %%. "+
		"The backup called directly at %d req/s: p99 %s.\n\n", rate, d, failRel.Round(time.Millisecond), rate, ms(backupP99))
	r.table([]string{"calls sent", "n", "answered", "primary (tier 0)", "backup (tier 1)", "heuristic", "other", "p50", "p99", "max"}, rows)
	openText := "did not open"
	if openRel >= 0 {
		openText = fmt.Sprintf("opened %s after the primary failed", ms(openRel-failRel))
	}
	r.printf("The primary's breaker %s. Calls that reached the dead primary (503s counted at the mock): "+
		"%d before the breaker opened (retries included), %d after it (half-open probes).\n\n", openText, wasted, probes)
	if err := plotOutage(p.out, run, failRel, openRel); err != nil {
		r.printf("The plot could not be drawn: %v\n\n", err)
	} else {
		r.printf("Latency and who answered, per second: `%s`.\n\n", p.out)
	}
	r.check("100 % answered during the outage", fmt.Sprintf("%s (%d of %d)", pct(answeredDuring, during), answeredDuring, during), during > 0 && answeredDuring == during)
	r.check("p99 after the breaker opened ≤ the backup's p99 + 10 ms",
		fmt.Sprintf("%s vs %s + 10 ms", ms(afterOpenP99), ms(backupP99)), openRel >= 0 && afterOpenP99 <= backupP99+10*time.Millisecond)
	return nil
}
