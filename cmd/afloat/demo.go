package main

// `afloat demo` (shared/DESIGN.md §9): steady traffic over two tasks on simulated providers;
// the primary goes down at a quarter of the run and comes back at two thirds; a live view of
// breakers, sources and latency, and a summary of what the cascade made of the outage. It is
// offline: no keys, no network, and nothing written outside a temporary folder, which is
// removed as soon as the config is built.

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/provider/fault"
)

// demoFiles is the demo's config with its prompts and schemas.
//
//go:embed demo/afloat.yaml demo/prompts demo/schemas
var demoFiles embed.FS

const (
	demoPrimary = "primary"
	// demoPollEvery is how often the breakers and bulkheads are looked at for events.
	demoPollEvery = 50 * time.Millisecond
	// demoDrawEvery is how often the live view is redrawn.
	demoDrawEvery = 500 * time.Millisecond
	// demoPrintEvery is how often a plain status line is printed when stdout is no terminal.
	demoPrintEvery = 5 * time.Second
	// demoWidth and demoHeight are the live view's size: the smallest common terminal. Every
	// line fits demoWidth-1 columns (a character in the last column may be erased by the
	// clear-line escape) and the frame is demoHeight lines.
	demoWidth  = 80
	demoHeight = 24
	// demoBudgetSlack is how far past its budget a call may return and still be reported as
	// within it: goroutine scheduling, not the cascade.
	demoBudgetSlack = 50 * time.Millisecond
	demoMinDuration = time.Second
	demoMaxRate     = 1000
)

const demoUsage = `Usage: afloat demo [--duration 60s] [--rate 20] [--seed 1]

An offline demo, with no keys and no network: simulated providers (primary, backup and a
self-hosted emergency tier), steady traffic on a triage task (enrichment: fails open to a
heuristic) and a moderation task (critical: fails closed to human review). The primary goes
down at a quarter of the run and comes back at two thirds; the breaker opens and, once the
primary is back, closes by itself. A live view when stdout is a terminal, and a summary.

--seed fixes the traffic, every simulated latency, failure and answer, and every jitter
(the breakers' open periods, the waits before a retry). On a real clock the machine's
scheduling can still move a call or two that lands at a bulkhead's edge; run on a simulated
clock (as the tests do), the same seed gives the same counts, call for call.

Flags:
`

// demo is `afloat demo`: it parses the flags, runs the demo and prints its summary.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("afloat demo", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, demoUsage)
		fl.PrintDefaults()
	}
	duration := fl.Duration("duration", 60*time.Second, "how long the traffic runs (at least 1s)")
	rate := fl.Float64("rate", 20, "calls per second, 3/4 triage and 1/4 moderation (up to 1000)")
	seed := fl.Uint64("seed", 1, "seed of the traffic, the simulated providers and every jitter")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	opts := demoOptions{Duration: *duration, Rate: *rate, Seed: *seed, Progress: stdout, Live: isTerminal(stdout)}
	err := opts.validate()
	if err == nil && fl.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(stderr, "afloat demo: %v\n\n", err)
		fl.Usage()
		return errUsage
	}
	rep, err := runDemo(ctx, opts)
	if err != nil {
		return err
	}
	writeDemoSummary(stdout, rep)
	return nil
}

// isTerminal reports whether w is a character device: a terminal that understands the live
// view's escapes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// demoOptions configure one run of the demo.
type demoOptions struct {
	// Duration is how long the traffic runs; at least demoMinDuration.
	Duration time.Duration
	// Rate is the calls per second over both tasks, in (0, demoMaxRate].
	Rate float64
	// Seed seeds the traffic and the simulated providers; 0 is a seed like any other.
	Seed uint64
	// Clock drives the traffic, the outage and every component. nil means real time.
	Clock clockwork.Clock
	// Progress receives the live view or the plain progress lines. nil means none.
	Progress io.Writer
	// Live redraws a view with ANSI escapes every demoDrawEvery; false prints plain lines.
	Live bool
	// Done, when set, sees the runtime once the traffic is over, before it is closed (the
	// example scrape of docs/metrics-example.txt reads its registry). nil means nothing.
	Done func(*config.Runtime)
}

func (o demoOptions) validate() error {
	switch {
	case o.Duration < demoMinDuration:
		return fmt.Errorf("--duration %v is shorter than %v", o.Duration, demoMinDuration)
	case !(o.Rate > 0 && o.Rate <= demoMaxRate):
		return fmt.Errorf("--rate %v is outside (0, %d]", o.Rate, demoMaxRate)
	}
	return nil
}

// interval is the time between two calls. The fault and its clearing fall halfway between
// two calls, so that which phase a call belongs to never depends on which timer fires first.
func (o demoOptions) interval() time.Duration {
	return time.Duration(float64(time.Second) / o.Rate)
}

// recovery is every breaker's open period: a tenth of the run, so that the breaker probes a
// few times during the outage and closes soon after it.
func (o demoOptions) recovery() time.Duration {
	return min(max(o.Duration/10, 500*time.Millisecond), 30*time.Second)
}

// bulkheads returns the in-flight limits of the backup and the emergency tier: a fifth and
// a twenty-fifth of the rate. They are sized for a share of the traffic, as a backup
// contract and a GPU are, so that the primary's outage overflows them into the tasks'
// policies: about half of the calls, at any rate.
func (o demoOptions) bulkheads() (backup, emergency int) {
	return max(2, int(math.Round(o.Rate/5))), max(1, int(math.Round(o.Rate/25)))
}

// demoPhase is the part of the run a call started in.
type demoPhase int

const (
	phaseSteady demoPhase = iota
	phaseDown
	phaseRecovering
	numPhases
)

var phaseNames = [numPhases]string{"steady", "primary down", "recovering"}

func (p demoPhase) String() string { return phaseNames[p] }

// demoAnswer is where a call's answer came from.
type demoAnswer int

const (
	answerModel       demoAnswer = iota // tier 0
	answerDegraded                      // a model of a lower tier
	answerHeuristic                     // the task's rules
	answerUnavailable                   // nothing
	answerHuman                         // queued for review
	answerError                         // RunJSON failed
	numAnswers
)

var answerNames = [numAnswers]string{"model tier 0", "model degraded", "heuristic", "unavailable", "human", "error"}

func (a demoAnswer) String() string { return answerNames[a] }

func classify(res afloat.Result[json.RawMessage], err error) demoAnswer {
	switch {
	case err != nil:
		return answerError
	case res.Source == afloat.SourceModel && !res.Degraded:
		return answerModel
	case res.Source == afloat.SourceModel:
		return answerDegraded
	case res.Source == afloat.SourceHeuristic:
		return answerHeuristic
	case res.Source == afloat.SourceHuman:
		return answerHuman
	}
	return answerUnavailable
}

// demoReport is what a run of the demo showed, and the live view's state while it runs.
type demoReport struct {
	Duration time.Duration
	Rate     float64
	Seed     uint64
	// Elapsed is how long the traffic ran: Duration, or less when the run was interrupted.
	Elapsed     time.Duration
	Interrupted bool
	Phase       demoPhase
	// Draining is set while the traffic has stopped and calls are still in flight.
	Draining bool
	InFlight int
	// Shed counts calls the load generator did not start because too many were in flight.
	Shed     int
	Recovery time.Duration
	// FaultAt and ClearAt are when the primary went down and came back, from the start;
	// Faulted and Cleared say whether the run got that far.
	FaultAt, ClearAt time.Duration
	Faulted, Cleared bool
	Opened, Closed   bool
	OpenedAfter      time.Duration // from the fault to the primary's breaker opening
	ClosedAfter      time.Duration // from the fault's clearing to the breaker closing
	Providers        []providerReport
	Tasks            []taskReport
	Events           []demoEvent
	// AlertRule describes the config's alert; Alerts are those firing now, AlertLog every
	// firing of the run (see demo_alerts.go).
	AlertRule string
	Alerts    []demoAlert
	AlertLog  []demoAlertSpan
}

// providerReport is a provider as last seen.
type providerReport struct {
	Name  string
	State breaker.State
	// Since is when the breaker entered State, from the start; 0 when it never changed.
	Since          time.Duration
	InFlight, Slot int
	Latency        []taskLatency
}

// taskLatency is a provider's latency estimate for one task.
type taskLatency struct {
	Task string
	// P95 is the estimated percentile; Measured is false until enough calls succeeded.
	P95         time.Duration
	Measured    bool
	ReadTimeout time.Duration
}

// taskReport is what one task answered.
type taskReport struct {
	Name        string
	Criticality afloat.Criticality
	Budget      time.Duration
	Counts      [numPhases][numAnswers]int
	Degraded    int
	Reasons     map[afloat.Reason]int
	// P50, P95, P99 and Max are the latencies callers saw, within 1%.
	P50, P95, P99, Max time.Duration
	// MaxOverrun is the most a call waited past its budget; 0 when none did.
	MaxOverrun time.Duration
	// FirstError is the first error RunJSON returned, if any.
	FirstError string
}

// Calls returns the calls of the phase, or of the whole run for numPhases.
func (t *taskReport) Calls(p demoPhase) int {
	n := 0
	for a := range numAnswers {
		n += t.Answers(p, a)
	}
	return n
}

// Answers returns the answers of kind a in the phase, or in the whole run for numPhases.
func (t *taskReport) Answers(p demoPhase, a demoAnswer) int {
	if p != numPhases {
		return t.Counts[p][a]
	}
	n := 0
	for ph := range numPhases {
		n += t.Counts[ph][a]
	}
	return n
}

// demoEvent is a notable moment: the fault, a breaker's change, a full bulkhead.
type demoEvent struct {
	At   time.Duration
	Text string
	// Pinned events (the fault injected and cleared, a breaker opened or closed, an
	// interruption) stay in the live view for the whole run; the others scroll.
	Pinned bool
}

// demoTask is a task with the statistics of its calls.
type demoTask struct {
	name   string
	task   *cascade.Task
	budget time.Duration
	crit   afloat.Criticality

	// Guarded by demoRun.mu.
	counts     [numPhases][numAnswers]int
	degraded   int
	reasons    map[afloat.Reason]int
	latency    *ddsketch.DDSketch // milliseconds
	max        time.Duration
	maxOverrun time.Duration
	firstError string
}

// demoRun is one run. Only the goroutine of runDemo touches its fields, except the task
// statistics, which the calls' goroutines record under mu.
type demoRun struct {
	opts      demoOptions
	clock     clockwork.Clock
	rt        *config.Runtime
	slots     map[string]int
	start     time.Time
	faultTime time.Time
	clearTime time.Time
	rng       *rand.Rand
	rep       demoReport
	pending   chan struct{} // a slot per call in flight; bounds the goroutines
	last      map[string]breaker.Snapshot
	full      map[string]bool
	printed   int // events printed by the plain progress
	wg        sync.WaitGroup
	// alertSpans maps "alert/scope" to its last firing in rep.AlertLog.
	alertSpans map[string]int

	// triage and moderation are also in tasks, in the config's order.
	triage, moderation *demoTask

	mu    sync.Mutex
	tasks []*demoTask
}

// runDemo runs the demo: it builds the embedded config, drives the traffic, takes the
// primary down and brings it back, and returns what it saw. A cancelled ctx stops the
// traffic early; the calls in flight finish (each within its budget) and the report is
// returned all the same. An error means the demo could not start.
func runDemo(ctx context.Context, opts demoOptions) (*demoReport, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	rt, cleanup, err := buildDemo(opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	d := &demoRun{
		opts: opts, clock: opts.Clock, rt: rt,
		slots: map[string]int{},
		rng:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)),
		last:  map[string]breaker.Snapshot{}, full: map[string]bool{}, alertSpans: map[string]int{},
		// Enough for every call of the longest budget at twice the rate.
		pending: make(chan struct{}, max(16, int(math.Ceil(opts.Rate*3*2)))),
		rep: demoReport{
			Duration: opts.Duration, Rate: opts.Rate, Seed: opts.Seed, Recovery: opts.recovery(),
			FaultAt: opts.Duration/4 + opts.interval()/2, ClearAt: opts.Duration*2/3 + opts.interval()/2,
			AlertRule: alertRule(rt.File),
		},
	}
	for _, p := range rt.File.Providers {
		d.slots[p.Name] = p.MaxInFlight
	}
	for _, name := range rt.TaskOrder {
		sk, err := ddsketch.NewDefaultDDSketch(0.01)
		if err != nil {
			return nil, err
		}
		ft := rt.File.Task(name)
		t := &demoTask{
			name: name, task: rt.Tasks[name], budget: ft.Budget, crit: ft.Criticality,
			reasons: map[afloat.Reason]int{}, latency: sk,
		}
		d.tasks = append(d.tasks, t)
		switch name {
		case "triage":
			d.triage = t
		case "moderation":
			d.moderation = t
		}
	}
	d.run(ctx)
	if opts.Done != nil {
		opts.Done(rt)
	}
	return d.report(), nil
}

// buildDemo writes the embedded config to a temporary folder, loads it with the options'
// overrides and builds it, its review queue a temporary SQLite file there. cleanup closes the
// runtime and removes the folder.
func buildDemo(opts demoOptions) (rt *config.Runtime, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "afloat-demo-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	rt, err = buildDemoIn(dir, opts)
	if err != nil {
		return nil, nil, err
	}
	return rt, func() {
		_ = rt.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

func buildDemoIn(dir string, opts demoOptions) (*config.Runtime, error) {
	files, err := fs.Sub(demoFiles, "demo")
	if err != nil {
		return nil, err
	}
	if err := os.CopyFS(dir, files); err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		return nil, err
	}
	noEnv := func(string) (string, bool) { return "", false }
	f, err := config.Parse(data, dir, noEnv)
	if err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	backup, emergency := opts.bulkheads()
	for i, p := range f.Providers {
		p.Breaker.Recovery, p.Breaker.MaxRecovery = opts.recovery(), opts.recovery()
		p.Breaker.RampUp = opts.recovery() // the primary takes its traffic back over one open period
		p.Seed = opts.Seed + uint64(i)
		switch p.Name {
		case "backup":
			p.MaxInFlight = backup
		case "emergency":
			p.MaxInFlight = emergency
		}
	}
	scaleAlerts(f, opts)
	rt, err := f.Build(config.BuildOptions{Clock: opts.Clock, Rand: lockedRand(opts.Seed)})
	if err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	if rt.Faults[demoPrimary] == nil || rt.Tasks["triage"] == nil || rt.Tasks["moderation"] == nil {
		return nil, errors.New("demo config: want a primary provider and the tasks triage and moderation")
	}
	return rt, nil
}

// lockedRand returns a source of numbers in [0, 1), seeded and safe for concurrent use: the
// jitter of the breakers and the retries, so that a seed fixes them too.
func lockedRand(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed^0x717e, seed))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// run drives the traffic and the outage until the duration is over or ctx is done, then
// waits for the calls in flight.
func (d *demoRun) run(ctx context.Context) {
	clk := d.clock
	d.start = clk.Now()
	traffic := clk.NewTicker(d.opts.interval())
	defer traffic.Stop()
	poll := clk.NewTicker(demoPollEvery)
	defer poll.Stop()
	every := demoPrintEvery
	if d.opts.Live {
		every = demoDrawEvery
		d.write("\x1b[?25l\x1b[2J") // hide the cursor, clear the screen
		defer d.write("\x1b[?25h")
		d.draw()
	}
	draw := clk.NewTicker(every)
	defer draw.Stop()
	down := clk.NewTimer(d.rep.FaultAt)
	defer down.Stop()
	back := clk.NewTimer(d.rep.ClearAt)
	defer back.Stop()
	end := clk.NewTimer(d.opts.Duration)
	defer end.Stop()

	// The calls outlive an interruption: each ends within its task's budget.
	calls := context.WithoutCancel(ctx)
	d.progress(fmt.Sprintf("steady traffic: %g calls/s over triage and moderation; the primary goes down at %s and comes back at %s",
		d.opts.Rate, fmtAt(d.rep.FaultAt), fmtAt(d.rep.ClearAt)))
loop:
	for {
		select {
		case <-ctx.Done():
			d.rep.Interrupted = true
			break loop
		case <-end.Chan():
			break loop
		case <-traffic.Chan():
			if clk.Since(d.start) >= d.opts.Duration {
				break loop // the end, whichever of the two timers fired first
			}
			d.launch(calls)
		case <-down.Chan():
			d.setFault(fault.Fault{Mode: fault.ModeUnavailable, Status: 503})
		case <-back.Chan():
			d.setFault(fault.Fault{})
		case <-poll.Chan():
			d.poll(calls)
		case <-draw.Chan():
			d.draw()
		}
	}
	d.rep.Elapsed = clk.Since(d.start)
	if d.rep.Interrupted {
		d.pinnedEvent(d.rep.Elapsed, "interrupted: traffic stopped")
	}
	d.rep.Draining = true
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	for draining := true; draining; {
		select {
		case <-done:
			draining = false
		case <-poll.Chan():
			d.poll(calls)
		case <-draw.Chan():
			d.draw()
		}
	}
	d.rep.Draining = false
	d.poll(calls)
	if d.opts.Live {
		d.draw()
	} else {
		d.printEvents()
	}
}

// launch starts one call in its own goroutine, unless too many are in flight.
func (d *demoRun) launch(ctx context.Context) {
	t, in := d.next()
	select {
	case d.pending <- struct{}{}:
	default:
		d.rep.Shed++
		return
	}
	phase := d.rep.Phase
	d.wg.Go(func() {
		defer func() { <-d.pending }()
		began := d.clock.Now()
		res, err := t.task.RunJSON(ctx, in)
		took := d.clock.Since(began)
		d.record(t, phase, res, err, took)
	})
}

// next picks the next call: three in four triage a ticket, one in four moderates a post.
func (d *demoRun) next() (*demoTask, afloat.Input) {
	if d.rng.IntN(4) == 3 {
		post := demoPosts[d.rng.IntN(len(demoPosts))]
		return d.moderation, afloat.Input{"text": post}
	}
	tk := demoTickets[d.rng.IntN(len(demoTickets))]
	return d.triage, afloat.Input{"subject": tk[0], "message": tk[1]}
}

// record counts one finished call.
func (d *demoRun) record(t *demoTask, phase demoPhase, res afloat.Result[json.RawMessage], err error, took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t.counts[phase][classify(res, err)]++
	if err != nil && t.firstError == "" {
		t.firstError = err.Error()
	}
	if res.Degraded {
		t.degraded++
		t.reasons[res.Reason]++
	}
	_ = t.latency.Add(float64(took) / float64(time.Millisecond))
	t.max = max(t.max, took)
	t.maxOverrun = max(t.maxOverrun, took-t.budget)
}

// setFault injects f into the primary (the zero Fault clears it) and moves to the next phase.
func (d *demoRun) setFault(f fault.Fault) {
	if err := d.rt.Faults[demoPrimary].Set(f); err != nil {
		d.event(d.clock.Since(d.start), "fault not set: "+err.Error())
		return
	}
	now := d.clock.Now()
	if f.Mode == fault.ModeNone {
		d.clearTime, d.rep.Cleared, d.rep.Phase = now, true, phaseRecovering
		d.rep.ClearAt = now.Sub(d.start)
		d.pinnedEvent(d.rep.ClearAt, "fault cleared: the primary answers again")
		return
	}
	d.faultTime, d.rep.Faulted, d.rep.Phase = now, true, phaseDown
	d.rep.FaultAt = now.Sub(d.start)
	d.pinnedEvent(d.rep.FaultAt, fmt.Sprintf("fault injected: the primary answers %d to every call", f.Status))
}

// poll looks at every breaker and bulkhead and records what changed as events.
func (d *demoRun) poll(ctx context.Context) {
	for _, name := range d.rt.ProviderOrder {
		snap := d.rt.Engine.Breaker(name).Snapshot(ctx)
		prev, seen := d.last[name]
		d.last[name] = snap
		if seen && (snap.State != prev.State || snap.State == breaker.StateOpen && !snap.Since.Equal(prev.Since)) {
			d.breakerEvent(name, prev, snap)
		}
		if d.rep.Phase == phaseDown && !d.full[name] && d.rt.Engine.InFlight(name) >= d.slots[name] {
			d.full[name] = true
			next := "the next tier takes the overflow"
			if name == d.rt.ProviderOrder[len(d.rt.ProviderOrder)-1] {
				next = "the overflow goes to the tasks' policies (heuristic, human review)"
			}
			d.event(d.clock.Since(d.start), fmt.Sprintf("%s is full (%d in flight): %s", name, d.slots[name], next))
		}
	}
	d.pollAlerts()
}

func (d *demoRun) breakerEvent(name string, prev, snap breaker.Snapshot) {
	at := snap.Since.Sub(d.start)
	switch snap.State {
	case breaker.StateOpen:
		if prev.State == breaker.StateOpen || prev.State == breaker.StateHalfOpen {
			d.event(at, fmt.Sprintf("%s probe failed: open again for %s", name, fmtDur(snap.Until.Sub(snap.Since))))
			return
		}
		text := fmt.Sprintf("%s breaker opened: calls skip it at once", name)
		if name == demoPrimary && d.rep.Faulted && !d.rep.Opened && !snap.Since.Before(d.faultTime) {
			d.rep.Opened, d.rep.OpenedAfter = true, snap.Since.Sub(d.faultTime)
			text += fmt.Sprintf(" (%s after the fault)", fmtDur(d.rep.OpenedAfter))
		}
		d.pinnedEvent(at, text)
	case breaker.StateHalfOpen:
		d.event(at, fmt.Sprintf("%s breaker half-open: one call probes it", name))
	case breaker.StateClosed:
		text := fmt.Sprintf("%s breaker closed", name)
		if name == demoPrimary && d.rep.Cleared && !d.rep.Closed && !snap.Since.Before(d.clearTime) {
			d.rep.Closed, d.rep.ClosedAfter = true, snap.Since.Sub(d.clearTime)
			text += fmt.Sprintf(" by itself, %s after the fault was cleared", fmtDur(d.rep.ClosedAfter))
		}
		d.pinnedEvent(at, text)
	}
}

func (d *demoRun) event(at time.Duration, text string) {
	d.rep.Events = append(d.rep.Events, demoEvent{At: max(at, 0), Text: text})
}

// pinnedEvent records an event the live view keeps in sight for the whole run.
func (d *demoRun) pinnedEvent(at time.Duration, text string) {
	d.rep.Events = append(d.rep.Events, demoEvent{At: max(at, 0), Text: text, Pinned: true})
}

// report returns the report as of now.
func (d *demoRun) report() *demoReport {
	rep := d.rep
	// Events are kept in the order they were seen; a breaker's change is stamped with when
	// it happened, which may be before an event seen earlier.
	rep.Events = slices.Clone(d.rep.Events)
	slices.SortStableFunc(rep.Events, func(a, b demoEvent) int { return cmp.Compare(a.At, b.At) })
	rep.Alerts, rep.AlertLog = slices.Clone(d.rep.Alerts), slices.Clone(d.rep.AlertLog)
	rep.InFlight = len(d.pending)
	if !rep.Draining && rep.Elapsed == 0 {
		rep.Elapsed = d.clock.Since(d.start)
	}
	for _, name := range d.rt.ProviderOrder {
		pr := providerReport{Name: name, State: d.last[name].State, InFlight: d.rt.Engine.InFlight(name), Slot: d.slots[name]}
		if since := d.last[name].Since; !since.IsZero() {
			pr.Since = since.Sub(d.start)
		}
		d.rt.Engine.Latency().Each(func(provider, task string, e *latency.Estimator) {
			if provider != name {
				return
			}
			p95, ok := e.Percentile()
			pr.Latency = append(pr.Latency, taskLatency{Task: task, P95: p95, Measured: ok, ReadTimeout: e.ReadTimeout()})
		})
		rep.Providers = append(rep.Providers, pr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.tasks {
		tr := taskReport{
			Name: t.name, Criticality: t.crit, Budget: t.budget, Counts: t.counts, Degraded: t.degraded,
			Reasons: make(map[afloat.Reason]int, len(t.reasons)), Max: t.max, MaxOverrun: max(t.maxOverrun, 0),
			FirstError: t.firstError,
		}
		for r, n := range t.reasons {
			tr.Reasons[r] = n
		}
		if qs, err := t.latency.GetValuesAtQuantiles([]float64{0.5, 0.95, 0.99}); err == nil {
			tr.P50, tr.P95, tr.P99 = msDur(qs[0]), msDur(qs[1]), msDur(qs[2])
		}
		rep.Tasks = append(rep.Tasks, tr)
	}
	return &rep
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// demoTickets are the triage inputs: subject and message, in Russian, Portuguese and English.
var demoTickets = [][2]string{
	{"Не работает оплата", "Не могу оплатить заказ картой, выдаёт ошибку 500. Срочно!"},
	{"Вопрос по счёту", "Пришёл счёт за прошлый месяц дважды, проверьте, пожалуйста."},
	{"Приложение вылетает", "После обновления приложение падает при входе, ошибка авторизации."},
	{"Тариф для команды", "Сколько стоит тариф для команды из 20 человек?"},
	{"Sistema fora do ar", "O painel está fora do ar desde as 9h, urgente!"},
	{"Erro no boleto", "O boleto gerado tem erro no valor, podem corrigir?"},
	{"Acesso bloqueado", "Meu acesso foi bloqueado e não consigo entrar na conta."},
	{"Dúvida sobre planos", "Vocês têm desconto para pagamento anual?"},
	{"Checkout is down", "Customers cannot pay since the last deploy: error 502 on every order."},
	{"Invoice question", "Could you resend the March invoice with our VAT number on it?"},
	{"Feature request", "It would be great to export the reports as CSV."},
	{"Login error", "I get an error when I sign in with SSO, since this morning."},
}

// demoPosts are the moderation inputs.
var demoPosts = []string{
	"Отличный сервис, рекомендую всем!",
	"Продаю аккаунты дёшево, пишите в телеграм @cheap_accs",
	"Meu CPF é 123.456.789-00, alguém pode me ajudar com o cadastro?",
	"Great update, the new dashboard is much faster.",
	"Click here to win a free phone: http://free-prizes.example",
	"Вы все идиоты, и ваш продукт — мусор.",
	"Alguém sabe como exportar relatórios?",
	"Call me at +1 555 0100, my card number is 4111 1111 1111 1111",
}
