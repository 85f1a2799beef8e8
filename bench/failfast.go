package main

import (
	"context"
	"fmt"
	"time"
)

// failfast measures what an open circuit costs a call: the route [primary, backup] with the
// primary's breaker forced open, against the backup called directly, through a bare reverse
// proxy (a hop that knows no circuits) and by a route of the backup alone (the same gateway
// without the skip).
func failfast(ctx context.Context, p plan, r *report) error {
	primary, err := startUpstream("primary", upstreamOptions{})
	if err != nil {
		return err
	}
	defer primary.Close()
	backup, err := startUpstream("backup", upstreamOptions{})
	if err != nil {
		return err
	}
	defer backup.Close()
	proxy, err := startChild("proxy", backup.URL)
	if err != nil {
		return err
	}
	defer proxy.Close()
	gw, err := startGatewayProcess(gwConfig{
		Providers: []gwProvider{{Name: "primary", URL: primary.URL}, {Name: "backup", URL: backup.URL}},
		// A forced open lasts the recovery period: long enough for the whole scenario.
		Defaults: []string{"breaker: {recovery: 5m}"},
		Routes:   []gwRoute{{Name: "chat", Budget: 30 * time.Second}, {Name: "solo", Budget: 30 * time.Second, Tiers: []string{"backup"}}},
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	client := newClient(256)
	defer client.CloseIdleConnections()

	targets := []struct {
		name string
		call Call
	}{
		{"backup, direct", chatCall(client, backup.ChatURL(), "chat", "")},
		{"backup, through the bare proxy", chatCall(client, proxy.URL+"/v1/chat/completions", "chat", "")},
		{"afloat, route [backup]", chatCall(client, gw.URL+"/v1/chat/completions", "solo", "backup")},
		{"afloat, route [primary (open), backup]", chatCall(client, gw.URL+"/v1/chat/completions", "chat", "backup")},
	}
	for _, t := range targets[:3] {
		ClosedLoop{Workers: 8, Duration: p.dur(500*time.Millisecond, 200*time.Millisecond)}.Run(ctx, t.call)
	}
	if err := gw.ForceOpen(client, "primary"); err != nil {
		return err
	}
	ClosedLoop{Workers: 8, Duration: p.dur(500*time.Millisecond, 200*time.Millisecond)}.Run(ctx, targets[3].call)
	primaryBefore := primary.Calls()

	// The targets take turns within one open loop, so that the machine's stalls, which decide
	// a p99 here, fall on all of them alike: each gets rate/len(targets) requests a second.
	const rate = 500
	d := time.Duration(len(targets)) * p.dur(2500*time.Millisecond, 700*time.Millisecond)
	calls := make([]Call, len(targets))
	for i, t := range targets {
		calls[i] = t.call
	}
	p50s, p99s := make([][]float64, len(targets)), make([][]float64, len(targets))
	failed := make([]int, len(targets))
	for range p.reps() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		run := OpenLoop{Rate: rate, Duration: d}.Run(ctx, interleave(calls...))
		for i := range targets {
			h := histogram(run.Outcomes, ofTarget(i))
			p50s[i] = append(p50s[i], float64(quantile(h, 50)))
			p99s[i] = append(p99s[i], float64(quantile(h, 99)))
		}
		for _, o := range run.Outcomes {
			switch {
			case o.Target < 0: // never sent, and no target chosen: a failure of every one
				for i := range failed {
					failed[i]++
				}
			case o.Err != nil:
				failed[o.Target]++
			}
		}
	}
	primaryCalls := primary.Calls() - primaryBefore

	r.printf("## 2. failfast: a call whose primary's circuit is open\n\n")
	r.printf("`PUT /admin/breakers/primary {\"state\":\"open\"}`, then %d req/s open loop for %s, the targets in turn (%d req/s each), median of %d runs; "+
		"mocks answer at once. The primary mock got %d calls while its circuit was open.\n\n", rate, d, rate/len(targets), p.reps(), primaryCalls)
	var rows [][]string
	for i, t := range targets {
		rows = append(rows, []string{t.name, ms(time.Duration(median(p50s[i]))), ms(time.Duration(median(p99s[i]))), fmt.Sprint(failed[i])})
	}
	r.table([]string{"target", "p50", "p99", "failed"}, rows)
	diff := func(a, b int, qs [][]float64) time.Duration {
		var ds []float64
		for k := range qs[a] {
			ds = append(ds, qs[a][k]-qs[b][k])
		}
		return time.Duration(median(ds))
	}
	const open = 3
	openVsDirect, openVsProxy, openVsSolo := diff(open, 0, p99s), diff(open, 1, p99s), diff(open, 2, p99s)
	proxyHop := diff(1, 0, p99s)
	r.printf("Open circuit vs the backup direct: p50 %s, p99 %s (the whole gateway hop and the skip; the bare proxy's hop by itself: p50 %s, p99 %s). "+
		"Vs the bare proxy to the backup (what afloat's hop and the skip add over a plain hop): p50 %s, p99 %s. "+
		"Vs the route of the backup alone (the skip by itself): p50 %s, p99 %s.\n\n",
		plus(diff(open, 0, p50s)), plus(openVsDirect), plus(diff(1, 0, p50s)), plus(proxyHop),
		plus(diff(open, 1, p50s)), plus(openVsProxy), plus(diff(open, 2, p50s)), plus(openVsSolo))
	r.check("open-circuit skip adds < 1 ms p99: the skip by itself (vs the route of the backup alone, same gateway)",
		fmt.Sprintf("%s; %d calls reached the open primary", plus(openVsSolo), primaryCalls),
		openVsSolo < time.Millisecond && primaryCalls == 0 && failed[open] == 0)
	// Any hop adds its own p99 (the overhead scenario holds afloat's to the bare proxy's), so
	// the skip with the hop is measured over the bare proxy's hop to the same backup.
	r.check("open-circuit skip adds < 1 ms p99, with the gateway's hop (vs the bare proxy to the backup)",
		fmt.Sprintf("%s (vs the backup direct: %s, the bare proxy's own hop %s; vs the backup-only route: %s); %d calls reached the open primary",
			plus(openVsProxy), plus(openVsDirect), plus(proxyHop), plus(openVsSolo), primaryCalls),
		openVsProxy < time.Millisecond && primaryCalls == 0 && failed[open] == 0)
	return nil
}
