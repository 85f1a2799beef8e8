package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// overhead compares a chat completion through afloat with the same completion sent to the
// mock directly and through a bare httputil.ReverseProxy: latency at 500 and 1,000 req/s
// (open loop) and at saturation (closed loop), CPU per request, and peak RSS with 128
// connections held open on a mock that answers in 50 ms; each figure the median of the
// repetitions. The proxy and the gateway each run in a process of their own, so that their
// CPU and RSS are read from /proc for that process alone.
func overhead(ctx context.Context, p plan, r *report) error {
	fast, err := startUpstream("primary", upstreamOptions{})
	if err != nil {
		return err
	}
	defer fast.Close()
	slow, err := startUpstream("slow", upstreamOptions{Latency: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	defer slow.Close()
	backup, err := startUpstream("backup", upstreamOptions{})
	if err != nil {
		return err
	}
	defer backup.Close()
	fastProxy, err := startChild("proxy", fast.URL)
	if err != nil {
		return err
	}
	defer fastProxy.Close()
	slowProxy, err := startChild("proxy", slow.URL)
	if err != nil {
		return err
	}
	defer slowProxy.Close()
	gw, err := startGatewayProcess(gwConfig{
		Providers: []gwProvider{{Name: "primary", URL: fast.URL}, {Name: "slow", URL: slow.URL}, {Name: "backup", URL: backup.URL}},
		Routes: []gwRoute{
			{Name: "chat", Budget: 30 * time.Second, Tiers: []string{"primary", "backup"}},
			{Name: "held", Budget: 30 * time.Second, Tiers: []string{"slow", "backup"}},
		},
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	const conns = 128
	client := newClient(2 * conns)
	defer client.CloseIdleConnections()

	targets := []string{"direct", "proxy", "afloat"}
	calls := func(fastPath bool) []Call {
		if fastPath {
			return []Call{chatCall(client, fast.ChatURL(), "chat", ""), chatCall(client, fastProxy.URL+"/v1/chat/completions", "chat", ""),
				chatCall(client, gw.URL+"/v1/chat/completions", "chat", "primary")}
		}
		return []Call{chatCall(client, slow.ChatURL(), "held", ""), chatCall(client, slowProxy.URL+"/v1/chat/completions", "held", ""),
			chatCall(client, gw.URL+"/v1/chat/completions", "held", "slow")}
	}
	hops := func(fastPath bool) []int { // the process of each target's hop; 0 for the direct call
		if fastPath {
			return []int{0, fastProxy.Pid(), gw.proc.Pid()}
		}
		return []int{0, slowProxy.Pid(), gw.proc.Pid()}
	}
	type level struct {
		name  string
		rate  float64 // 0: closed loop with conns workers
		calls []Call
		hops  []int
	}
	const (
		atRate500 = iota
		atRate1000
		atSaturation
		atHeld
	)
	levels := []level{
		atRate500:    {"500 req/s", 500, calls(true), hops(true)},
		atRate1000:   {"1,000 req/s", 1000, calls(true), hops(true)},
		atSaturation: {fmt.Sprintf("saturation, %d conns", conns), 0, calls(true), hops(true)},
		atHeld:       {fmt.Sprintf("%d conns held, mock 50 ms", conns), 0, calls(false), hops(false)},
	}
	d := p.dur(4*time.Second, 600*time.Millisecond) // a target's share of a fixed-rate run
	slice := p.dur(250*time.Millisecond, 50*time.Millisecond)
	dsat := p.dur(3*time.Second, 500*time.Millisecond) // a target's share of a closed-loop run
	warm := p.dur(500*time.Millisecond, 100*time.Millisecond)
	for _, l := range levels[atSaturation:] { // warm the connections and afloat's latency estimates
		for _, c := range l.calls {
			ClosedLoop{Workers: 8, Duration: warm}.Run(ctx, c)
		}
	}
	openedBefore := gw.Opened("primary") + gw.Opened("backup")
	attemptsBefore := gw.Attempts("primary")

	// Each run is reduced to its figures at once: the outcomes of earlier runs, kept, would
	// count in the peak RSS of the later ones.
	type stat struct{ p50, p99, hopCPU, hopRSS, hopStartRSS, rps, failed, lag []float64 }
	stats := make([][]stat, len(levels)) // [level][target], a value per repetition
	for li := range levels {
		stats[li] = make([]stat, len(targets))
	}
	satFailed, satRuns := 0, 0
	var satFirst error
	// record adds one target's requests of a run to its figures: outs are its outcomes, sent
	// over d in all, hop its hop's usage (nil for the direct call).
	record := func(rep, li, ti int, outs []Outcome, d time.Duration, hop *HopUsage) {
		failed, ok := 0, 0
		var first error
		lags := make([]time.Duration, 0, len(outs))
		for _, o := range outs {
			lags = append(lags, o.Lag)
			if o.Err != nil {
				if first == nil {
					first = o.Err
				}
				failed++
				continue
			}
			ok++
		}
		h := histogram(outs, nil)
		st := &stats[li][ti]
		st.p50 = append(st.p50, float64(quantile(h, 50)))
		st.p99 = append(st.p99, float64(quantile(h, 99)))
		var hopPerOK time.Duration
		if hop != nil {
			if ok > 0 {
				hopPerOK = hop.CPU / time.Duration(ok)
			}
			st.hopCPU = append(st.hopCPU, float64(hopPerOK))
			st.hopRSS = append(st.hopRSS, float64(hop.PeakRSS))
			st.hopStartRSS = append(st.hopStartRSS, float64(hop.StartRSS))
		}
		rps := float64(ok) / d.Seconds()
		st.rps = append(st.rps, rps)
		st.failed = append(st.failed, float64(failed))
		st.lag = append(st.lag, float64(quantile(durationHist(lags), 99)))
		if li == atSaturation && targets[ti] == "afloat" {
			satFailed += failed
			satRuns++
			if satFirst == nil {
				satFirst = first
			}
		}
		r.logf("overhead: rep %d, %s, %s: p50 %s p99 %s, %.0f req/s, hop %s CPU/req, %d failed", rep+1, levels[li].name, targets[ti],
			ms(quantile(h, 50)), ms(quantile(h, 99)), rps, us(hopPerOK), failed)
	}
	for rep := range p.reps() {
		for li, l := range levels {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// One run in slices, each target taking the whole load in its turn.
			share := dsat
			if l.rate > 0 {
				share = d
			}
			total := time.Duration(len(targets)) * share
			rot := newRotation(slice, total, uint64(rep*len(levels)+li), l.calls...)
			var run *Run
			if l.rate > 0 {
				run = OpenLoop{Rate: l.rate, Duration: total, Grace: 5 * time.Second, Hops: l.hops[1:], OnStart: rot.begin}.Run(ctx, rot.call)
			} else {
				run = ClosedLoop{Workers: conns, Duration: total, Hops: l.hops[1:], OnStart: rot.begin}.Run(ctx, rot.call)
			}
			per := make([][]Outcome, len(targets))
			for _, o := range run.Outcomes {
				k := rot.targetAt(o.At)
				per[k] = append(per[k], o)
			}
			for ti := range targets {
				var hop *HopUsage
				if ti > 0 {
					hop = &run.Usage.Hops[ti-1]
				}
				record(rep, li, ti, per[ti], share, hop)
			}
		}
	}
	openedAfter := gw.Opened("primary") + gw.Opened("backup")

	r.printf("## 1. overhead: afloat vs a direct call vs a bare reverse proxy\n\n")
	r.printf("One non-streamed chat completion (route `chat`: primary → backup) to a mock that answers at once. "+
		"Open loop at fixed rates (latency from the intended send time), closed loop with %d workers at saturation, "+
		"and %d workers on a mock that answers in 50 ms (route `held`), which keeps %d connections busy without saturating the CPU. "+
		"At each load the three targets share one run cut into slices of %s, each round of three slices giving one to each target in a shuffled order, "+
		"so that a target alone takes the whole load in its slice and the machine's changes over the run fall on all three alike: "+
		"%s of sending a target at a fixed rate, %s in the closed loop. Each figure is the median of %d repetitions. "+
		"The bare proxy and the gateway each run in a process of their own (this program again, `-serve`), the mocks and the load generator in this one: "+
		"a hop's CPU per request is its own process's CPU time (/proc/PID/stat, 10 ms ticks) over the requests answered, "+
		"its RSS its own process's, at the start of the run and its peak (VmHWM, reset at the start).\n\n",
		conns, conns, conns, slice, d, dsat, p.reps())
	var rows [][]string
	for li, l := range levels {
		for ti, t := range targets {
			s := stats[li][ti]
			lag := "–"
			if l.rate > 0 {
				lag = us(time.Duration(median(s.lag)))
			}
			hopCPU, hopRSS := "–", "–"
			if ti > 0 {
				hopCPU = us(time.Duration(median(s.hopCPU)))
				hopRSS = fmt.Sprintf("%s / %s", mib(uint64(median(s.hopStartRSS))), mib(uint64(median(s.hopRSS))))
			}
			rows = append(rows, []string{l.name, t, ms(time.Duration(median(s.p50))), ms(time.Duration(median(s.p99))),
				fmt.Sprintf("%.0f", median(s.rps)), hopCPU, hopRSS, fmt.Sprintf("%.0f", median(s.failed)), lag})
		}
	}
	r.table([]string{"load", "target", "p50", "p99", "req/s", "hop CPU/req", "hop RSS at start / peak", "failed", "send lag p99"}, rows)
	r.printf("Send lag: how late the generator sent a request after its due time (included in the latencies). " +
		"A closed loop's req/s is its answers over its slices' time; a request is its slice's target's by the time it was sent.\n\n")

	// added: per repetition, the hop's latency minus the direct run's; then the median.
	added := func(li, ti int, pick func(stat) []float64) float64 {
		hop, direct := pick(stats[li][ti]), pick(stats[li][0])
		var diffs []float64
		for i := range hop {
			diffs = append(diffs, hop[i]-direct[i])
		}
		return median(diffs)
	}
	p50 := func(s stat) []float64 { return s.p50 }
	p99 := func(s stat) []float64 { return s.p99 }
	rows = nil
	for li, l := range levels {
		pa50, aa50 := added(li, 1, p50), added(li, 2, p50)
		pa99, aa99 := added(li, 1, p99), added(li, 2, p99)
		pc, ac := median(stats[li][1].hopCPU), median(stats[li][2].hopCPU)
		pr, ar := median(stats[li][1].hopRSS), median(stats[li][2].hopRSS)
		rows = append(rows, []string{l.name,
			us(time.Duration(pa50)), us(time.Duration(aa50)), ratio(aa50, pa50),
			us(time.Duration(pa99)), us(time.Duration(aa99)), ratio(aa99, pa99),
			us(time.Duration(pc)), us(time.Duration(ac)), ratio(ac, pc), mib(uint64(pr)), mib(uint64(ar))})
		// within checks afloat's figure against 1.3× the bare proxy's. When both are 0 or
		// less (the time either hop added lost in the direct call's noise) there is no ratio
		// to check: the target is skipped, its figures shown, rather than called missed. A
		// proxy's figure of 0 or less beside afloat's above 0 is missed.
		within := func(target string, a, p float64) {
			got := fmt.Sprintf("%s vs %s: %s", us(time.Duration(a)), us(time.Duration(p)), ratio(a, p))
			if p <= 0 && a <= 0 {
				r.skip(target, got+" (both lost in the direct call's noise)")
				return
			}
			r.check(target, got, p > 0 && a <= 1.3*p)
		}
		if li == atRate500 || li == atRate1000 {
			within(fmt.Sprintf("added p50 at %s ≤ 1.3× the bare proxy's", l.name), aa50, pa50)
			within(fmt.Sprintf("added p99 at %s ≤ 1.3× the bare proxy's", l.name), aa99, pa99)
		}
		if li != atHeld {
			within(fmt.Sprintf("CPU per proxied completion at %s ≤ 1.3× the bare proxy's", l.name), ac, pc)
		}
	}
	r.printf("What each hop adds over the direct call (latency: medians of the per-repetition differences), and what its own process used:\n\n")
	r.table([]string{"load", "proxy p50", "afloat p50", "ratio", "proxy p99", "afloat p99", "ratio",
		"proxy CPU/req", "afloat CPU/req", "ratio", "proxy peak RSS", "afloat peak RSS"}, rows)

	peak := median(stats[atHeld][2].hopRSS)
	r.printf("Peak RSS of the gateway's process with %d connections held: %s (the bare proxy's: %s).\n\n",
		conns, mib(uint64(peak)), mib(uint64(median(stats[atHeld][1].hopRSS))))
	r.check(fmt.Sprintf("peak RSS ≤ 64 MiB at %d concurrent connections (the gateway's process)", conns), mib(uint64(peak)), peak > 0 && peak <= 64<<20)

	opened := openedAfter - openedBefore
	ok := satFailed == 0 && opened == 0
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
	}
	detail := fmt.Sprintf("%d failed requests, %d breaker openings", satFailed, opened)
	if satFirst != nil {
		detail += fmt.Sprintf(" (first error: %v)", satFirst)
	}
	if !ok {
		// Why the primary did not answer: its attempts over the whole scenario, by outcome.
		var why []string
		for k, v := range gw.Attempts("primary") {
			if k != "ok" && v > attemptsBefore[k] {
				why = append(why, fmt.Sprintf("%s %d", k, v-attemptsBefore[k]))
			}
		}
		sort.Strings(why)
		detail += fmt.Sprintf("; the primary's attempts that did not answer: %s", strings.Join(why, ", "))
	}
	r.printf("**%s**: at saturation against a healthy upstream, no request fails and no breaker opens — %s over %d runs.\n\n",
		verdict, detail, satRuns)
	r.check("at saturation, healthy upstream: no request fails, no breaker opens", verdict+": "+detail, ok)
	return nil
}
