package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The scenarios of afloat under load (issue 17): a burst on a healthy provider and on one that
// slows down (adaptive concurrency), a provider with a long tail (hedging), and afloat itself
// past its capacity (shedding by criticality).

// providerStatus reads one provider's concurrency limit and queue from /admin/status.
func providerStatus(c *http.Client, base, provider string) (limit, queued int, err error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/admin/status", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var doc struct {
		Providers map[string]struct {
			Limit  int `json:"concurrency_limit"`
			Queued int `json:"queued"`
		} `json:"providers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return 0, 0, err
	}
	p := doc.Providers[provider]
	return p.Limit, p.Queued, nil
}

// answeredBy counts a run's answers by the provider that gave them (X-Afloat-Provider).
func answeredBy(run *Run) map[string]int {
	out := map[string]int{}
	for _, o := range run.Outcomes {
		if o.Err == nil {
			out[o.Provider]++
		}
	}
	return out
}

// share is n of total as a percentage.
func share(n, total int) string {
	if total == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(total))
}

// burst: 128 callers at once on a healthy primary answering in 50 ms, then on the same
// primary slowed tenfold; afloat's adaptive bulkhead against one that spills at once
// (queue_wait: 0s), two gateways side by side.
func burst(ctx context.Context, p plan, r *report) error {
	const conns = 128
	budget := 2 * time.Second
	type side struct {
		name            string
		primary, backup *Upstream
		gw              *instance
	}
	var sides []*side
	for _, v := range []struct{ name, defaults string }{{"adaptive, queue_wait 1s (default)", ""}, {"spills at once (queue_wait: 0s)", "queue_wait: 0s"}} {
		primary, err := startUpstream("primary", upstreamOptions{Latency: 50 * time.Millisecond, Jitter: 0.2})
		if err != nil {
			return err
		}
		defer primary.Close()
		backup, err := startUpstream("backup", upstreamOptions{Latency: 50 * time.Millisecond, Jitter: 0.2})
		if err != nil {
			return err
		}
		defer backup.Close()
		// The primary's read timeout at least 1.5 s: the slowed primary still answers in time,
		// so that the bulkhead, not the timeout and the breaker, decides where calls go.
		c := gwConfig{Providers: []gwProvider{{Name: "primary", URL: primary.URL, Extra: ", timeouts: {min: 1500ms, initial: 1500ms}"}, {Name: "backup", URL: backup.URL}},
			Routes: []gwRoute{{Name: "chat", Budget: budget}}}
		if v.defaults != "" {
			c.Defaults = []string{v.defaults}
		}
		gw, err := startGatewayProcess(c)
		if err != nil {
			return err
		}
		defer gw.Close()
		sides = append(sides, &side{name: v.name, primary: primary, backup: backup, gw: gw})
	}
	client := newClient(2 * conns)
	defer client.CloseIdleConnections()
	d := p.dur(3*time.Second, 500*time.Millisecond)
	type row struct {
		phase, side                string
		total, byBackup, failed    int
		p50, p99                   time.Duration
		limitBefore, limitAfter, q int
	}
	var rows []row
	for _, phase := range []struct {
		name    string
		latency time.Duration
	}{{"healthy, 50 ms", 50 * time.Millisecond}, {"primary 10× slower, 500 ms", 500 * time.Millisecond}} {
		for _, s := range sides {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.primary.SetLatency(phase.latency)
			before, _, _ := providerStatus(client, s.gw.URL, "primary")
			run := ClosedLoop{Workers: conns, Duration: d, Hops: []int{s.gw.proc.Pid()}}.Run(ctx, chatCall(client, s.gw.URL+"/v1/chat/completions", "chat", ""))
			after, queued, _ := providerStatus(client, s.gw.URL, "primary")
			by := answeredBy(run)
			failed, _ := run.Failed()
			h := histogram(run.Outcomes, nil)
			rows = append(rows, row{phase.name, s.name, len(run.Outcomes), by["backup"], failed, quantile(h, 50), quantile(h, 99), before, after, queued})
			r.logf("burst: %s, %s: %d calls, %d by the backup, %d failed, limit %d → %d", phase.name, s.name, len(run.Outcomes), by["backup"], failed, before, after)
		}
	}

	r.printf("## 7. burst: %d callers at once, a healthy primary and a slowed one\n\n", conns)
	r.printf("Route `chat` [primary, backup], budget %s, %d closed-loop workers for %s a phase; both mocks answer in 50 ms ± 20 %% "+
		"(about 2,500 calls a second: below the gateway's saturation, so that the latency it measures is the provider's), "+
		"then the primary in 500 ms (its read timeout at least 1.5 s, so that it is not cut: the bulkhead decides). Two gateways side by side, each in its own process over mocks of its own: afloat's default bulkhead "+
		"(the adaptive limit, from half of max_in_flight, and a wait in its queue of up to `queue_wait`, 1 s) and the same with `queue_wait: 0s`, "+
		"a call that finds the limit reached skipping to the backup at once, as a fixed bulkhead does. The primary's limit is read from `/admin/status` before and after each phase.\n\n",
		budget, conns, d)
	var table [][]string
	for _, x := range rows {
		table = append(table, []string{x.phase, x.side, fmt.Sprint(x.total), share(x.byBackup, x.total), fmt.Sprint(x.failed),
			ms(x.p50), ms(x.p99), fmt.Sprintf("%d → %d", x.limitBefore, x.limitAfter)})
	}
	r.table([]string{"phase", "bulkhead", "calls", "answered by the backup", "failed", "p50", "p99", "primary's limit"}, table)
	healthy, slowed := rows[0], rows[2]
	r.check(fmt.Sprintf("burst of %d on a healthy 50 ms provider: 0 %% to the backup, none failed", conns),
		fmt.Sprintf("%s to the backup, %d failed (spilling at once: %s)", share(healthy.byBackup, healthy.total), healthy.failed, share(rows[1].byBackup, rows[1].total)),
		healthy.byBackup == 0 && healthy.failed == 0 && healthy.total > 0)
	r.check("provider 10× slower: its limit falls, the excess goes to the next tier within the budget",
		fmt.Sprintf("limit %d → %d, %s to the backup, %d failed, p99 %s (budget %s)", slowed.limitBefore, slowed.limitAfter,
			share(slowed.byBackup, slowed.total), slowed.failed, ms(slowed.p99), budget),
		slowed.limitAfter < slowed.limitBefore && slowed.failed == 0 && slowed.p99 <= budget)
	return nil
}

// hedge: a primary whose every twentieth call takes 3 s (the rest 100 ms ± 20 %), a backup
// as fast as the primary's usual answer (100 ms ± 20 %) and a faster one (a small self-hosted
// model, 40 ms ± 20 %); a route without hedging and two hedged at the primary's p95, one to
// each, in one gateway, one after the other.
//
// A hedge sent at the primary's p95 answers at that p95 plus the hedged tier's own latency,
// so with a backup as fast as the primary the hedged p99 is about twice the plain p95 by
// arithmetic: the scenario checks that bound on that route, and the 1.5× target on
// the route whose next tier is faster.
func hedge(ctx context.Context, p plan, r *report) error {
	const jitter = 0.2
	primary, err := startUpstream("primary", upstreamOptions{Latency: 100 * time.Millisecond, Jitter: jitter, TailEvery: 20, Tail: 3 * time.Second})
	if err != nil {
		return err
	}
	defer primary.Close()
	backup, err := startUpstream("backup", upstreamOptions{Latency: 100 * time.Millisecond, Jitter: jitter})
	if err != nil {
		return err
	}
	defer backup.Close()
	const fastLatency = 40 * time.Millisecond
	fast, err := startUpstream("small", upstreamOptions{Latency: fastLatency, Jitter: jitter})
	if err != nil {
		return err
	}
	defer fast.Close()
	const budget = 10 * time.Second
	gw, err := startGatewayProcess(gwConfig{
		// The read timeout waits the tail out (min 5 s): what hedging cuts here, nothing else does.
		Providers: []gwProvider{{Name: "primary", URL: primary.URL, Extra: ", timeouts: {min: 5s, max: 10s, initial: 5s}"},
			{Name: "backup", URL: backup.URL}, {Name: "small", URL: fast.URL}},
		Routes: []gwRoute{
			{Name: "plain", Budget: budget, Tiers: []string{"primary", "backup"}},
			{Name: "hedged", Budget: budget, Tiers: []string{"primary", "backup"}, Extra: ", hedge: {after: p95}"},
			{Name: "hedged-small", Budget: budget, Tiers: []string{"primary", "small"}, Extra: ", hedge: {after: p95}"},
		},
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	client := newClient(256)
	defer client.CloseIdleConnections()
	const rate = 20
	d := p.dur(30*time.Second, 3*time.Second)
	warm := p.dur(2*time.Second, 1500*time.Millisecond) // the p95 is measured from 20 answers on
	type fig struct {
		route, label   string
		n, backupCalls int
		p50, p95, p99  time.Duration
		failed         int
	}
	figs := []fig{
		{route: "plain", label: "plain [primary, backup]"},
		{route: "hedged", label: "hedged at the p95 [primary, backup]"},
		{route: "hedged-small", label: "hedged at the p95 [primary, small]"},
	}
	next := map[string]*Upstream{"plain": backup, "hedged": backup, "hedged-small": fast}
	for i := range figs {
		f := &figs[i]
		call := chatCall(client, gw.URL+"/v1/chat/completions", f.route, "")
		OpenLoop{Rate: rate, Duration: warm}.Run(ctx, call)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		before := next[f.route].Calls()
		run := OpenLoop{Rate: rate, Duration: d, Grace: budget}.Run(ctx, call)
		h := histogram(run.Outcomes, nil)
		f.failed, _ = run.Failed()
		f.n, f.backupCalls = len(run.Outcomes), int(next[f.route].Calls()-before)
		f.p50, f.p95, f.p99 = quantile(h, 50), quantile(h, 95), quantile(h, 99)
		r.logf("hedge: %s: p50 %s p95 %s p99 %s, %d calls to the next tier in %d", f.route, ms(f.p50), ms(f.p95), ms(f.p99), f.backupCalls, f.n)
	}
	plain, hedged, small := figs[0], figs[1], figs[2]
	r.printf("## 8. hedge: a primary with a long tail\n\n")
	r.printf("Budget %s; the primary answers in 100 ms ± 20 %% but every twentieth call in 3 s "+
		"(its read timeout at least 5 s, so that nothing else cuts the tail), `backup` in 100 ms ± 20 %%, `small` (a small self-hosted model) in %s ± 20 %%. "+
		"%d req/s open loop for %s a route, after %s of warm-up, one route after the other in one gateway in its own process: "+
		"`plain`, then `hedged` and `hedged-small` (`hedge: {after: p95}`).\n\n", budget, ms(fastLatency), rate, d, warm)
	var rows [][]string
	for _, f := range figs {
		rows = append(rows, []string{f.label, fmt.Sprint(f.n), ms(f.p50), ms(f.p95), ms(f.p99), share(f.backupCalls, f.n), fmt.Sprint(f.failed)})
	}
	r.table([]string{"route", "calls", "p50", "p95", "p99", "calls to the next tier", "failed"}, rows)
	// The hedged tier's slowest answer, by construction of its mock.
	slowest := func(base time.Duration) time.Duration { return time.Duration(float64(base) * (1 + jitter)) }
	bound := plain.p95 + slowest(100*time.Millisecond) + 20*time.Millisecond
	r.printf("A hedge goes out at the primary's p95 and answers after the hedged tier's own latency, so the hedged p99 is about "+
		"the p95 without hedging plus that latency: %s to `backup` (%s the p95 without hedging, %s), %s to `small` (%s). "+
		"The hedges were %s and %s of the calls, within the retry budget (20 %% of the primary's calls over 10 s).\n\n",
		ms(hedged.p99), ratio(float64(hedged.p99), float64(plain.p95)), ms(plain.p95), ms(small.p99), ratio(float64(small.p99), float64(plain.p95)),
		share(hedged.backupCalls, hedged.n), share(small.backupCalls, small.n))
	r.check("hedging to a backup as fast as the primary: p99 ≤ the p95 without + the backup's slowest answer (120 ms) + 20 ms",
		fmt.Sprintf("%s vs %s", ms(hedged.p99), ms(bound)), plain.p95 > 0 && hedged.p99 <= bound)
	r.check("hedging to a faster tier: p99 with hedging ≤ 1.5 × the p95 without",
		fmt.Sprintf("%s vs %s: %s", ms(small.p99), ms(plain.p95), ratio(float64(small.p99), float64(plain.p95))),
		plain.p95 > 0 && float64(small.p99) <= 1.5*float64(plain.p95))
	r.check("hedging: extra calls ≤ the retry budget (about 5–10 %)",
		fmt.Sprintf("%s and %s", share(hedged.backupCalls, hedged.n), share(small.backupCalls, small.n)),
		hedged.n > 0 && small.n > 0 && float64(hedged.backupCalls) <= 0.1*float64(hedged.n) && float64(small.backupCalls) <= 0.1*float64(small.n))
	return nil
}

// mixedTaskCall posts task calls to base, every fourth to the critical task "moderation" and the
// others to "triage", and reads each envelope's source and reason.
func mixedTaskCall(c *http.Client, base string) Call {
	var n atomic.Int64
	// A long ticket (8 KiB): the gateway decodes it, checks it against the input schema,
	// renders it into the prompt and encodes it to the provider, where the load generator
	// only writes it and the mock only skims it, so that the gateway is the first to saturate.
	body := []byte(fmt.Sprintf(`{"input": {"subject": "Login page down", "message": %q}}`, strings.Repeat("The site does not open since this morning. ", 195)))
	return func(ctx context.Context, _ time.Time) Outcome {
		task := "triage"
		if n.Add(1)%4 == 0 {
			task = "moderation"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tasks/"+task, bytes.NewReader(body))
		if err != nil {
			return Outcome{Err: err, Task: task}
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return Outcome{Err: err, Task: task}
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		o := Outcome{Task: task}
		var env struct {
			Source string `json:"source"`
			Reason string `json:"reason"`
		}
		switch {
		case err != nil:
			o.Err = err
		case resp.StatusCode != http.StatusOK:
			o.Err = fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		case json.Unmarshal(b, &env) != nil:
			o.Err = fmt.Errorf("%w: %s", errBody, b)
		}
		o.Source, o.Reason = env.Source, env.Reason
		return o
	}
}

// overload: afloat past its own capacity (its process on one core, under a quota of half of it),
// three enrichment calls to one critical, open loop; with shedding (server.shed_latency: 200ms,
// the default) and without (off), one after the other.
func overload(ctx context.Context, p plan, r *report) error {
	up, err := startUpstream("primary", upstreamOptions{Latency: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	defer up.Close()
	backup, err := startUpstream("backup", upstreamOptions{Latency: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	defer backup.Close()
	const budget = 2 * time.Second
	// The gateway runs under a CPU quota of gatewayCores (a container's limit, as in a pod with
	// 500m of CPU), so that driving it past its capacity leaves the load generator and the mocks
	// the rest of the machine: on two cores, a gateway with a whole core carries about as many
	// calls as the generator and the mocks on the other can send and answer, and a run past it
	// measures the generator (BENCHMARKS.md). The rate is past that capacity on the machine it
	// runs on: calRate calls a second for calDur through the first gateway before its quota, its
	// CPU per call read from its process, and overloadFactor times the calls a second the quota
	// carries at that cost. Where no cgroup can be made (not root, not Linux) the gateway runs
	// on a core of its own, and the report says so.
	const (
		gatewayCores   = 0.5
		calRate        = 1000.0
		overloadFactor = 1.5
		maxRate        = 8000.0 // the load generator's bound, on the core it shares with the mocks
	)
	cores := 1.0
	quota, err := newCPUQuota(gatewayCores)
	if err != nil {
		r.logf("overload: no CPU quota for the gateway (%v): it runs on one core of its own, and the load generator may be what saturates", err)
	} else {
		cores = gatewayCores
		defer func() {
			if err := quota.close(); err != nil {
				r.logf("overload: remove the CPU quota's cgroup: %v", err)
			}
		}()
	}
	calDur := p.dur(2*time.Second, 500*time.Millisecond)
	var rate, calCores float64
	d := p.dur(8*time.Second, time.Second)
	// Each call in flight holds two of this process's descriptors in a collapse: the load
	// generator's connection and the mock's end of the gateway's.
	fds, note := raiseFileLimit(2*20000 + 512)
	r.logf("overload: %s", note)
	maxInFlight := max(64, min(20000, (int(fds)-512)/2))
	client := newClient(4096)
	defer client.CloseIdleConnections()
	type fig struct {
		name                                 string
		critN, critFailed, critShed          int
		critP99                              time.Duration
		enrN, enrShed, enrFailed, enrUntyped int
		enrP99                               time.Duration
		cpu                                  float64
		opened, timeouts                     int           // breaker openings; attempts cut as the provider's timeout
		lagP99                               time.Duration // the load generator's own delay in sending
	}
	var figs []fig
	for _, v := range []struct{ name, server string }{{"shedding (shed_latency 200ms, the default)", ""}, {"no shedding (shed_latency: off)", ", shed_latency: \"off\""}} {
		gw, err := startGatewayProcess(gwConfig{
			Providers:  []gwProvider{{Name: "primary", URL: up.URL, Extra: ", max_in_flight: 4096"}, {Name: "backup", URL: backup.URL, Extra: ", max_in_flight: 4096"}},
			TaskBudget: budget, Critical: true, Server: v.server,
		}, "GOMAXPROCS=1")
		if err != nil {
			return err
		}
		call := mixedTaskCall(client, gw.URL)
		OpenLoop{Rate: 200, Duration: p.dur(time.Second, 300*time.Millisecond)}.Run(ctx, call) // warm
		if rate == 0 {
			cal := OpenLoop{Rate: calRate, Duration: calDur, Hops: []int{gw.proc.Pid()}}.Run(ctx, call)
			if cal.Wall > 0 {
				calCores = cal.Usage.Hops[0].CPU.Seconds() / cal.Wall.Seconds()
			}
			if calCores <= 0 {
				gw.Close()
				return fmt.Errorf("overload: the gateway's CPU could not be read in the calibration run")
			}
			rate = math.Round(min(maxRate, overloadFactor*calRate*cores/calCores)/100) * 100
			r.logf("overload: calibration: %.0f req/s used %.2f of a core in the gateway: the run goes at %.0f req/s", calRate, calCores, rate)
		}
		if quota != nil {
			if err := quota.add(gw.proc.Pid()); err != nil {
				gw.Close()
				return err
			}
		}
		run := OpenLoop{Rate: rate, Duration: d, MaxInFlight: maxInFlight, Grace: budget + 5*time.Second, Hops: []int{gw.proc.Pid()}}.Run(ctx, call)
		opened := gw.Opened("primary") + gw.Opened("backup")
		timeouts := gw.Attempts("primary")["timeout"] + gw.Attempts("backup")["timeout"]
		gw.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f := fig{name: v.name, opened: opened, timeouts: timeouts}
		var crit, enr []time.Duration
		for _, o := range run.Outcomes {
			switch o.Task {
			case "moderation":
				f.critN++
				crit = append(crit, o.Latency)
				switch {
				case o.Err != nil:
					if f.critFailed < 3 {
						r.logf("overload: %s: a critical call failed: %v", v.name, o.Err)
					}
					f.critFailed++
				case o.Reason == "shed":
					f.critShed++
				}
			default:
				f.enrN++
				enr = append(enr, o.Latency)
				switch {
				case o.Err != nil:
					f.enrFailed++
				case o.Reason == "shed":
					f.enrShed++
					if o.Source != "heuristic" {
						f.enrUntyped++
					}
				}
			}
		}
		f.critP99, f.enrP99 = quantile(durationHist(crit), 99), quantile(durationHist(enr), 99)
		var lags []time.Duration
		for _, o := range run.Outcomes {
			lags = append(lags, o.Lag)
		}
		f.lagP99 = quantile(durationHist(lags), 99)
		if run.Wall > 0 {
			f.cpu = run.Usage.Hops[0].CPU.Seconds() / run.Wall.Seconds()
		}
		figs = append(figs, f)
		r.logf("overload: %s: critical %d (%d failed, %d shed, p99 %s), enrichment %d (%d shed, %d failed, p99 %s); %d breaker openings, %d attempts timed out; sent late by %s at p99",
			v.name, f.critN, f.critFailed, f.critShed, ms(f.critP99), f.enrN, f.enrShed, f.enrFailed, ms(f.enrP99), f.opened, f.timeouts, ms(f.lagP99))
	}
	r.printf("## 9. overload: afloat past its own capacity\n\n")
	limit, carrier := "on one core of its own (`GOMAXPROCS=1`; no cgroup for a CPU quota could be made here)", "one core"
	if quota != nil {
		limit = fmt.Sprintf("on one core (`GOMAXPROCS=1`) under a CPU quota of %g of it (a cgroup's, as a container's limit)", gatewayCores)
		carrier = fmt.Sprintf("%g of a core", gatewayCores)
	}
	r.printf("The gateway in its own process %s, tasks `triage` (enrichment) and `moderation` (critical, "+
		"`on_exhausted: block`) over mocks that answer in 10 ms, budget %s; each call an 8 KiB ticket; %.0f req/s open loop for %s, three triage calls to one moderation, "+
		"with shedding at its default and with it off, one after the other. The rate is %g× the calls a second that %s carries at the CPU per call "+
		"measured at %.0f req/s for %s through the first gateway before its quota (%.2f of a core; capped at %.0f req/s). "+
		"A failed call is one that did not get a 200 (a timeout, a 503); the load generator's lag is how late it sent, at p99.\n\n",
		limit, budget, rate, d, overloadFactor, carrier, calRate, calDur, calCores, maxRate)
	var rows [][]string
	for _, f := range figs {
		rows = append(rows, []string{f.name, fmt.Sprint(f.critN), fmt.Sprint(f.critShed), fmt.Sprint(f.critFailed), ms(f.critP99),
			fmt.Sprint(f.enrN), share(f.enrShed, f.enrN), fmt.Sprint(f.enrFailed), ms(f.enrP99), fmt.Sprintf("%.2f", f.cpu),
			fmt.Sprint(f.timeouts), fmt.Sprint(f.opened), ms(f.lagP99)})
	}
	r.table([]string{"gateway", "critical calls", "shed", "failed", "p99", "enrichment calls", "shed", "failed", "p99", "gateway's cores",
		"attempts timed out", "breakers opened", "load generator's lag"}, rows)
	r.printf("Attempts timed out: cut and blamed on the provider (afloat_attempts_total{outcome=\"timeout\"}); a breaker opened on these healthy mocks is afloat's overload taken for a provider's outage.\n\n")
	on := figs[0]
	r.check("overload: no critical call shed or failed, critical p99 within its budget, enrichment shed first",
		fmt.Sprintf("critical: %d shed, %d failed, p99 %s (budget %s); enrichment: %s shed, every shed answer the heuristic: %v",
			on.critShed, on.critFailed, ms(on.critP99), budget, share(on.enrShed, on.enrN), on.enrUntyped == 0),
		on.critN > 0 && on.critShed == 0 && on.critFailed == 0 && on.critP99 <= budget && on.enrShed > 0 && on.enrUntyped == 0)
	r.check("overload: no breaker opens on the healthy mocks (afloat's overload is not a provider's outage)",
		fmt.Sprintf("%d breaker openings, %d attempts timed out", on.opened, on.timeouts), on.opened == 0)
	return nil
}
