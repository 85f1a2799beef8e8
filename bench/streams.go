package main

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// streams holds many streamed completions open at once (a chunk every 100 ms): straight to
// the mock, through the bare proxy, through afloat (each hop in a process of its own), and
// straight to the mock again. It reports each hop process's peak RSS and CPU, and the time to
// the first chunk against the lower of the two direct runs'.
func streams(ctx context.Context, p plan, r *report) error {
	n := 2000
	if p.quick {
		n = 200
	}
	const (
		every = 100 * time.Millisecond
		ramp  = 400 // streams started a second, open loop
	)
	long := p.dur(30*time.Second, 2*time.Second)
	short := p.dur(10*time.Second, 2*time.Second) // the direct run needs only outlast the ramp
	chunksOf := func(d time.Duration) int { return max(2, int(d/every)) }
	// Each stream holds a client socket, the gateway's server socket, its upstream socket and
	// the mock's: four descriptors.
	limit, note := raiseFileLimit(uint64(4*n + 512))
	if limit < uint64(4*n+512) {
		n = max(10, int(limit-512)/4)
		note += fmt.Sprintf("; too few: %d streams instead", n)
	}
	if fdTable {
		// Again, for a limit raised just now; the hops grow theirs as they start.
		size, err := growFDTable()
		if err != nil {
			return err
		}
		if size > 0 {
			note += fmt.Sprintf("; every process's descriptor table grown to %d before its run", size)
		}
	} else {
		note += "; descriptor tables left to grow during the runs (-grow-fds=false)"
	}

	direct, err := startUpstream("direct", upstreamOptions{Chunks: chunksOf(short), ChunkEvery: every})
	if err != nil {
		return err
	}
	defer direct.Close()
	viaProxy, err := startUpstream("direct", upstreamOptions{Chunks: chunksOf(short), ChunkEvery: every})
	if err != nil {
		return err
	}
	defer viaProxy.Close()
	proxy, err := startChild("proxy", viaProxy.URL)
	if err != nil {
		return err
	}
	defer proxy.Close()
	up, err := startUpstream("primary", upstreamOptions{Chunks: chunksOf(long), ChunkEvery: every})
	if err != nil {
		return err
	}
	defer up.Close()
	gw, err := startGatewayProcess(gwConfig{
		// The default bulkhead of 256 calls in flight would send the rest elsewhere.
		Providers: []gwProvider{{Name: "primary", URL: up.URL, Extra: fmt.Sprintf(", max_in_flight: %d", 2*n)}},
		Routes:    []gwRoute{{Name: "stream", Budget: long + time.Minute}},
	})
	if err != nil {
		return err
	}
	defer gw.Close()

	// phase runs n streams; once every stream has started (the ramp and a second more, or
	// half the stream's time when it is shorter), it samples the Go runtime's memory.
	// With a hop, the memory is the hop's process's, else this process's.
	// With a profile path, the hop profiles its CPU over the ramp into it.
	phase := func(url string, chunks int, d time.Duration, hop *child, profile string) (*Run, goMemory) {
		client := newClient(n + 64)
		defer client.CloseIdleConnections()
		rampFor := time.Duration(float64(n) / ramp * float64(time.Second))
		sampled := make(chan goMemory, 1)
		sample := func() {
			if hop == nil {
				sampled <- readGoMemory()
				return
			}
			m, err := hop.Memory()
			if err != nil {
				r.logf("streams: %v", err)
			}
			if p.heapProfile != "" {
				if err := hop.HeapProfile(p.heapProfile); err != nil {
					r.logf("streams: %v", err)
				}
			}
			sampled <- m
		}
		var hops []int
		if hop != nil {
			hops = []int{hop.Pid()}
		}
		var timer *time.Timer
		run := OpenLoop{Rate: ramp, Duration: rampFor, MaxInFlight: n + 16, Grace: d + 15*time.Second, Hops: hops, OnStart: func(start time.Time) {
			timer = time.AfterFunc(time.Until(start.Add(rampFor+min(time.Second, d/2))), sample)
			if hop != nil && profile != "" {
				if err := hop.CPUProfile(profile, rampFor); err != nil {
					r.logf("streams: %v", err)
				}
			}
		}}.Run(ctx, streamCall(client, url, "stream", chunks))
		timer.Stop()
		var m goMemory
		select {
		case m = <-sampled:
		default:
		}
		return run, m
	}
	var proxyProfile string
	if p.cpuProfile != "" {
		proxyProfile = p.cpuProfile + ".proxy"
	}
	r.logf("streams: %d direct streams of %s", n, short)
	dr, _ := phase(direct.ChatURL(), chunksOf(short), short, nil, "")
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.logf("streams: %d streams of %s through the bare proxy", n, short)
	pr, _ := phase(proxy.URL+"/v1/chat/completions", chunksOf(short), short, proxy, proxyProfile)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.logf("streams: %d streams of %s through afloat", n, long)
	ar, am := phase(gw.URL+"/v1/chat/completions", chunksOf(long), long, gw.proc, p.cpuProfile)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// The direct run again: the time added is read against the lower of the two runs' figures,
	// so that a stall in one baseline run cannot make a hop look faster than it was.
	r.logf("streams: %d direct streams of %s, again", n, short)
	dr2, _ := phase(direct.ChatURL(), chunksOf(short), short, nil, "")
	if ctx.Err() != nil {
		return ctx.Err()
	}

	type fig struct {
		ok, failed     int
		first          error
		ttfb50, ttfb99 time.Duration
		dur50, dur99   time.Duration
		chunks         int
		cpuPerChunk    time.Duration
		cores          float64
		rss            uint64
	}
	// figures reads a run; hop says whether its CPU and RSS are the hop's process's.
	figures := func(run *Run, hop bool) fig {
		var f fig
		var ttfb []time.Duration
		for _, o := range run.Outcomes {
			f.chunks += o.Chunks
			if o.Err != nil {
				continue
			}
			ttfb = append(ttfb, o.TTFB)
		}
		f.failed, f.first = run.Failed()
		f.ok = run.OK()
		th := durationHist(ttfb)
		f.ttfb50, f.ttfb99 = quantile(th, 50), quantile(th, 99)
		lh := histogram(run.Outcomes, nil)
		f.dur50, f.dur99 = quantile(lh, 50), quantile(lh, 99)
		cpu, rss := run.Usage.CPU, run.Usage.PeakRSS
		if hop {
			cpu, rss = run.Usage.Hops[0].CPU, run.Usage.Hops[0].PeakRSS
		}
		f.rss = rss
		if f.chunks > 0 {
			f.cpuPerChunk = cpu / time.Duration(f.chunks)
		}
		if run.Wall > 0 {
			f.cores = cpu.Seconds() / run.Wall.Seconds()
		}
		return f
	}
	df, df2, pf, af := figures(dr, false), figures(dr2, false), figures(pr, true), figures(ar, true)
	base50, base99 := min(df.ttfb50, df2.ttfb50), min(df.ttfb99, df2.ttfb99)

	r.printf("## 6. streams: %d concurrent streamed completions\n\n", n)
	r.printf("Started at %d a second (open loop; TTFB from the intended start to the first content chunk), "+
		"a chunk every %s: %s a stream through afloat (route `stream`, `max_in_flight: %d`), %s straight to the mock "+
		"(first and last: the time added is against the lower of their two TTFBs) and %s through the bare `httputil.ReverseProxy` in a process of its own "+
		"(they only have to outlast the ramp, under which the TTFB is measured). %s.\n\n",
		ramp, every, long, 2*n, short, short, note)
	// A stream's first chunk comes at once, the others every 100 ms.
	nominal := func(d time.Duration) time.Duration { return time.Duration(chunksOf(d)-1) * every }
	row := func(name string, f fig, total time.Duration) []string {
		failed := fmt.Sprint(f.failed)
		if f.first != nil {
			failed += fmt.Sprintf(" (%v)", f.first)
		}
		return []string{name, fmt.Sprint(f.ok), failed, ms(f.ttfb50), ms(f.ttfb99), fmt.Sprintf("%s / %s (%s)", ms(f.dur50), ms(f.dur99), ms(nominal(total))),
			mib(f.rss), fmt.Sprintf("%.2f", f.cores), us(f.cpuPerChunk)}
	}
	r.table([]string{"target", "streams whole", "failed", "TTFB p50", "TTFB p99", "stream time p50 / p99 (nominal)", "peak RSS", "cores used", "CPU per chunk"},
		[][]string{row("direct, first (this process: the mock and the client)", df, short), row("bare proxy (its process)", pf, short),
			row("afloat (the gateway's process)", af, long), row("direct, last", df2, short)})
	added50, added99 := af.ttfb50-base50, af.ttfb99-base99
	r.printf("afloat adds %s (p50) and %s (p99) to the time to first byte; its process used %s CPU per chunk relayed and peaked at %s. "+
		"The bare proxy adds %s (p50) and %s (p99), with %s CPU per chunk.\n\n",
		plus(added50), plus(added99), us(af.cpuPerChunk), mib(af.rss), plus(pf.ttfb50-base50), plus(pf.ttfb99-base99), us(pf.cpuPerChunk))
	// What the streams ask of the machine once all are open: a chunk each a period, at the CPU a
	// chunk cost in the same run this process (the mock and the client) and the hop's.
	demand := func(run *Run, hop fig) float64 {
		return (figures(run, false).cpuPerChunk + hop.cpuPerChunk).Seconds() * float64(n) / every.Seconds()
	}
	r.printf("Once every stream is open, %d chunks a second cross the hop. At what a chunk cost in each run, this process (the mock and the client) "+
		"and the hop's together, the bare proxy's run asks %.2f cores and afloat's %.2f, of the machine's %d.\n\n",
		int(float64(n)/every.Seconds()), demand(pr, pf), demand(ar, af), runtime.NumCPU())
	r.printf("The gateway's Go runtime once every stream had started: %d goroutines, %s of stacks and %s of heap objects (%s mapped in all); "+
		"per stream %.1f goroutines, %.1f KiB of stack and %.1f KiB of heap objects (dead ones not yet swept included).\n\n",
		am.goroutines, mib(am.stacks), mib(am.heap), mib(am.total),
		perStream(am.goroutines, 1, n), perStream(am.stacks, 1024, n), perStream(am.heap, 1024, n))
	r.check(fmt.Sprintf("streams: RSS ≤ 256 MiB at %d streams (the gateway's process)", n), mib(af.rss), af.rss > 0 && af.rss <= 256<<20 && af.failed == 0)
	r.check(fmt.Sprintf("streams: added TTFB p99 ≤ 2 ms at %d streams", n), fmt.Sprintf("%s (the bare proxy: %s)", plus(added99), plus(pf.ttfb99-base99)),
		added99 <= 2*time.Millisecond && af.failed == 0)
	return nil
}

// perStream is a / unit / n.
func perStream(a uint64, unit float64, n int) float64 {
	return float64(a) / unit / float64(n)
}
