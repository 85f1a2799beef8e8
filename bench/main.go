// Command bench runs afloat's load benchmarks: a fast OpenAI-compatible mock upstream, the
// afloat gateway built from a config as `afloat serve` builds it, a bare reverse proxy for
// comparison, and an open-loop load generator, all on 127.0.0.1; the proxy and the gateway
// run in processes of their own where their CPU and memory are measured. It prints a
// markdown report, each figure beside its target, and draws the outage to a PNG.
//
//	go run ./bench                                  # every scenario, about 7 minutes
//	go run ./bench -quick                           # a short smoke run
//	go run ./bench -scenarios overhead,outage -duration 0.5
//
// See bench/README.md for what each scenario measures and how to read it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// scenario runs one benchmark and writes its section of the report.
type scenario struct {
	name string
	run  func(ctx context.Context, p plan, r *report) error
}

var scenarios = []scenario{
	{"overhead", overhead},
	{"failfast", failfast},
	{"outage", outage},
	{"brownout", brownout},
	{"fleet", fleet},
	{"streams", streams},
	{"burst", burst},
	{"hedge", hedge},
	{"overload", overload},
}

// plan is how long and how often a run measures.
type plan struct {
	// quick is the short smoke run: fewer repetitions, shorter phases, fewer streams.
	quick bool
	// scale multiplies every phase's duration.
	scale float64
	// out is the path of the outage's PNG.
	out string
	// heapProfile, when set, is where the streams scenario writes the gateway's heap profile.
	heapProfile string
	// cpuProfile, when set, is where the streams scenario writes a CPU profile of each hop's
	// process over its ramp (the proxy's to PATH.proxy, the gateway's to PATH).
	cpuProfile string
}

// dur returns a phase's duration: full in a full run, quick in a quick one, times the scale.
func (p plan) dur(full, quick time.Duration) time.Duration {
	d := full
	if p.quick {
		d = quick
	}
	return time.Duration(float64(d) * p.scale)
}

// reps is how many times the comparisons are repeated (each figure is their median).
func (p plan) reps() int {
	if p.quick {
		return 1
	}
	return 3
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses the flags, runs the chosen scenarios and writes the report to stdout and the
// progress to stderr; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	names := fs.String("scenarios", "all", "comma-separated scenarios to run: overhead, failfast, outage, brownout, fleet, streams, burst, hedge, overload, or all")
	scale := fs.Float64("duration", 1, "multiplies the duration of every phase (0.5 halves the run)")
	quick := fs.Bool("quick", false, "a short smoke run: one repetition, short phases, 200 streams")
	out := fs.String("out", "docs/outage.png", "where the outage scenario draws its PNG")
	pprofAddr := fs.String("pprof", "", "serve the Go profiler (/debug/pprof/) on this loopback address while the benchmarks run")
	heapProfile := fs.String("streams-heap", "", "write a heap profile of the gateway's process to this file once every stream has started (streams scenario)")
	cpuProfile := fs.String("streams-cpu", "", "write a CPU profile of the gateway's process over the ramp to this file, and the bare proxy's to this file plus .proxy (streams scenario)")
	serve := fs.String("serve", "", "internal: serve one hop (proxy TARGET_URL, or gateway DIR) in this process, for the benchmarks that measure it on its own")
	growFDs := fs.Bool("grow-fds", true, "grow each process's file-descriptor table to its limit before the runs (Linux), so that no run measures the kernel growing it; false measures that, as the runs before 2026-12-07 did")
	pin := fs.Bool("pin", false, "bind this process (the mocks, the load generator, the gateways built in it) to CPU 0 and each hop's own process to CPU 1 (Linux, 2 CPUs or more)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fdTable = *growFDs
	if *serve != "" {
		if err := serveChild(*serve, fs.Arg(0), stdout); err != nil {
			fmt.Fprintf(stderr, "bench -serve %s: %v\n", *serve, err)
			return 1
		}
		return 0
	}
	if *pin {
		if n := runtime.NumCPU(); n < 2 {
			fmt.Fprintf(stderr, "bench: -pin needs 2 CPUs, this process may run on %d\n", n)
			return 2
		}
		if err := pinTo(0); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 2
		}
		hopCPU = "1"
	}
	if fdTable {
		if _, err := growFDTable(); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
	}
	if *scale <= 0 {
		fmt.Fprintln(stderr, "bench: -duration must be positive")
		return 2
	}
	var chosen []scenario
	if *names == "all" {
		chosen = scenarios
	} else {
	next:
		for _, n := range strings.Split(*names, ",") {
			n = strings.TrimSpace(n)
			for _, s := range scenarios {
				if s.name == n {
					chosen = append(chosen, s)
					continue next
				}
			}
			fmt.Fprintf(stderr, "bench: unknown scenario %q\n", n)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *pprofAddr != "" {
		closeProfiler, err := serveProfiler(*pprofAddr)
		if err != nil {
			fmt.Fprintf(stderr, "bench: -pprof: %v\n", err)
			return 2
		}
		defer closeProfiler()
	}

	p := plan{quick: *quick, scale: *scale, out: *out, heapProfile: *heapProfile, cpuProfile: *cpuProfile}
	r := &report{w: stdout, log: stderr}
	mode := "full"
	if p.quick {
		mode = "quick"
	}
	r.printf("# afloat load benchmarks\n\n")
	r.printf("`go run ./bench %s` — %s, %s run, duration scale %g; %d CPUs (GOMAXPROCS %d), %s/%s, %s.\n",
		strings.Join(args, " "), time.Now().Format("2006-01-02 15:04 MST"), mode, p.scale,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	r.printf("The mock upstreams and the load generator run in this process; the bare proxy and the gateway in processes of their own "+
		"for overhead, failfast and streams, in this one for outage, brownout and fleet; all share the machine's cores. "+
		"Load average at the start: %s.\n\n", loadavg())
	if *pin {
		r.printf("Pinned (`-pin`): this process on CPU 0 (one P), each hop's own process on CPU 1 (one P).\n\n")
	}
	code := 0
	for _, s := range chosen {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		r.logf("%s: running", s.name)
		r.scenario = s.name
		if err := s.run(ctx, p, r); err != nil {
			r.printf("\n**%s failed:** %v\n\n", s.name, err)
			r.logf("%s: %v", s.name, err)
			code = 1
		}
		r.logf("%s: done in %s", s.name, time.Since(start).Round(100*time.Millisecond))
	}
	r.printf("Load average at the end: %s.\n\n", loadavg())
	r.targets(p)
	if ctx.Err() != nil {
		return 1
	}
	return code
}

// report collects the markdown report and the targets checked.
type report struct {
	w, log   io.Writer
	scenario string
	checks   []check
}

// check is one target beside what was measured.
type check struct {
	scenario, target, got string
	// ok is whether the target was met; skipped says it could not be measured.
	ok, skipped bool
}

func (r *report) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }
func (r *report) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// check records a target and whether the measured figure met it.
func (r *report) check(target, got string, ok bool) {
	r.checks = append(r.checks, check{scenario: r.scenario, target: target, got: got, ok: ok})
}

// skip records a target that was not measured, and why.
func (r *report) skip(target, why string) {
	r.checks = append(r.checks, check{scenario: r.scenario, target: target, got: why, skipped: true})
}

// table writes a markdown table, its columns after the first aligned right (figures).
func (r *report) table(header []string, rows [][]string) { r.aligned(header, rows, true) }

// aligned writes a markdown table; right aligns the columns after the first.
func (r *report) aligned(header []string, rows [][]string, right bool) {
	r.printf("| %s |\n|", strings.Join(header, " | "))
	for i := range header {
		if i == 0 || !right {
			r.printf(" --- |")
		} else {
			r.printf(" ---: |")
		}
	}
	r.printf("\n")
	for _, row := range rows {
		r.printf("| %s |\n", strings.Join(row, " | "))
	}
	r.printf("\n")
}

// targets writes the summary of every target checked.
func (r *report) targets(p plan) {
	if len(r.checks) == 0 {
		return
	}
	r.printf("## Targets\n\n")
	if p.quick || p.scale < 1 {
		r.printf("A shortened run (quick or scaled down): the figures are a smoke test, not the targets' conditions.\n\n")
	}
	var rows [][]string
	met, missed := 0, 0
	for _, c := range r.checks {
		verdict := "✘ not met"
		switch {
		case c.skipped:
			verdict = "— skipped"
		case c.ok:
			verdict = "✔ met"
			met++
		default:
			missed++
		}
		rows = append(rows, []string{c.scenario, c.target, c.got, verdict})
	}
	r.aligned([]string{"scenario", "target", "measured", "verdict"}, rows, false)
	r.printf("%d met, %d not met, %d skipped.\n", met, missed, len(r.checks)-met-missed)
}

// ms formats a duration in milliseconds, with µs precision below 10 ms.
func ms(d time.Duration) string {
	switch {
	case d < 0:
		return "−" + ms(-d)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// us formats a duration in microseconds below a millisecond, else as ms does.
func us(d time.Duration) string {
	switch {
	case d < 0:
		return "−" + us(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	default:
		return ms(d)
	}
}

// plus formats a difference of durations with its sign, as us does.
func plus(d time.Duration) string {
	if d < 0 {
		return us(d)
	}
	return "+" + us(d)
}

// ratio formats a/b: "n/a" when b is not positive, "≤ 0" when a is not (a difference lost
// in the noise).
func ratio(a, b float64) string {
	switch {
	case b <= 0:
		return "n/a"
	case a <= 0:
		return "≤ 0"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// pct formats a share.
func pct(n, of int) string {
	if of == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(of))
}
