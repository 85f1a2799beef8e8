package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Outcome is what one request came back with. The load generator sets At and Latency; the
// Call fills in the rest from the answer.
type Outcome struct {
	// At is the request's intended send time, from the start of the run.
	At time.Duration
	// Latency runs from the intended send time (open loop) or the actual one (closed loop) to
	// the last byte of the answer.
	Latency time.Duration
	// Err is why the request failed: a transport error, a status other than 200, an answer
	// that is not what the scenario expects. nil for a good answer.
	Err error
	// Source, Provider and Tier say who answered (the X-Afloat-* headers of a chat answer,
	// or the task envelope).
	Source, Provider string
	Tier             int
	// Primary is how long the call spent on the provider named primary, from the envelope's
	// attempts (task calls only), and PrimaryOutcome that attempt's outcome ("" when the
	// envelope has no attempt on it).
	Primary        time.Duration
	PrimaryOutcome string
	// Lag is how late the request was sent after its intended time: the load generator's
	// own delay, which Latency includes (open loop only).
	Lag time.Duration
	// TTFB is the time from the intended send time to the first chunk of a stream, and
	// Chunks how many content chunks it carried (streams only).
	TTFB   time.Duration
	Chunks int
	// Task is the task a task call went to, and Reason its envelope's reason (overload).
	Task, Reason string
	// Target is which of the calls an interleaved call sent it to; -1 for a request the open
	// loop never sent (errDropped), whose target no call chose.
	Target int
}

// interleave sends its requests to each of calls in turn, so that every target meets the
// machine as it is at the same moments (a stall of the machine falls on all of them alike);
// each Outcome's Target says whose it is.
func interleave(calls ...Call) Call {
	var n atomic.Uint64
	return func(ctx context.Context, intended time.Time) Outcome {
		k := int((n.Add(1) - 1) % uint64(len(calls)))
		o := calls[k](ctx, intended)
		o.Target = k
		return o
	}
}

// rotation sends the requests of a run to one of its calls at a time: the run's schedule is cut
// into slices of equal length, and each round of len(calls) slices gives one to every call,
// in an order of its own (a seeded shuffle, so that no target always follows another).
// Unlike interleave, a target alone takes the run's whole rate while its slice lasts; and
// unlike runs one after another, the machine's changes over the run (another tenant, a
// slow minute) fall on every target alike. begin must be the run's OnStart. In a closed
// loop a request goes to the target of the slice it is sent in.
type rotation struct {
	calls  []Call
	slice  time.Duration
	orders [][]int // orders[round][i]: the target of the round's slice i
	start  time.Time
}

// newRotation cuts a run of d into slices of slice for calls, shuffled by seed.
func newRotation(slice, d time.Duration, seed uint64, calls ...Call) *rotation {
	rng := rand.New(rand.NewPCG(seed, uint64(len(calls))))
	rounds := int(d/(slice*time.Duration(len(calls)))) + 1
	s := &rotation{calls: calls, slice: slice}
	for range rounds {
		s.orders = append(s.orders, rng.Perm(len(calls)))
	}
	return s
}

// begin is the run's OnStart: the slices count from start.
func (s *rotation) begin(start time.Time) { s.start = start }

// targetAt is the target of a request due at from the start of the run.
func (s *rotation) targetAt(at time.Duration) int {
	k := int(max(0, at) / s.slice)
	round := min(k/len(s.calls), len(s.orders)-1)
	return s.orders[round][k%len(s.calls)]
}

// call sends a request to the target of its slice; its Outcome's Target says whose.
func (s *rotation) call(ctx context.Context, intended time.Time) Outcome {
	k := s.targetAt(intended.Sub(s.start))
	o := s.calls[k](ctx, intended)
	o.Target = k
	return o
}

// ofTarget keeps the answered outcomes of target k, for histogram.
func ofTarget(k int) func(Outcome) bool {
	return func(o Outcome) bool { return o.Err == nil && o.Target == k }
}

// A Call sends one request, intended at the given time, and reports what came back. It must
// be safe for concurrent use and return when ctx ends.
type Call func(ctx context.Context, intended time.Time) Outcome

// Run is one measured run of a load generator.
type Run struct {
	// Start is when the first request was due.
	Start time.Time
	// Outcomes holds every request scheduled, in order of intended send time.
	Outcomes []Outcome
	// Wall is from Start to the last answer.
	Wall time.Duration
	// Usage is the process's CPU time and peak RSS over the run.
	Usage Usage
}

// errDropped marks a request the open loop did not send because MaxInFlight requests were
// still waiting for their answers; errCut one still unanswered at the end of the grace
// period.
var (
	errDropped = errors.New("not sent: too many requests in flight")
	errCut     = errors.New("no answer before the end of the run")
)

// OpenLoop sends requests at fixed intervals, whatever the answers do: a slow answer never
// delays the next request, and each latency is measured from the time its request was due,
// so a stall of the target (or of this process) shows up in the latencies instead of
// silently lowering the rate (coordinated omission).
type OpenLoop struct {
	// Rate is how many requests a second are sent.
	Rate float64
	// Duration is how long requests are sent for; Rate × Duration requests in all.
	Duration time.Duration
	// MaxInFlight bounds the requests waiting for an answer; a request due beyond it is not
	// sent and counts as failed (errDropped). 0 means 10,000.
	MaxInFlight int
	// Grace is how long answers are waited for after the last request was due; requests
	// still unanswered then are cancelled (errCut). 0 means 5s.
	Grace time.Duration
	// OnStart, when set, is called with the start time before the first request.
	OnStart func(start time.Time)
	// Hops are the process ids of the hops under test that run in processes of their own:
	// their CPU and peak RSS are measured too (Usage.Hops).
	Hops []int
}

// Run runs the loop until every request was answered or cancelled, or ctx ends.
func (o OpenLoop) Run(ctx context.Context, call Call) *Run {
	n := int(o.Rate * o.Duration.Seconds())
	interval := time.Duration(float64(time.Second) / o.Rate)
	limit := o.MaxInFlight
	if limit <= 0 {
		limit = 10_000
	}
	grace := o.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	out := make([]Outcome, n)
	sem := make(chan struct{}, limit)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	m := startMeter(o.Hops)
	start := time.Now().Add(time.Millisecond)
	if o.OnStart != nil {
		o.OnStart(start)
	}
	stop := time.AfterFunc(time.Until(start.Add(o.Duration+grace)), cancel)
	defer stop.Stop()
	var mu sync.Mutex
	last := start
	send := func(i int, at time.Duration, due time.Time) {
		defer wg.Done()
		defer func() { <-sem }()
		sent := time.Now()
		oc := call(ctx, due)
		done := time.Now()
		oc.At, oc.Latency, oc.Lag = at, done.Sub(due), sent.Sub(due)
		if oc.Err != nil && ctx.Err() != nil {
			oc.Err = errCut
		}
		out[i] = oc
		mu.Lock()
		if done.After(last) {
			last = done
		}
		mu.Unlock()
	}
	scheduled := make(chan struct{})
	go func() { // the schedule, on a thread of its own
		defer close(scheduled)
		precisely()
		for i := range n {
			at := time.Duration(i) * interval
			due := start.Add(at)
			for w := time.Until(due); w > 0 && ctx.Err() == nil; w = time.Until(due) {
				sleep(w)
			}
			if ctx.Err() != nil {
				for j := i; j < n; j++ {
					out[j] = Outcome{At: time.Duration(j) * interval, Err: errCut}
				}
				return
			}
			select {
			case sem <- struct{}{}:
			default:
				out[i] = Outcome{At: at, Err: errDropped, Target: -1}
				continue
			}
			wg.Add(1)
			go send(i, at, due)
		}
	}()
	<-scheduled
	wg.Wait()
	return &Run{Start: start, Outcomes: out, Wall: last.Sub(start), Usage: m.stop()}
}

// ClosedLoop runs Workers callers, each sending its next request as soon as the last one
// was answered: the rate is whatever the target sustains (saturation). Latencies run from
// each request's actual send time.
type ClosedLoop struct {
	Workers  int
	Duration time.Duration
	// Hops and OnStart are as OpenLoop's.
	Hops    []int
	OnStart func(start time.Time)
}

// Run runs the loop for Duration, then waits for the requests in flight.
func (c ClosedLoop) Run(ctx context.Context, call Call) *Run {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(c.Duration+5*time.Second, cancel) // a hung request cannot hang the run
	defer stop.Stop()
	m := startMeter(c.Hops)
	start := time.Now()
	if c.OnStart != nil {
		c.OnStart(start)
	}
	end := start.Add(c.Duration)
	per := make([][]Outcome, c.Workers)
	var wg sync.WaitGroup
	for w := range c.Workers {
		wg.Go(func() {
			for {
				sent := time.Now()
				if !sent.Before(end) || ctx.Err() != nil {
					return
				}
				oc := call(ctx, sent)
				oc.At, oc.Latency = sent.Sub(start), time.Since(sent)
				per[w] = append(per[w], oc)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	var out []Outcome
	for _, p := range per {
		out = append(out, p...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return &Run{Start: start, Outcomes: out, Wall: wall, Usage: m.stop()}
}

// OK returns the requests that were answered well.
func (r *Run) OK() int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Err == nil {
			n++
		}
	}
	return n
}

// Failed returns the requests that were not, and the first error among them.
func (r *Run) Failed() (int, error) {
	n := 0
	var first error
	for _, o := range r.Outcomes {
		if o.Err != nil {
			if first == nil {
				first = o.Err
			}
			n++
		}
	}
	return n, first
}

// histogram records the latencies of the outcomes keep accepts (nil: every good answer),
// in microseconds, from 1 µs to 5 minutes at 3 significant digits.
func histogram(outs []Outcome, keep func(Outcome) bool) *hdr.Histogram {
	h := hdr.New(1, int64(5*time.Minute/time.Microsecond), 3)
	for _, o := range outs {
		if keep == nil && o.Err != nil || keep != nil && !keep(o) {
			continue
		}
		_ = h.RecordValue(max(1, o.Latency.Microseconds()))
	}
	return h
}

// quantile returns the latency at q (0–100) of h; 0 for an empty histogram.
func quantile(h *hdr.Histogram, q float64) time.Duration {
	if h.TotalCount() == 0 {
		return 0
	}
	return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond
}

// durationHist records arbitrary durations (TTFB, time on a provider) the same way.
func durationHist(ds []time.Duration) *hdr.Histogram {
	h := hdr.New(1, int64(5*time.Minute/time.Microsecond), 3)
	for _, d := range ds {
		_ = h.RecordValue(max(1, d.Microseconds()))
	}
	return h
}

// median returns the median of xs (the mean of the middle two for an even count); 0 for
// none.
func median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := append([]T(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
