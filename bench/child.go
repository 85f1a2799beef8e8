package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A hop (the bare proxy, an afloat gateway) may run in a process of its own: this program
// run again as `bench -serve proxy TARGET` or `bench -serve gateway DIR`. Its CPU time and
// peak RSS are then its own, read from /proc, instead of the whole process's minus a run
// without the hop.

// child is a hop served by a process of its own.
type child struct {
	URL   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// lines are the child's answers on stdout, one a line; done its exit.
	lines chan string
	done  chan error
}

// hopCPU is the CPU each hop's own process is bound to ("" for none: -pin not given); the
// child reads it from its environment (hopCPUEnv).
var hopCPU string

const hopCPUEnv = "AFLOAT_BENCH_HOP_CPU"

// fdTable says whether each process grows its descriptor table before it serves (-grow-fds,
// growFDTable); a child started with fdTableEnv=0 in its environment does not.
var fdTable = true

const fdTableEnv = "AFLOAT_BENCH_GROW_FDS"

// startChild runs this program again with -serve kind arg (env added to its environment) and
// waits for the address it listens on. The child exits when its stdin closes (Close, or this process dying).
func startChild(kind, arg string, env ...string) (*child, error) {
	if hopCPU != "" {
		env = append(env, hopCPUEnv+"="+hopCPU)
	}
	if !fdTable {
		env = append(env, fdTableEnv+"=0")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-serve", kind, arg)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	select {
	case l, ok := <-c.lines:
		if url, found := strings.CutPrefix(l, "listening "); ok && found {
			c.URL = url
			return c, nil
		}
		c.Close()
		return nil, fmt.Errorf("bench -serve %s: no address (got %q)", kind, l)
	case <-time.After(30 * time.Second):
		c.Close()
		return nil, fmt.Errorf("bench -serve %s: no address after 30s", kind)
	}
}

// Pid is the child's process id.
func (c *child) Pid() int { return c.cmd.Process.Pid }

// Memory asks the child what its Go runtime holds now (goroutines, stacks, heap).
func (c *child) Memory() (goMemory, error) {
	if _, err := io.WriteString(c.stdin, "memory\n"); err != nil {
		return goMemory{}, err
	}
	select {
	case l, ok := <-c.lines:
		var m goMemory
		if _, err := fmt.Sscanf(l, "memory %d %d %d %d", &m.goroutines, &m.stacks, &m.heap, &m.total); !ok || err != nil {
			return goMemory{}, fmt.Errorf("bench -serve: no memory figures (got %q)", l)
		}
		return m, nil
	case <-time.After(10 * time.Second):
		return goMemory{}, errors.New("bench -serve: no memory figures after 10s")
	}
}

// HeapProfile asks the child to write a heap profile to path (in the background: the child
// answers nothing).
func (c *child) HeapProfile(path string) error {
	_, err := io.WriteString(c.stdin, "heap "+path+"\n")
	return err
}

// CPUProfile asks the child to profile its CPU for d and write the profile to path (in the
// background: the child answers nothing).
func (c *child) CPUProfile(path string, d time.Duration) error {
	_, err := fmt.Fprintf(c.stdin, "cpu %d %s\n", d.Milliseconds(), path)
	return err
}

// writeCPUProfile profiles this process's CPU for d and writes the profile to path.
func writeCPUProfile(path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	time.Sleep(d)
	pprof.StopCPUProfile()
	return f.Close()
}

// writeHeapProfile writes this process's heap profile (after a GC: the live objects) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Close ends the child and waits for it.
func (c *child) Close() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// serveChild is the child's side: it serves kind ("proxy" to the URL arg, "gateway" from
// the folder arg), prints "listening URL" and serves until stdin closes, answering each
// line "memory" on stdin with its Go runtime's figures.
func serveChild(kind, arg string, stdout io.Writer) error {
	if v := os.Getenv(hopCPUEnv); v != "" {
		cpu, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s=%q: want a CPU number", hopCPUEnv, v)
		}
		if err := pinTo(cpu); err != nil {
			return err
		}
	}
	if os.Getenv(fdTableEnv) != "0" { // the parent's -grow-fds decides
		if _, err := growFDTable(); err != nil {
			return err
		}
	}
	var url string
	var stop func()
	switch kind {
	case "proxy":
		u, closeProxy, err := startProxy(arg)
		if err != nil {
			return err
		}
		url, stop = u, closeProxy
	case "gateway":
		g, err := serveGateway(arg)
		if err != nil {
			return err
		}
		url, stop = g.URL, g.Close
	default:
		return fmt.Errorf("-serve %q: want proxy or gateway", kind)
	}
	defer stop()
	fmt.Fprintf(stdout, "listening %s\n", url)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() { // until the parent closes it, or dies
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "memory":
			m := readGoMemory()
			fmt.Fprintf(stdout, "memory %d %d %d %d\n", m.goroutines, m.stacks, m.heap, m.total)
		case "cpu": // cpu MILLISECONDS PATH: profile the CPU for that long, in the background
			ms, path, _ := strings.Cut(arg, " ")
			d, err := strconv.Atoi(ms)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench -serve: cpu %q: want milliseconds and a path\n", arg)
				continue
			}
			go func() {
				if err := writeCPUProfile(path, time.Duration(d)*time.Millisecond); err != nil {
					fmt.Fprintf(os.Stderr, "bench -serve: cpu profile: %v\n", err)
				}
			}()
		case "heap": // heap PATH: write a heap profile of the live objects to PATH
			if err := writeHeapProfile(arg); err != nil {
				fmt.Fprintf(os.Stderr, "bench -serve: heap profile: %v\n", err)
			}
		}
	}
	return nil
}

// procCPU is a process's user plus system CPU time so far (/proc/PID/stat, in clock ticks
// of 10 ms: USER_HZ is 100 on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc/PID/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// scrapeGauge reads one gauge or counter without labels from a /metrics page; ok is false
// when the page has no such series.
func scrapeGauge(ctx context.Context, c *http.Client, url, name string) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	fams, err := parseMetrics(resp.Body)
	if err != nil {
		return 0, false
	}
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, false
	}
	m := f.GetMetric()[0]
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

// parseMetrics reads a scrape in Prometheus's text format, by metric name.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(r)
}
