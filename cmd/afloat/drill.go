package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/afloat-dev/afloat/provider/fault"
)

const drillUsage = `Usage: afloat drill --target URL --admin-token T [--api-key K] (--task NAME | --route NAME)
         --provider NAME --mode MODE [fault flags] [--duration 5m | --requests N] [--rate 20]
         [--input JSON] [--log-file PATH] [--json]

The unavailability exercise, against a running gateway: it measures the task's healthy
latency, injects the fault into the provider through the admin API (with a TTL, so that a
drill killed with -9 cannot leave it behind), drives traffic at --rate, clears the fault and
drives traffic until the breaker has closed and the provider answers again. Then it checks:

  main_path        no 5xx or 4xx (enrichment, assistance); a 202 with a review id or a block
                   (critical)
  degraded_marked  every answer during the fault is marked degraded and none is the provider's
                   (with --mode flap or an --error-rate under 1, the provider's own answers in
                   between are allowed: they are whole and not degraded)
  breaker_opened   the provider's breaker opened during the fault
  fail_fast        calls after it opened did not wait: 9 in 10 at least skipped the provider (or
                   came from the cache), and their p95 is within the healthy p95 × 3 + 100ms
  metrics_moved    afloat_requests_total{degraded="true"} and afloat_circuit_opened_total rose
  no_credentials   no key, token or --secret in the answers (and in --log-file)
  breaker_closed   the breaker closed by itself after the fault was cleared
  primary_back     the provider answered again

With --mode malformed the breaker must stay closed instead (a contract violation never moves
it): breaker_opened passes when it never opened, fail_fast when the p95 under the fault (the
re-ask and the next tier) is within the bound, metrics_moved when degraded answers rose and
openings did not.

Before any call it checks the fault as the gateway will, that the task or route exists, that
the provider serves it, and that its breaker is not open (a drill begun with it open would
measure the fallback as the healthy latency); a breaker still ramping up after a recovery
(ramp_until in /admin/status, as after another drill) is waited out, up to 5m. Every call of
the healthy phase must be answered (no 4xx, no 5xx: a wrong --input or --api-key stops the
drill at its first call), and the breaker be closed after it (the healthy calls close a
half-open one), or no fault is injected. An --error-rate under the breaker's threshold leaves
it closed, and breaker_opened fails. Exit 1 when a check fails or the drill cannot run, 2 on
a bad flag. Ctrl-C or SIGTERM stops the traffic, clears the fault at once and reports
(a second one ends the drill, and the fault clears at its TTL); such a drill is not recorded. A drill that ran to its end is recorded
in the gateway (POST /admin/drills): /admin/status shows each task's last drill.

Flags:
`

// drillOptions are the flags of afloat drill.
type drillOptions struct {
	target, adminToken, apiKey string
	task, route, provider      string
	fault                      map[string]any // the fault's JSON, without ttl
	duration                   time.Duration
	requests                   int
	rate                       float64
	input                      string
	logFile                    string
	json                       bool
	recover                    time.Duration
	secrets                    []string
	// out receives the progress; live redraws one line (a terminal).
	out  io.Writer
	live bool
}

// drill is `afloat drill`.
func drill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseDrill(args, stderr)
	if err != nil {
		return err
	}
	rep, err := runDrill(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "afloat drill: %v\n", err)
		return errFailed
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		writeDrillReport(stdout, rep)
	}
	if !rep.Passed {
		return errFailed
	}
	return nil
}

// parseDrill reads the flags of afloat drill; a bad one prints the usage and is errUsage.
func parseDrill(args []string, stderr io.Writer) (drillOptions, error) {
	var o drillOptions
	fs := flag.NewFlagSet("afloat drill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, drillUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.target, "target", envOr("AFLOAT_TARGET", "http://127.0.0.1:8080"), "the gateway's URL")
	fs.StringVar(&o.adminToken, "admin-token", os.Getenv("AFLOAT_ADMIN_TOKEN"), "the admin token (default $AFLOAT_ADMIN_TOKEN)")
	fs.StringVar(&o.apiKey, "api-key", os.Getenv("AFLOAT_API_KEY"), "a tenant's client key (default $AFLOAT_API_KEY; none for open access)")
	fs.StringVar(&o.task, "task", "", "the task to drill")
	fs.StringVar(&o.route, "route", "", "the chat route to drill, instead of a task")
	fs.StringVar(&o.provider, "provider", "", "the provider to fail")
	mode := fs.String("mode", "unavailable", "the fault: unavailable, timeout, slow, malformed, reset, rate_limited, stream_cut, stream_stall, first_token_slow, flap, error_rate")
	status := fs.Int("status", 0, "the HTTP status of unavailable, flap and error_rate (default 503)")
	delay := fs.Duration("delay", 0, "the wait of slow and first_token_slow (default 5s)")
	retryAfter := fs.Duration("retry-after", 0, "the Retry-After of rate_limited (default 30s)")
	afterChunks := fs.Int("after-chunks", 0, "the chunks before stream_cut cuts (default 3)")
	down := fs.Duration("down", 0, "how long flap is down (default 10s)")
	up := fs.Duration("up", 0, "how long flap is up (default 10s)")
	errorRate := fs.Float64("error-rate", 0, "the share of calls error_rate fails, in (0, 1]")
	fs.DurationVar(&o.duration, "duration", 5*time.Minute, "how long the fault holds (or --requests)")
	fs.IntVar(&o.requests, "requests", 0, "calls to make under the fault, instead of --duration")
	fs.Float64Var(&o.rate, "rate", 20, "calls per second")
	fs.StringVar(&o.input, "input", "", `the task's input as JSON ({"subject": "…"}); default: a sample text in each input field`)
	fs.StringVar(&o.logFile, "log-file", "", "the gateway's log, searched for credentials")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.DurationVar(&o.recover, "recover", 2*time.Minute, "how long to wait for the breaker to close and the provider to answer after the fault")
	var secrets stringList
	fs.Var(&secrets, "secret", "a credential that must appear nowhere (repeatable), beside the api key and admin token")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return o, errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	bad := func(format string, a ...any) (drillOptions, error) {
		fmt.Fprintf(stderr, "afloat drill: %s\n", fmt.Sprintf(format, a...))
		fs.Usage()
		return o, errUsage
	}
	switch {
	case len(pos) > 0:
		return bad("unexpected argument %q", pos[0])
	case (o.task == "") == (o.route == ""):
		return bad("name one of --task or --route")
	case o.provider == "":
		return bad("--provider is required")
	case o.adminToken == "":
		return bad("--admin-token is required (or $AFLOAT_ADMIN_TOKEN): the fault is injected through the admin API")
	case !(o.rate > 0 && o.rate <= 1000):
		return bad("--rate %v is outside (0, 1000]", o.rate)
	case set["duration"] && set["requests"]:
		return bad("give --duration or --requests, not both")
	case o.requests < 0 || o.requests == 0 && o.duration < time.Second:
		return bad("--requests must be positive, or --duration at least 1s")
	case o.recover < time.Second:
		return bad("--recover %s is too short to see the breaker close: give it a second at least", o.recover)
	}
	if _, err := url.ParseRequestURI(o.target); err != nil {
		return bad("--target %q is not a URL", o.target)
	}
	o.target = strings.TrimRight(o.target, "/")
	for _, s := range secrets {
		if len(s) < 8 {
			// credentials() searches only values of 8 bytes or more: a shorter one would
			// match ordinary text.
			return bad("a --secret of %d bytes is too short to search for (8 at least): give the whole credential", len(s))
		}
	}
	o.secrets = secrets
	o.fault = map[string]any{"mode": *mode}
	// The fault's JSON fields (DESIGN §6) of the flags given, by flag name.
	for name, field := range map[string]struct {
		key string
		v   any
	}{
		"status": {"status", *status}, "delay": {"delay", delay.String()}, "retry-after": {"retry_after", retryAfter.String()},
		"after-chunks": {"after_chunks", *afterChunks}, "down": {"down", down.String()}, "up": {"up", up.String()},
		"error-rate": {"rate", *errorRate},
	} {
		if set[name] {
			o.fault[field.key] = field.v
		}
	}
	// The gateway's own check of the fault, before any call: a bad one is refused now, not
	// after the healthy phase has sent its calls.
	var flt fault.Fault
	raw, _ := json.Marshal(o.fault)
	if err := json.Unmarshal(raw, &flt); err != nil {
		return bad("%v", err)
	}
	if err := flt.Validate(); err != nil {
		return bad("%v", err)
	}
	o.out, o.live = stderr, isTerminal(stderr) && !o.json
	return o, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// drillCall is one call the drill made.
type drillCall struct {
	Phase    string        `json:"phase"` // healthy, fault, recovery
	At       time.Duration `json:"at"`    // from the start of the drill
	Latency  time.Duration `json:"latency"`
	Status   int           `json:"status"`
	Source   string        `json:"source"`
	Degraded bool          `json:"degraded"`
	Reason   string        `json:"reason"`
	Provider string        `json:"provider"`
	ReviewID string        `json:"review_id,omitempty"`
	Code     string        `json:"code,omitempty"` // the error code of a refused call
	// Skipped: the drilled provider was skipped as circuit_open (no time paid on it).
	Skipped bool  `json:"skipped"`
	Err     error `json:"-"`
	body    []byte
}

// drillRun is one run of the drill: the gateway's client and what it saw.
type drillRun struct {
	o      drillOptions
	client *http.Client
	start  time.Time
	body   []byte // the call's request body
	path   string // the call's path

	mu       sync.Mutex
	calls    []drillCall
	openedAt time.Duration // from the start, when the breaker was first seen open; -1 never
	closedAt time.Duration // when it was seen closed after the fault; -1 never
	cleared  time.Duration
	faulted  time.Time     // when the fault was injected
	printed  time.Duration // when the plain progress last printed a line
}

// sinceFault is the time since the fault was injected; 0 before.
func (d *drillRun) sinceFault() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.faulted.IsZero() {
		return 0
	}
	return time.Since(d.faulted)
}

// runDrill runs the drill and returns its report. An error means it could not run (the
// gateway unreachable, the task or provider unknown, the fault refused).
func runDrill(ctx context.Context, o drillOptions) (*drillReport, error) {
	d := &drillRun{o: o, client: &http.Client{Timeout: 2 * time.Minute}, openedAt: -1, closedAt: -1, cleared: -1}
	st, err := d.status(ctx)
	if err != nil {
		return nil, err
	}
	scope, crit, err := d.prepare(st)
	if err != nil {
		return nil, err
	}
	if err := d.awaitRamp(ctx, st); err != nil {
		return nil, err
	}
	rep := &drillReport{Target: o.target, Scope: scope, Criticality: crit, Provider: o.provider, Fault: o.fault, StartedAt: time.Now().UTC()}
	d.start = time.Now()

	// 1. Healthy: the latency to compare with, and whether the provider answers at all.
	healthy := max(5, int(o.rate*2))
	d.progress("measuring the healthy latency")
	d.drive(ctx, "healthy", healthy, 0, d.healthyFailed)
	if ctx.Err() != nil {
		return nil, errors.New("interrupted before the fault was injected: nothing to clear")
	}
	if err := d.healthyAnswered(ctx); err != nil {
		return nil, err
	}
	before, _ := d.metrics(ctx)

	// 2. The fault, with a TTL past the drill's own end.
	runFor := o.duration
	if o.requests > 0 {
		runFor = time.Duration(float64(o.requests) / o.rate * float64(time.Second))
	}
	ttl := runFor + o.recover + 5*time.Minute
	flt := maps.Clone(o.fault)
	flt["ttl"] = ttl.Round(time.Second).String()
	body, _ := json.Marshal(flt)
	code, payload, err := adminRequest(ctx, "PUT", o.target+"/admin/faults/"+url.PathEscape(o.provider), o.adminToken, body, "application/json", nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("the gateway refused the fault (%d): %s", code, strings.TrimSpace(string(payload)))
	}
	d.mu.Lock()
	d.faulted = time.Now()
	d.mu.Unlock()
	clear := sync.OnceFunc(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		code, payload, err := adminRequest(cctx, "DELETE", o.target+"/admin/faults/"+url.PathEscape(o.provider), o.adminToken, nil, "", nil)
		if err != nil || code != http.StatusOK {
			fmt.Fprintf(o.out, "afloat drill: the fault could not be cleared (%d %s %v): it clears itself after %s\n", code, strings.TrimSpace(string(payload)), err, ttl)
		}
		d.mu.Lock()
		d.cleared = time.Since(d.start)
		d.mu.Unlock()
	})
	defer clear() // also when a step panics
	// Ctrl-C or SIGTERM clears it at once, not after the calls in flight have answered.
	defer context.AfterFunc(ctx, clear)()

	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		d.watch(wctx)
	}()
	n := o.requests
	if n == 0 {
		n = max(1, int(o.rate*o.duration.Seconds()))
	}
	d.drive(ctx, "fault", n, runFor, nil)
	clear()

	// 3. Recovery: until the breaker closed and the provider answered, within --recover.
	if ctx.Err() == nil {
		back := func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.closedAt < 0 {
				return false
			}
			for _, c := range d.calls {
				if c.Phase == "recovery" && c.Provider == o.provider && c.Status < 300 && c.Source == "model" {
					return true
				}
			}
			return false
		}
		d.drive(ctx, "recovery", int(o.rate*o.recover.Seconds())+1, o.recover, back)
	}
	stopWatch()
	<-watched
	after, _ := d.metrics(context.WithoutCancel(ctx))

	rep.Interrupted = ctx.Err() != nil
	d.mu.Lock()
	calls := slices.Clone(d.calls)
	opened, closed, cleared := d.openedAt, d.closedAt, d.cleared
	d.mu.Unlock()
	rep.check(d.o, crit, calls, opened, closed, cleared, before, after, d.logLeaks())
	rep.FinishedAt = time.Now().UTC()
	d.record(context.WithoutCancel(ctx), rep)
	d.progressDone()
	return rep, nil
}

// healthyFailed reports whether a call of the healthy phase failed: the phase stops there,
// and healthyAnswered says why.
func (d *drillRun) healthyFailed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(d.calls, func(c drillCall) bool { return c.Err != nil || c.Status >= 400 })
}

// healthyAnswered checks the healthy phase before any fault: every call answered (a 4xx says
// the drill's own call is wrong, its input or its key; a 5xx that the gateway is not healthy
// to begin with), and the provider's breaker closed after them. Otherwise the drill would
// inject a fault and judge a degradation it cannot see.
func (d *drillRun) healthyAnswered(ctx context.Context) error {
	d.mu.Lock()
	calls := slices.Clone(d.calls)
	d.mu.Unlock()
	failed, first := 0, ""
	for _, c := range calls {
		if c.Err == nil && c.Status < 400 {
			continue
		}
		failed++
		if first == "" {
			first = fmt.Sprintf("%d %s", c.Status, errorOf(c.body))
			if c.Err != nil {
				first = c.Err.Error()
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d calls failed before any fault (the first: %.300s); no fault was injected", failed, len(calls), first)
	}
	st, err := d.status(ctx)
	if err != nil {
		return err
	}
	if b := st.Providers[d.o.provider].Breaker; b != "closed" {
		return fmt.Errorf("the breaker of %q is %s after %d healthy calls; no fault was injected", d.o.provider, b, len(calls))
	}
	return nil
}

// maxRampWait bounds how long a drill waits out a provider's ramp-up (awaitRamp): the
// default breaker.ramp_up is 30s.
const maxRampWait = 5 * time.Minute

// awaitRamp waits, before the healthy calls, until the provider's breaker no longer ramps up
// after a recovery (a drill just before this one ends as the breaker closes). During a ramp-up
// the calls outside the provider's share skip it as circuit_open: the healthy phase would
// measure the next tier's latency, and the fault would reach too few calls to open the
// breaker. It reads /admin/status again until ramp_until is gone, so that it is the gateway's
// clock that decides; a ramp-up that ends more than maxRampWait from now is refused.
func (d *drillRun) awaitRamp(ctx context.Context, st *drillStatus) error {
	deadline := time.Now().Add(maxRampWait)
	told := false
	for {
		until := st.Providers[d.o.provider].RampUntil
		if until == nil {
			return nil
		}
		wait := time.Until(*until)
		if until.After(deadline) || time.Now().After(deadline) {
			return fmt.Errorf("the breaker of %q ramps up after its recovery until %s, more than %s from now: a drill then would measure the next tier; drill it after that", d.o.provider, until.UTC().Format(time.RFC3339), maxRampWait)
		}
		if !told {
			fmt.Fprintf(d.o.out, "afloat drill: waiting %s for the ramp-up of %q after its recovery (until %s; breaker.ramp_up)\n", max(wait, 0).Round(100*time.Millisecond), d.o.provider, until.UTC().Format(time.TimeOnly))
			told = true
		}
		t := time.NewTimer(min(max(wait, 100*time.Millisecond), 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.New("interrupted before the fault was injected: nothing to clear")
		case <-t.C:
		}
		var err error
		if st, err = d.status(ctx); err != nil {
			return err
		}
	}
}

// errorOf is the code and message of an error answer (the task API's and the OpenAI
// shape's {"error": {"code", "message"}}), or the body itself when it has neither.
func errorOf(body []byte) string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" && e.Error.Message == "" {
		return strings.TrimSpace(string(body))
	}
	return strings.TrimSpace(e.Error.Code + ": " + e.Error.Message)
}

// drillStatus is the part of /admin/status the drill reads.
type drillStatus struct {
	Providers map[string]struct {
		Breaker   string              `json:"breaker"`
		RampUntil *time.Time          `json:"ramp_until"` // absent when it does not ramp up
		Tasks     map[string]struct{} `json:"tasks"`      // the tasks and routes it serves
	} `json:"providers"`
	Tasks map[string]struct {
		Inputs      []string `json:"inputs"`
		Criticality string   `json:"criticality"`
	} `json:"tasks"`
	Routes map[string]struct {
		Criticality string `json:"criticality"`
	} `json:"routes"`
}

func (d *drillRun) status(ctx context.Context) (*drillStatus, error) {
	code, payload, err := adminRequest(ctx, "GET", d.o.target+"/admin/status", d.o.adminToken, nil, "", nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /admin/status answered %d: %s", code, strings.TrimSpace(string(payload)))
	}
	var st drillStatus
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("GET /admin/status: %w", err)
	}
	return &st, nil
}

// prepare checks the scope and the provider against the gateway and builds the call. The
// scope must exist, the provider serve it, and its breaker not be open: a drill that began
// with it open would measure the fallback as the healthy latency and see an opening it did
// not cause. A half-open one is let through: the healthy calls close it (healthyAnswered).
func (d *drillRun) prepare(st *drillStatus) (scope, crit string, err error) {
	if d.o.route != "" {
		if _, ok := st.Routes[d.o.route]; !ok {
			return "", "", fmt.Errorf("the gateway has no route %q (it has %s)", d.o.route, strings.Join(sortedKeys(st.Routes), ", "))
		}
	} else if _, ok := st.Tasks[d.o.task]; !ok {
		return "", "", fmt.Errorf("the gateway has no task %q (it has %s)", d.o.task, strings.Join(sortedKeys(st.Tasks), ", "))
	}
	p, ok := st.Providers[d.o.provider]
	if !ok {
		return "", "", fmt.Errorf("the gateway has no provider %q (it has %s)", d.o.provider, strings.Join(sortedKeys(st.Providers), ", "))
	}
	name := cmp.Or(d.o.task, d.o.route)
	if _, ok := p.Tasks[name]; !ok {
		serves := strings.Join(sortedKeys(p.Tasks), ", ")
		return "", "", fmt.Errorf("provider %q is not in the cascade of %q (it serves %s)", d.o.provider, name, cmp.Or(serves, "none"))
	}
	if p.Breaker == "open" {
		// Half-open is let through: the healthy calls close it, or the drill stops after them.
		return "", "", fmt.Errorf("the breaker of %q is open before the drill: wait for it to half-open (the healthy calls then close it), or close it (PUT /admin/breakers/%s {\"state\": \"closed\"})", d.o.provider, d.o.provider)
	}
	if d.o.route != "" {
		r := st.Routes[d.o.route]
		d.path = "/v1/chat/completions"
		d.body, _ = json.Marshal(map[string]any{"model": d.o.route, "messages": []map[string]string{{"role": "user", "content": drillSample}}})
		return "route:" + d.o.route, r.Criticality, nil
	}
	t := st.Tasks[d.o.task]
	var in json.RawMessage
	if d.o.input != "" {
		if !json.Valid([]byte(d.o.input)) {
			return "", "", errors.New("--input is not JSON")
		}
		in = json.RawMessage(d.o.input)
	} else {
		fields := map[string]string{}
		for _, f := range t.Inputs {
			fields[f] = drillSample
		}
		in, _ = json.Marshal(fields)
	}
	d.path = "/v1/tasks/" + url.PathEscape(d.o.task)
	d.body, _ = json.Marshal(map[string]any{"input": in})
	return "task:" + d.o.task, t.Criticality, nil
}

// drillSample is the text of a sample input: urgent enough that a heuristic has something
// to match.
const drillSample = "afloat drill: the payment page fails with error 500, urgent"

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// drive makes n calls at the rate, each in its own goroutine, for at most limit (0: no
// limit), stopping early when done reports true or ctx ends; it returns when they have all
// answered.
func (d *drillRun) drive(ctx context.Context, phase string, n int, limit time.Duration, done func() bool) {
	every := time.Duration(float64(time.Second) / d.o.rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	began := time.Now()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 512) // bounds the calls in flight
	for i := 0; i < n; i++ {
		if ctx.Err() != nil || limit > 0 && time.Since(began) >= limit || done != nil && done() {
			break
		}
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				defer func() { <-slots }()
				d.add(d.call(ctx, phase))
			})
		default: // the gateway is not keeping up: the drill does not pile on
		}
		d.progress(phase)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	wg.Wait()
}

func (d *drillRun) add(c drillCall) {
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
}

// call makes one call of the task or route.
func (d *drillRun) call(ctx context.Context, phase string) drillCall {
	c := drillCall{Phase: phase, At: time.Since(d.start)}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), "POST", d.o.target+d.path, bytes.NewReader(d.body))
	if err != nil {
		c.Err = err
		return c
	}
	req.Header.Set("Content-Type", "application/json")
	if d.o.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.o.apiKey)
	}
	began := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		c.Err, c.Latency = err, time.Since(began)
		return c
	}
	defer resp.Body.Close()
	c.body, _ = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	c.Latency, c.Status = time.Since(began), resp.StatusCode
	if d.o.route != "" {
		c.Source, c.Provider = resp.Header.Get("X-Afloat-Source"), resp.Header.Get("X-Afloat-Provider")
		c.Degraded, _ = strconv.ParseBool(resp.Header.Get("X-Afloat-Degraded"))
		c.Skipped = c.Provider != d.o.provider && c.Degraded
		if c.Status >= 400 { // OpenAI's error shape: its code names the refusal in the report
			var e struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(c.body, &e) == nil {
				c.Code = e.Error.Code
			}
		}
	} else {
		var env struct {
			Source   string  `json:"source"`
			Degraded bool    `json:"degraded"`
			Reason   *string `json:"reason"`
			Provider *string `json:"provider"`
			ReviewID string  `json:"review_id"`
			Attempts []struct {
				Provider string `json:"provider"`
				Outcome  string `json:"outcome"`
			} `json:"attempts"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(c.body, &env) == nil {
			c.Source, c.Degraded, c.ReviewID, c.Code = env.Source, env.Degraded, env.ReviewID, env.Error.Code
			if env.Reason != nil {
				c.Reason = *env.Reason
			}
			if env.Provider != nil {
				c.Provider = *env.Provider
			}
			for _, a := range env.Attempts {
				if a.Provider == d.o.provider && a.Outcome == "circuit_open" {
					c.Skipped = true
				}
			}
		}
	}
	return c
}

// watch polls the provider's breaker in /admin/status until ctx ends, noting when it was
// first seen open, and when closed after the fault was cleared.
func (d *drillRun) watch(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := d.status(ctx); err == nil {
			now := time.Since(d.start)
			state := st.Providers[d.o.provider].Breaker
			d.mu.Lock()
			if d.openedAt < 0 && (state == "open" || state == "half-open") {
				d.openedAt = now
			}
			if d.cleared >= 0 && d.closedAt < 0 && state == "closed" {
				d.closedAt = now
			}
			d.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// metrics reads the counters the drill compares: degraded answers of the scope and
// openings of the provider's breaker.
func (d *drillRun) metrics(ctx context.Context) (drillMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", d.o.target+"/metrics", nil)
	if err != nil {
		return drillMetrics{}, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return drillMetrics{}, err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return drillMetrics{}, err
	}
	scope := d.o.task
	if scope == "" {
		scope = d.o.route
	}
	var m drillMetrics
	for _, line := range strings.Split(string(text), "\n") {
		switch {
		case strings.HasPrefix(line, "afloat_requests_total{") && strings.Contains(line, `degraded="true"`) && strings.Contains(line, `task="`+scope+`"`):
			m.Degraded += metricValue(line)
		case strings.HasPrefix(line, "afloat_circuit_opened_total{") && strings.Contains(line, `provider="`+d.o.provider+`"`):
			m.Opened += metricValue(line)
		}
	}
	m.Read = true
	return m, nil
}

func metricValue(line string) float64 {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}

// drillMetrics are the counters of /metrics the drill compares.
type drillMetrics struct {
	Read     bool    `json:"-"`
	Degraded float64 `json:"degraded"`
	Opened   float64 `json:"circuit_opened"`
}

// logLeaks returns the credentials found in --log-file; nil without one.
func (d *drillRun) logLeaks() []string {
	if d.o.logFile == "" {
		return nil
	}
	data, err := os.ReadFile(d.o.logFile)
	if err != nil {
		return []string{"the log file could not be read: " + err.Error()}
	}
	return leaks(data, d.credentials())
}

// credentials are the values that must appear nowhere.
func (d *drillRun) credentials() []string {
	var out []string
	for _, s := range append([]string{d.o.apiKey, d.o.adminToken}, d.o.secrets...) {
		if len(s) >= 8 {
			out = append(out, s)
		}
	}
	return out
}

// leaks returns a description of each credential found in data (never the credential).
func leaks(data []byte, creds []string) []string {
	var out []string
	for i, c := range creds {
		if bytes.Contains(data, []byte(c)) {
			out = append(out, fmt.Sprintf("credential #%d (%d bytes)", i+1, len(c)))
		}
	}
	return out
}

// record tells the gateway about the drill (POST /admin/drills).
func (d *drillRun) record(ctx context.Context, rep *drillReport) {
	if rep.Interrupted {
		// Its checks are cut short: it must not replace the task's last whole drill.
		rep.Recorded = "not recorded (interrupted)"
		return
	}
	body, _ := json.Marshal(map[string]any{
		"scope": rep.Scope, "provider": rep.Provider, "mode": rep.Fault["mode"], "passed": rep.Passed,
		"started_at": rep.StartedAt, "finished_at": rep.FinishedAt, "failed": rep.failedNames(),
	})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, payload, err := adminRequest(cctx, "POST", d.o.target+"/admin/drills", d.o.adminToken, body, "application/json", nil)
	if err != nil || code != http.StatusOK {
		rep.Recorded = fmt.Sprintf("not recorded: %d %s %v", code, strings.TrimSpace(string(payload)), err)
		return
	}
	rep.Recorded = "recorded"
}
