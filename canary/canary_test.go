package canary

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewRejectsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no share", Config{Window: time.Hour}, "share 0 is outside (0, 1]"},
		{"share above 1", Config{Share: 1.5, Window: time.Hour}, "share 1.5"},
		{"NaN share", Config{Share: math.NaN(), Window: time.Hour}, "share NaN"},
		{"share below resolution", Config{Share: 0.00001, Window: time.Hour}, "smallest share"},
		{"no window", Config{Share: 0.1}, "window 0s is not positive"},
		{"negative min calls", Config{Share: 0.1, Window: time.Hour, MinCalls: -1}, "min calls -1"},
		{"negative violation", Config{Share: 0.1, Window: time.Hour, RollbackIf: Thresholds{ViolationRate: -0.1}}, "violation rate -0.1"},
		{"re-ask above 1", Config{Share: 0.1, Window: time.Hour, RollbackIf: Thresholds{ReaskRate: 2}}, "re-ask rate 2"},
		{"negative p95", Config{Share: 0.1, Window: time.Hour, RollbackIf: Thresholds{P95: -1}}, "p95 -1"},
		{"infinite cost", Config{Share: 0.1, Window: time.Hour, RollbackIf: Thresholds{Cost: math.Inf(1)}}, "cost +Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || c != nil {
				t.Fatalf("New = %v, %v; want an error containing %q", c, err, tc.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	c, _ := newTest(t, Config{})
	want := Thresholds{ViolationRate: 0.02, FailureRate: 0.05, ReaskRate: 0.05, P95: 0.25, Cost: 0.25}
	if c.limits != want || c.minCalls != 100 {
		t.Fatalf("limits %+v, min calls %d; want %+v, 100", c.limits, c.minCalls, want)
	}
	s := c.Status()
	if s.State != Running || s.Share != 0.1 || !s.DecideAt.Equal(s.Started.Add(testWindow)) || s.Decision != nil {
		t.Fatalf("status %+v", s)
	}
}

func TestViolatingCandidateRollsBack(t *testing.T) {
	c, clock := newTest(t, Config{})
	feed(c, Incumbent, 1000, incumbent1pct)
	feed(c, Candidate, 1000, violating(3))
	if s := c.Status(); s.State != Running || s.Decision != nil || c.Check() != nil {
		t.Fatalf("decided before the window: %+v", s)
	}

	clock.Advance(testWindow)
	d := c.Check()
	if d == nil || d.State != RolledBack || d.By != "auto" || !d.At.Equal(clock.Now()) {
		t.Fatalf("Check = %+v, want an automatic rollback now", d)
	}
	if got := d.Candidate.ViolationRate; math.Abs(got-0.30) > 1e-9 {
		t.Errorf("candidate violation rate %v, want 0.30", got)
	}
	if got := d.Incumbent.ViolationRate; math.Abs(got-0.01) > 1e-9 {
		t.Errorf("incumbent violation rate %v, want 0.01", got)
	}
	if want := "violation rate 30.0% vs 1.0% (+29.0 points > 2.0)"; d.Reasons[0] != want {
		t.Errorf("reason %q, want %q", d.Reasons[0], want)
	}
	for _, r := range d.Reasons[1:] {
		if strings.Contains(r, " > ") {
			t.Errorf("reason %q fails; only the violation rate should", r)
		}
	}
	s := c.Status()
	if s.State != RolledBack || s.Share != 0 || s.Decision == nil || s.Decision.State != RolledBack {
		t.Fatalf("status after rollback %+v", s)
	}
	if c.Check() != nil {
		t.Fatal("a second Check decided again")
	}
}

func TestWaitsForMinCalls(t *testing.T) {
	c, clock := newTest(t, Config{})
	feed(c, Incumbent, 12, incumbent1pct)
	feed(c, Candidate, 99, violating(3))
	if got := c.Status().Waiting; got != "" {
		t.Fatalf("waiting %q before the window, want \"\"", got)
	}
	clock.Advance(testWindow + time.Minute)
	if d := c.Check(); d != nil {
		t.Fatalf("decided with too few calls: %+v", d)
	}
	if got, want := c.Status().Waiting, "incumbent has 12 of 100 calls; candidate has 99 of 100 calls"; got != want {
		t.Fatalf("waiting %q, want %q", got, want)
	}
	feed(c, Incumbent, 88, incumbent1pct)
	c.Observe(Candidate, good(0)) // the 100th candidate call decides
	s := c.Status()
	if s.State != RolledBack || s.Waiting != "" || s.Candidate.Calls != 100 || s.Incumbent.Calls != 100 {
		t.Fatalf("status %+v, want rolled back on 100 calls each", s)
	}
}

func TestBetterCandidatePromoted(t *testing.T) {
	c, clock := newTest(t, Config{})
	feed(c, Incumbent, 200, violating(1))
	feed(c, Candidate, 200, func(i int) Observation {
		return Observation{Latency: 80 * time.Millisecond, Cost: 0.9}
	})
	clock.Advance(testWindow)
	d := c.Check()
	if d == nil || d.State != Promoted {
		t.Fatalf("Check = %+v, want promoted", d)
	}
	if len(d.Reasons) != 5 {
		t.Errorf("reasons %q, want one per figure compared", d.Reasons)
	}
	for _, r := range d.Reasons {
		if !strings.Contains(r, " <= ") {
			t.Errorf("reason %q does not pass", r)
		}
	}
	if s := c.Status(); s.State != Promoted || s.Share != 1 {
		t.Fatalf("status %+v", s)
	}
	for i := range 1000 {
		if arm := c.Pick(key(i)); arm != Candidate {
			t.Fatalf("Pick(%q) = %v after promotion", key(i), arm)
		}
	}
	// Observations after the decision count but decide nothing.
	feed(c, Candidate, 10, violating(10))
	if s := c.Status(); s.Candidate.Calls != 210 || s.Decision.Candidate.Calls != 200 || s.State != Promoted {
		t.Fatalf("status after the decision %+v", s)
	}
}

func TestThresholdsAlone(t *testing.T) {
	slow := func(int) Observation { return Observation{Latency: 130 * time.Millisecond, Cost: 1} }
	dear := func(int) Observation { return Observation{Latency: 100 * time.Millisecond, Cost: 1.3} }
	failing := func(i int) Observation {
		o := good(i)
		o.Failed = i%10 == 0
		return o
	}
	reasking := func(i int) Observation {
		o := good(i)
		o.Reask = i%10 == 0
		return o
	}
	for _, tc := range []struct {
		name   string
		limits Thresholds
		cand   func(int) Observation
		want   State
		reason string
	}{
		{"p95 30% above", Thresholds{}, slow, RolledBack, "p95 latency"},
		{"p95 within a looser limit", Thresholds{P95: 0.5}, slow, Promoted, ""},
		{"cost 30% above", Thresholds{}, dear, RolledBack, "cost per answer"},
		{"cost within a looser limit", Thresholds{Cost: 0.4}, dear, Promoted, ""},
		{"failures 10 points above", Thresholds{}, failing, RolledBack, "failure rate"},
		{"failures under a looser failure limit", Thresholds{FailureRate: 0.2}, failing, Promoted, ""},
		{"failures are not violations", Thresholds{ViolationRate: 0.5}, failing, RolledBack, "failure rate"},
		{"re-asks 10 points above", Thresholds{}, reasking, RolledBack, "re-ask rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clock := newTest(t, Config{RollbackIf: tc.limits})
			feed(c, Incumbent, 100, good)
			feed(c, Candidate, 100, tc.cand)
			clock.Advance(testWindow)
			d := c.Check()
			if d == nil || d.State != tc.want {
				t.Fatalf("Check = %+v, want %v", d, tc.want)
			}
			failed := 0
			for _, r := range d.Reasons {
				if strings.Contains(r, " > ") {
					failed++
				}
			}
			if tc.reason != "" && (!hasReason(d, tc.reason) || failed != 1) {
				t.Fatalf("reasons %q: want only %q to fail", d.Reasons, tc.reason)
			}
		})
	}
}

func TestZeroIncumbentNotCompared(t *testing.T) {
	c, clock := newTest(t, Config{})
	feed(c, Incumbent, 100, func(int) Observation { return Observation{} })
	feed(c, Candidate, 100, good)
	clock.Advance(testWindow)
	d := c.Check()
	if d == nil || d.State != Promoted {
		t.Fatalf("Check = %+v, want promoted: p95 and cost are not compared with 0", d)
	}
	if got, want := d.Reasons[3], "p95 latency 100ms vs 0s (not compared: the incumbent's is 0)"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}

func TestFigures(t *testing.T) {
	c, _ := newTest(t, Config{})
	for i := range 100 {
		c.Observe(Candidate, Observation{
			Violation: i < 10,
			Reask:     i < 20,
			Failed:    i >= 60,                               // 40 failures
			Latency:   time.Duration(i+1) * time.Millisecond, // answered: 1..60ms
			Cost:      1,                                     // failures cost too
		})
	}
	c.Observe(Arm(7), Observation{Failed: true}) // ignored
	f := c.Status().Candidate
	if f.Calls != 100 || f.ViolationRate != 0.1 || f.ReaskRate != 0.2 || f.FailureRate != 0.4 {
		t.Fatalf("figures %+v", f)
	}
	if want := 100.0 / 60; math.Abs(f.CostPerAnswer-want) > 1e-9 {
		t.Errorf("cost per answer %v, want %v", f.CostPerAnswer, want)
	}
	if want := 57 * time.Millisecond; math.Abs(float64(f.P95-want)) > 0.02*float64(want) {
		t.Errorf("p95 %v, want %v ±2%%", f.P95, want)
	}
	if f := c.Status().Incumbent; f != (Figures{}) {
		t.Errorf("incumbent figures %+v, want none", f)
	}
}

func TestPinAndUnpin(t *testing.T) {
	c, clock := newTest(t, Config{})
	if err := c.Pin("alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.Pin("bob"); err != nil { // already pinned: changes nothing
		t.Fatal(err)
	}
	feed(c, Incumbent, 100, good)
	feed(c, Candidate, 100, violating(5))
	clock.Advance(2 * testWindow)
	if d := c.Check(); d != nil {
		t.Fatalf("a pinned canary decided: %+v", d)
	}
	s := c.Status()
	if s.State != Pinned || s.PinnedBy != "alice" || s.Waiting != "pinned by alice" || s.Share != 0.1 {
		t.Fatalf("status %+v", s)
	}
	if err := c.Unpin("alice"); err != nil {
		t.Fatal(err)
	}
	if s := c.Status(); s.State != Running || s.PinnedBy != "" {
		t.Fatalf("status after Unpin %+v", s)
	}
	if d := c.Check(); d == nil || d.State != RolledBack || d.By != "auto" {
		t.Fatalf("Check after Unpin = %+v, want an automatic rollback", d)
	}
	for _, err := range []error{c.Pin("alice"), c.Unpin("alice")} {
		if !errors.Is(err, ErrDecided) {
			t.Errorf("after the decision: %v, want ErrDecided", err)
		}
	}
}

func TestByHand(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pinned bool
		decide func(*Canary, string) (Decision, error)
		want   State
		share  float64
		arm    Arm
	}{
		{"promote running", false, (*Canary).Promote, Promoted, 1, Candidate},
		{"promote pinned", true, (*Canary).Promote, Promoted, 1, Candidate},
		{"roll back running", false, (*Canary).Rollback, RolledBack, 0, Incumbent},
		{"roll back pinned", true, (*Canary).Rollback, RolledBack, 0, Incumbent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clock := newTest(t, Config{})
			var got []Decision
			c.OnDecision(func(d Decision) { got = append(got, d) })
			if tc.pinned {
				if err := c.Pin("alice"); err != nil {
					t.Fatal(err)
				}
			}
			feed(c, Incumbent, 10, good)
			feed(c, Candidate, 5, good)
			clock.Advance(time.Minute) // before the window: an operator need not wait
			d, err := tc.decide(c, "bob")
			if err != nil {
				t.Fatal(err)
			}
			if d.State != tc.want || d.By != "bob" || !d.At.Equal(clock.Now()) ||
				d.Incumbent.Calls != 10 || d.Candidate.Calls != 5 || len(d.Reasons) != 6 ||
				!strings.HasPrefix(d.Reasons[0], "by hand") || (tc.want == RolledBack) != strings.Contains(d.Reasons[0], "overriding") {
				t.Fatalf("decision %+v", d)
			}
			if len(got) != 1 || got[0].By != "bob" {
				t.Fatalf("OnDecision got %+v, want the decision once", got)
			}
			s := c.Status()
			if s.State != tc.want || s.Share != tc.share || s.Decision == nil || s.Decision.By != "bob" {
				t.Fatalf("status %+v", s)
			}
			if arm := c.Pick("any"); arm != tc.arm {
				t.Fatalf("Pick = %v, want %v", arm, tc.arm)
			}
			for _, again := range []func(string) (Decision, error){c.Promote, c.Rollback} {
				if _, err := again("carol"); !errors.Is(err, ErrDecided) {
					t.Errorf("a second decision: %v, want ErrDecided", err)
				}
			}
			if len(got) != 1 {
				t.Fatalf("OnDecision called %d times", len(got))
			}
		})
	}
}

func TestDecisionIsACopy(t *testing.T) {
	c, _ := newTest(t, Config{})
	d, err := c.Rollback("bob")
	if err != nil {
		t.Fatal(err)
	}
	d.Reasons[0] = "changed"
	if s := c.Status(); s.Decision.Reasons[0] == "changed" {
		t.Fatal("the caller's decision shares memory with the canary's")
	}
}

// TestOnDecisionOutsideLock decides from many goroutines at once, with a callback that
// reads the canary: it must run once, and not under the canary's lock (or Status would
// deadlock).
func TestOnDecisionOutsideLock(t *testing.T) {
	c, clock := newTest(t, Config{MinCalls: 10})
	feed(c, Incumbent, 10, good)
	feed(c, Candidate, 9, good)
	clock.Advance(testWindow)
	var calls atomic.Int32
	var seen Status
	c.OnDecision(func(d Decision) {
		calls.Add(1)
		seen = c.Status()
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			c.Observe(Candidate, good(0))
			c.Check()
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnDecision called %d times, want 1", n)
	}
	if seen.State != Promoted || seen.Decision == nil {
		t.Fatalf("the callback saw %+v", seen)
	}
}

func TestConcurrentUse(t *testing.T) {
	c, clock := newTest(t, Config{Share: 0.5, MinCalls: 50})
	var decisions atomic.Int32
	c.OnDecision(func(Decision) { decisions.Add(1) })
	stop := make(chan struct{})
	var checker sync.WaitGroup
	checker.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				c.Check()
				_ = c.Status()
			}
		}
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				arm := c.Pick(key(g*2000 + i))
				c.Observe(arm, good(i))
				if i == 1000 && g == 0 {
					clock.Advance(testWindow)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	checker.Wait()
	c.Check()
	s := c.Status()
	if s.Incumbent.Calls+s.Candidate.Calls != 16000 {
		t.Fatalf("%d + %d calls observed, want 16000", s.Incumbent.Calls, s.Candidate.Calls)
	}
	if s.State != Promoted || decisions.Load() != 1 {
		t.Fatalf("state %v after %d decisions, want promoted once", s.State, decisions.Load())
	}
}

// Judge is the rule a canary decides by, with the thresholds' defaults.
func TestJudge(t *testing.T) {
	inc := Figures{Calls: 10, ViolationRate: 0}
	if rollback, reasons := Judge(inc, Figures{Calls: 10, ViolationRate: 0.03}, Thresholds{}); !rollback || len(reasons) != 5 {
		t.Fatalf("3 points over the default 2: rollback %v, reasons %q", rollback, reasons)
	}
	if rollback, _ := Judge(inc, Figures{Calls: 10, ViolationRate: 0.03}, Thresholds{ViolationRate: 0.05}); rollback {
		t.Fatal("3 points under a threshold of 5 rolled back")
	}
	if rollback, _ := Judge(inc, Figures{Calls: 10, ViolationRate: 0.01}, Thresholds{ViolationRate: 1e-9}); !rollback {
		t.Fatal("any worsening under a tiny threshold holds")
	}
}

// Restore puts a decision taken elsewhere in force, without announcing it again.
func TestRestore(t *testing.T) {
	c, _ := newTest(t, Config{Share: 0.3})
	calls := 0
	c.OnDecision(func(Decision) { calls++ })
	if c.Decided() {
		t.Fatal("a new canary is decided")
	}
	if err := c.Restore(Decision{State: Running}); err == nil {
		t.Fatal("restored a state that is no decision")
	}
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	if err := c.Restore(Decision{State: RolledBack, At: at, By: "auto", Reasons: []string{"violation rate 30.0% vs 1.0% (+29.0 points > 2.0)"}}); err != nil {
		t.Fatal(err)
	}
	s := c.Status()
	if !c.Decided() || s.State != RolledBack || s.Share != 0 || s.Decision == nil || !s.Decision.At.Equal(at) || s.Decision.By != "auto" || len(s.Decision.Reasons) != 1 {
		t.Fatalf("restored: %+v", s)
	}
	if c.Pick("any") != Incumbent || calls != 0 {
		t.Fatalf("after the restore: pick %v, OnDecision called %d times", c.Pick("any"), calls)
	}
	if err := c.Restore(Decision{State: RolledBack}); err != ErrDecided {
		t.Fatalf("restoring the decision in force: %v", err)
	}
	// Decided otherwise elsewhere first: the kept decision replaces this one's.
	if err := c.Restore(Decision{State: Promoted, By: "bob"}); err != nil || c.Status().State != Promoted || c.Pick("any") != Candidate {
		t.Fatalf("a kept decision over a local one: %v, %s", err, c.Status().State)
	}
}
