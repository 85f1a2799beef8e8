package alerts

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/state"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// fakeCounts are totals a test moves by hand. Calls, when set, is told of each read.
type fakeCounts struct {
	mu      sync.Mutex
	calls   map[string]Count
	answers map[Scope]Count
	read    chan struct{}
}

func (f *fakeCounts) add(task string, all, hits float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls[task]
	f.calls[task] = Count{All: c.All + all, Hits: c.Hits + hits}
}

func (f *fakeCounts) Calls() map[string]Count {
	f.mu.Lock()
	out := make(map[string]Count, len(f.calls))
	for k, v := range f.calls {
		out[k] = v
	}
	f.mu.Unlock()
	if f.read != nil {
		f.read <- struct{}{}
	}
	return out
}

func (f *fakeCounts) Answers() map[Scope]Count {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Scope]Count, len(f.answers))
	for k, v := range f.answers {
		out[k] = v
	}
	return out
}

func newFakeCounts() *fakeCounts {
	return &fakeCounts{calls: map[string]Count{}, answers: map[Scope]Count{}}
}

// TestAlertHysteresis drives fallback_share (above 0.3, for 20s, over one 5s tick) through a
// scripted share: a condition shorter than For never fires, a firing alert survives a dip
// shorter than For without a second notification, and resolves For after the share fell.
func TestAlertHysteresis(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(t0)
	counts := newFakeCounts()
	ev, err := New(Config{Rules: []Rule{{Name: FallbackShare, Above: 0.3, For: 20 * time.Second, Window: 5 * time.Second, MinCalls: 10}},
		Counts: counts, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	ev.Evaluate(ctx)
	// Each tick: 10 calls, this many degraded; then whether the alert fires after it.
	script := []struct {
		degraded int
		firing   bool
	}{
		{0, false}, {5, false}, {5, false}, {5, false}, {0, false}, // 15s above: too short
		{5, false}, {5, false}, {5, false}, {5, false}, {5, true}, // held 20s: fires
		{0, true}, {0, true}, {5, true}, // a dip of 10s: still firing
		{0, true}, {0, true}, {0, true}, {0, true}, {0, false}, // under for 20s: resolved
	}
	fired, resolved := 0, 0
	was := false
	for i, s := range script {
		counts.add("triage", 10, float64(s.degraded))
		fc.Advance(5 * time.Second)
		ev.Evaluate(ctx)
		got := ev.Firing()
		if (len(got) == 1) != s.firing {
			t.Fatalf("tick %d (%d/10 degraded): firing %+v, want %v", i+1, s.degraded, got, s.firing)
		}
		switch {
		case s.firing && !was:
			fired++
		case !s.firing && was:
			resolved++
		}
		was = s.firing
		if g := testutil.ToFloat64(ev.firing.WithLabelValues("fallback_share")); g != float64(len(got)) {
			t.Fatalf("tick %d: afloat_alerts_firing %v with %d firing", i+1, g, len(got))
		}
	}
	if fired != 1 || resolved != 1 {
		t.Errorf("fired %d times, resolved %d times; want once each", fired, resolved)
	}
}

// TestAlertMinCalls: a share over too few calls is no condition.
func TestAlertMinCalls(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(t0)
	counts := newFakeCounts()
	ev, err := New(Config{Rules: []Rule{{Name: FallbackShare, Above: 0.3}}, Counts: counts, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	ev.Evaluate(ctx)
	counts.add("triage", 19, 19) // every call degraded, one short of the default 20
	fc.Advance(time.Minute)
	ev.Evaluate(ctx)
	if got := ev.Firing(); len(got) != 0 {
		t.Fatalf("fired over 19 calls: %+v", got)
	}
	counts.add("triage", 1, 1)
	fc.Advance(time.Minute)
	ev.Evaluate(ctx)
	if got := ev.Firing(); len(got) != 1 || got[0].Value != 1 {
		t.Fatalf("20 degraded calls in the 5m window: firing %+v", got)
	}
	// Ten quiet minutes: the window holds no call, the condition lapses, the alert resolves.
	for range 10 {
		fc.Advance(time.Minute)
		ev.Evaluate(ctx)
	}
	if got := ev.Firing(); len(got) != 0 {
		t.Fatalf("firing over an empty window: %+v", got)
	}
}

// TestAlertRuleValidation: New refuses a rule it could not evaluate as written.
func TestAlertRuleValidation(t *testing.T) {
	counts := newFakeCounts()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no rules", Config{Counts: counts}, "no rules"},
		{"unknown", Config{Rules: []Rule{{Name: "latency"}}}, "unknown alert"},
		{"twice", Config{Rules: []Rule{{Name: FallbackShare}, {Name: FallbackShare}}, Counts: counts}, "configured twice"},
		{"no input", Config{Rules: []Rule{{Name: ReviewSLA}}}, "input is missing"},
		{"share above 1", Config{Rules: []Rule{{Name: FallbackShare, Above: 1.5}}, Counts: counts}, "outside [0, 1]"},
		{"negative for", Config{Rules: []Rule{{Name: FallbackShare, For: -time.Second}}, Counts: counts}, "must not be negative"},
		{"window on a flag", Config{Rules: []Rule{{Name: DrillStale, Window: time.Minute}}, Drills: fakeDrills{}}, "rate alerts only"},
		{"threshold on a flag", Config{Rules: []Rule{{Name: DrillStale, Above: 0.5}}, Drills: fakeDrills{}}, "has no threshold"},
		{"bad webhook", Config{Rules: []Rule{{Name: FallbackShare, Webhook: "ftp://hooks"}}, Counts: counts}, "invalid webhook url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
	ev, err := New(Config{Rules: []Rule{{Name: FallbackShare}}, Counts: counts})
	if err != nil {
		t.Fatal(err)
	}
	if r := ev.Rules()[0]; r.Window != DefaultWindow || r.MinCalls != DefaultMinCalls {
		t.Errorf("defaults: %+v", r)
	}
}

type fakeDrills map[string]state.Drills

func (f fakeDrills) Drills() map[string]state.Drills { return f }

// TestAlertDrillStale: a task drilled with success within max age is fine; one whose last
// pass is older, or that never passed, is stale; a task never drilled is not watched.
func TestAlertDrillStale(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	at := func(ago time.Duration, passed bool) *state.Drill {
		return &state.Drill{Passed: passed, StartedAt: t0.Add(-ago - time.Minute), FinishedAt: t0.Add(-ago)}
	}
	drills := fakeDrills{
		"task:fresh":       {Last: at(time.Hour, true), LastPassed: at(time.Hour, true)},
		"task:old":         {Last: at(24*time.Hour, false), LastPassed: at(50*24*time.Hour, true)},
		"route:never":      {Last: at(time.Hour, false)},
		"task:not-drilled": {},
	}
	ev, err := New(Config{Rules: []Rule{{Name: DrillStale}}, Drills: drills, DrillMaxAge: 30 * 24 * time.Hour, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	ev.Evaluate(t.Context())
	var got []string
	for _, s := range ev.Firing() {
		got = append(got, s.Scope.Task)
	}
	if strings.Join(got, ",") != "never,old" {
		t.Fatalf("stale %v, want never,old", got)
	}
	if s := ev.Firing()[1]; s.Value != (50*24*time.Hour).Seconds() || s.Threshold != (30*24*time.Hour).Seconds() {
		t.Errorf("old: value %v, threshold %v", s.Value, s.Threshold)
	}
}

type fakeCanaries map[string]bool

func (f fakeCanaries) RolledBack() map[string]bool { return f }

// TestAlertCanaryRolledBack: a task whose canary was rolled back fires, until it no longer
// is; a running or promoted canary does not.
func TestAlertCanaryRolledBack(t *testing.T) {
	canaries := fakeCanaries{"triage": true, "summary": false}
	ev, err := New(Config{Rules: []Rule{{Name: CanaryRolledBack}}, Canaries: canaries, Clock: clockwork.NewFakeClockAt(t0)})
	if err != nil {
		t.Fatal(err)
	}
	ev.Evaluate(t.Context())
	if f := ev.Firing(); len(f) != 1 || f[0].Scope.Task != "triage" || !strings.Contains(f[0].text(), "rolled back") {
		t.Fatalf("firing %+v, want triage's rollback", f)
	}
	canaries["triage"] = false
	ev.Evaluate(t.Context())
	if f := ev.Firing(); len(f) != 0 {
		t.Fatalf("firing %+v after the canary was renewed", f)
	}
	if _, err := New(Config{Rules: []Rule{{Name: CanaryRolledBack}}}); err == nil {
		t.Fatal("canary_rolled_back without its input")
	}
}

// TestAlertReviewSLA: items not answered past their task's SLA count, claimed or not;
// answered items and items within the SLA do not.
func TestAlertReviewSLA(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(t0)
	q := review.NewMemory(fc)
	enqueue := func(n int) []string {
		var ids []string
		for range n {
			id, err := q.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: json.RawMessage(`{"text":"hi"}`)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	old := enqueue(3)
	if _, err := q.Claim(ctx, old[0], "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Reject(ctx, old[1], "alice", "spam"); err != nil {
		t.Fatal(err)
	}
	fc.Advance(40 * time.Minute)
	enqueue(2) // within the SLA
	ev, err := New(Config{Rules: []Rule{{Name: ReviewSLA}}, Reviews: q, Clock: fc,
		Tasks: []Task{{Name: "moderation", ReviewSLA: 30 * time.Minute}, {Name: "support", Providers: []string{"p"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ev.Evaluate(ctx)
	got := ev.Firing()
	if len(got) != 1 || got[0].Scope.Task != "moderation" || got[0].Value != 2 || got[0].Threshold != 0 {
		t.Fatalf("firing %+v, want moderation with 2 items past its SLA (one claimed, one pending)", got)
	}
	if !strings.Contains(got[0].text(), "2 review items past their SLA") {
		t.Errorf("text %q", got[0].text())
	}
}

// TestAlertPrimaryOpenAndUnusable: primary_open follows a task's tier-0 breaker; unusable
// fires only for a breaker opened on an unusable failure, and not for a forced opening.
func TestAlertPrimaryOpenAndUnusable(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(t0)
	openings := NewOpenings()
	brs := breakers{}
	for _, name := range []string{"primary", "backup"} {
		b, err := breaker.New(name, breaker.Config{Clock: fc, OnStateChange: openings.Record, ConsecutiveFailures: 1})
		if err != nil {
			t.Fatal(err)
		}
		brs[name] = b
	}
	ev, err := New(Config{Rules: []Rule{{Name: PrimaryOpen, For: time.Minute}, {Name: Unusable}},
		Tasks: []Task{{Name: "triage", Providers: []string{"primary", "backup"}}}, Breakers: brs, Openings: openings, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for _, s := range ev.Firing() {
			out = append(out, string(s.Alert)+":"+s.Scope.String())
		}
		return out
	}
	ev.Evaluate(ctx)
	fail(t, brs["primary"], unusableErr)
	if err := brs["backup"].Force(ctx, breaker.StateOpen); err != nil {
		t.Fatal(err)
	}
	ev.Evaluate(ctx)
	if got := strings.Join(names(), "; "); got != "unusable:provider primary" {
		t.Fatalf("firing %q, want the unusable primary alone (primary_open waits its minute)", got)
	}
	fc.Advance(time.Minute)
	ev.Evaluate(ctx)
	if got := strings.Join(names(), "; "); got != "primary_open:task triage, provider primary; unusable:provider primary" {
		t.Fatalf("firing %q", got)
	}
	if err := brs["primary"].Force(ctx, breaker.StateClosed); err != nil {
		t.Fatal(err)
	}
	ev.Evaluate(ctx)
	if got := strings.Join(names(), "; "); got != "primary_open:task triage, provider primary" {
		t.Fatalf("after the primary closed: firing %q, want primary_open until it held closed for its minute", got)
	}
	fc.Advance(time.Minute)
	ev.Evaluate(ctx)
	if got := names(); len(got) != 0 {
		t.Fatalf("firing %q, want none", got)
	}
}

// TestAlertRetarget: after Retarget (a config reload) the evaluator watches the new tasks'
// primaries; an alert firing keeps firing while its condition holds and resolves after its
// For once its task left, and a task added is watched from the next evaluation.
func TestAlertRetarget(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(t0)
	brs := breakers{}
	for _, name := range []string{"primary", "backup"} {
		b, err := breaker.New(name, breaker.Config{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Force(ctx, breaker.StateOpen); err != nil {
			t.Fatal(err)
		}
		brs[name] = b
	}
	ev, err := New(Config{Rules: []Rule{{Name: PrimaryOpen, For: time.Minute}},
		Tasks: []Task{{Name: "triage", Providers: []string{"primary"}}}, Breakers: brs, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	firing := func() string {
		var out []string
		for _, s := range ev.Firing() {
			out = append(out, s.Scope.String())
		}
		return strings.Join(out, "; ")
	}
	ev.Evaluate(ctx)
	fc.Advance(time.Minute)
	ev.Evaluate(ctx)
	if got := firing(); got != "task triage, provider primary" {
		t.Fatalf("before the reload: firing %q", got)
	}
	ev.Retarget([]Task{{Name: "summary", Providers: []string{"backup"}}}, nil)
	ev.Evaluate(ctx)
	if got := firing(); got != "task triage, provider primary" {
		t.Fatalf("right after the reload: firing %q, want triage's until it held clear for its minute", got)
	}
	fc.Advance(time.Minute)
	ev.Evaluate(ctx)
	if got := firing(); got != "task summary, provider backup" {
		t.Fatalf("a minute after the reload: firing %q, want the new task's alone", got)
	}
}

type breakers map[string]*breaker.Breaker

func (b breakers) Breaker(name string) *breaker.Breaker { return b[name] }

// TestAlertStartEvaluatesOnItsClock: Start evaluates at once and then at every Interval of
// its clock, and Close stops it.
func TestAlertStartEvaluatesOnItsClock(t *testing.T) {
	ctx := t.Context()
	fc := clockwork.NewFakeClockAt(t0)
	counts := newFakeCounts()
	counts.read = make(chan struct{})
	ev, err := New(Config{Rules: []Rule{{Name: FallbackShare}}, Counts: counts, Clock: fc, Interval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ev.Start()
	<-counts.read // the first evaluation, at once
	for range 3 {
		fc.BlockUntilContext(ctx, 1)
		fc.Advance(10 * time.Second)
		<-counts.read
	}
	ev.Close()
	ev.Close()
	select {
	case <-counts.read:
		t.Fatal("evaluated after Close")
	default:
	}
	var nilEv *Evaluator
	nilEv.Start()
	nilEv.Evaluate(ctx)
	nilEv.Close()
	if nilEv.Firing() != nil {
		t.Error("a nil Evaluator fires")
	}
}

var unusableErr = &afloat.ProviderError{Provider: "primary", Status: 401, Kind: afloat.Unusable}

// fail reports one failed call to b.
func fail(t *testing.T, b *breaker.Breaker, err error) {
	t.Helper()
	p, aerr := b.Allow(t.Context())
	if aerr != nil {
		t.Fatal(aerr)
	}
	p.Done(t.Context(), err)
}
