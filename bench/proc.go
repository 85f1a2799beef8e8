package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Usage is what the whole process used over a run, and the hop's own process, when the hop
// runs in one (child.go). In the one process the mock upstream and the load generator (and
// the hop, when it runs there too) share it, so a hop's share there is found by subtracting
// a run without the hop (the direct call), measured the same way.
type Usage struct {
	// CPU is user plus system CPU time (getrusage(RUSAGE_SELF)).
	CPU time.Duration
	// PeakRSS is the process's peak resident set (VmHWM) during the run, in bytes: the peak
	// is reset at the start of the run where the kernel allows it (PeakReset), else it is the
	// peak since the process started.
	PeakRSS uint64
	// PeakReset says whether the peak was reset at the start of the run.
	PeakReset bool
	// StartRSS is the resident set at the start of the run, once the heap was returned to
	// the OS: what the process holds before the run adds to it.
	StartRSS uint64
	// Hops holds each hop's own process's usage, in the order of the run's Hops; none when
	// the hop runs in this process.
	Hops []HopUsage
}

// HopUsage is what a hop's own process used over a run: its CPU time and peak RSS (reset at
// the start of the run, when Usage.PeakReset), StartRSS its resident set then.
type HopUsage struct {
	CPU               time.Duration
	PeakRSS, StartRSS uint64
}

// meter measures one run's Usage.
type meter struct {
	cpu   time.Duration
	reset bool
	rss   uint64
	// hops are the hops' process ids, and start their CPU time and RSS at the start.
	hops  []int
	start []HopUsage
}

// startMeter returns the heap to the OS (so that memory the previous run left behind does
// not count as this one's), resets the peak RSS of this process and of each hop's (pids),
// and reads their CPU clocks.
func startMeter(hops []int) meter {
	runtime.GC()
	debug.FreeOSMemory()
	m := meter{cpu: cpuTime(), reset: resetPeakRSS("self") == nil, rss: statusKB("self", "VmRSS:") * 1024, hops: hops}
	for _, hop := range hops {
		pid := strconv.Itoa(hop)
		m.reset = m.reset && resetPeakRSS(pid) == nil
		cpu, _ := procCPU(hop)
		m.start = append(m.start, HopUsage{CPU: cpu, StartRSS: statusKB(pid, "VmRSS:") * 1024})
	}
	return m
}

func (m meter) stop() Usage {
	u := Usage{CPU: cpuTime() - m.cpu, PeakRSS: statusKB("self", "VmHWM:") * 1024, PeakReset: m.reset, StartRSS: m.rss}
	for i, hop := range m.hops {
		cpu, _ := procCPU(hop)
		u.Hops = append(u.Hops, HopUsage{CPU: cpu - m.start[i].CPU, PeakRSS: statusKB(strconv.Itoa(hop), "VmHWM:") * 1024, StartRSS: m.start[i].StartRSS})
	}
	return u
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the VmHWM of process pid ("self" or a number) to its current RSS
// (Linux ≥ 4.0: "5" to clear_refs).
func resetPeakRSS(pid string) error {
	return os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0)
}

// statusKB reads one "kB" field of /proc/PID/status (pid "self" or a number); 0 where there
// is none.
func statusKB(pid, field string) uint64 {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// raiseFileLimit raises the soft limit on open files to at least want (up to the hard
// limit) and says what it did.
func raiseFileLimit(want uint64) (limit uint64, note string) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Sprintf("could not read the file-descriptor limit: %v", err)
	}
	if rl.Cur >= want {
		return rl.Cur, fmt.Sprintf("file-descriptor limit %d (soft) already covers the %d needed", rl.Cur, want)
	}
	if rl.Cur >= rl.Max {
		return rl.Cur, fmt.Sprintf("file-descriptor limit %d, the hard limit, below the %d wanted", rl.Cur, want)
	}
	old := rl.Cur
	rl.Cur = min(want, rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return old, fmt.Sprintf("could not raise the file-descriptor limit from %d: %v", old, err)
	}
	return rl.Cur, fmt.Sprintf("raised the file-descriptor limit (setrlimit) from %d to %d for the %d needed", old, rl.Cur, want)
}

// loadavg is the machine's 1-, 5- and 15-minute load average, as /proc/loadavg has it.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// mib formats bytes in MiB.
func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// serveProfiler serves net/http/pprof on addr, a loopback address, on a mux of its own.
func serveProfiler(addr string) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s is not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// goMemory is what the Go runtime holds at one moment: goroutines, their stacks, and live
// and unswept heap objects.
type goMemory struct {
	goroutines   uint64
	stacks, heap uint64
	// total is all the memory the runtime mapped (runtime/metrics' /memory/classes/total).
	total uint64
}

// readGoMemory samples runtime/metrics (no stop of the world).
func readGoMemory() goMemory {
	s := []metrics.Sample{
		{Name: "/sched/goroutines:goroutines"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return goMemory{goroutines: v(0), stacks: v(1), heap: v(2), total: v(3)}
}
