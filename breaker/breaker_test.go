package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
)

func TestStateNames(t *testing.T) {
	tests := []struct {
		state State
		name  string
		value int
	}{
		{StateClosed, "closed", 0},
		{StateHalfOpen, "half-open", 1},
		{StateOpen, "open", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.state.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			if int(tt.state) != tt.value {
				t.Errorf("value = %d, want %d (afloat_circuit_state)", int(tt.state), tt.value)
			}
			got, err := ParseState(tt.name)
			if err != nil || got != tt.state {
				t.Errorf("ParseState(%q) = %v, %v; want %v", tt.name, got, err, tt.state)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		if _, err := ParseState("half_open"); err == nil {
			t.Error("ParseState(half_open) succeeded, want an error")
		}
		if got := State(7).String(); got != "state(7)" {
			t.Errorf("State(7).String() = %q", got)
		}
	})
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		bname   string
		cfg     Config
		wantErr string // empty: valid
	}{
		{"zero config", "p", Config{}, ""},
		{"full config", "p", Config{ConsecutiveFailures: 3, FailureRate: 1, Window: time.Minute, MinCalls: 5,
			Recovery: time.Second, MaxRecovery: time.Second, Growth: 2, Jitter: 0.5, UnusableCooldown: time.Hour, ProbeTimeout: time.Second}, ""},
		{"empty name", "", Config{}, "empty name"},
		{"negative consecutive", "p", Config{ConsecutiveFailures: -1}, "consecutive failures -1 is negative"},
		{"negative min calls", "p", Config{MinCalls: -2}, "min calls -2 is negative"},
		{"rate above 1", "p", Config{FailureRate: 1.5}, "failure rate 1.5 is outside (0, 1]"},
		{"negative rate", "p", Config{FailureRate: -0.1}, "failure rate -0.1 is outside (0, 1]"},
		{"negative window", "p", Config{Window: -time.Second}, "window -1s is negative"},
		{"negative recovery", "p", Config{Recovery: -time.Second}, "recovery -1s is negative"},
		{"negative cooldown", "p", Config{UnusableCooldown: -time.Second}, "unusable cooldown -1s is negative"},
		{"negative probe timeout", "p", Config{ProbeTimeout: -time.Second}, "probe timeout -1s is negative"},
		{"growth below 1", "p", Config{Growth: 0.5}, "growth 0.5 is below 1 or not finite"},
		{"growth NaN", "p", Config{Growth: math.NaN()}, "growth NaN is below 1 or not finite"},
		{"growth infinite", "p", Config{Growth: math.Inf(1)}, "growth +Inf is below 1 or not finite"},
		{"growth 1", "p", Config{Growth: 1}, ""},
		{"negative jitter", "p", Config{Jitter: -0.1}, "jitter -0.1 is outside [0, 1)"},
		{"jitter 1", "p", Config{Jitter: 1}, "jitter 1 is outside [0, 1)"},
		{"jitter NaN", "p", Config{Jitter: math.NaN()}, "jitter NaN is outside [0, 1)"},
		{"max below recovery", "p", Config{Recovery: time.Minute, MaxRecovery: time.Second}, "max recovery 1s is shorter than recovery 1m0s"},
		{"recovery above default max", "p", Config{Recovery: 10 * time.Minute}, "max recovery 5m0s is shorter than recovery 10m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(tt.bname, tt.cfg)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.wantErr == "" && b.Name() != tt.bname:
				t.Errorf("Name() = %q, want %q", b.Name(), tt.bname)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	b, clock, _ := newTest(t, Config{})
	calls(t, b, DefaultConsecutiveFailures, errUnavailable)
	snap := b.Snapshot(context.Background())
	if snap.State != StateOpen || snap.Until.Sub(clock.Now()) != DefaultRecovery || snap.Recovery != DefaultRecovery {
		t.Errorf("after %d failures: %+v, want open for %v", DefaultConsecutiveFailures, snap, DefaultRecovery)
	}
}

func TestTripsOnConsecutiveFailures(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"unavailable", errUnavailable},
		{"throttled", throttled(0)},
		{"unclassified error", errors.New("connection refused")},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded)},
		{"wrapped provider error", fmt.Errorf("tier 0: %w", errUnavailable)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _, rec := newTest(t, Config{ConsecutiveFailures: 3})
			calls(t, b, 2, tt.err)
			wantState(t, b, StateClosed)
			calls(t, b, 1, tt.err)
			wantState(t, b, StateOpen)
			if err := call(b, nil); !errors.Is(err, ErrOpen) {
				t.Errorf("Allow when open = %v, want ErrOpen", err)
			}
			if ev := rec.list(); len(ev) != 1 || ev[0].Kind != afloat.KindOf(tt.err) {
				t.Errorf("events = %+v, want one opening of kind %v", ev, afloat.KindOf(tt.err))
			}
		})
	}
}

func TestRowEndsOnSuccess(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"success", nil},
		{"bad request", errBadRequest},
		{"contract violation", errViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _, _ := newTest(t, Config{ConsecutiveFailures: 3})
			calls(t, b, 2, errUnavailable)
			calls(t, b, 1, tt.err)
			calls(t, b, 2, errUnavailable)
			wantState(t, b, StateClosed)
			calls(t, b, 1, errUnavailable)
			wantState(t, b, StateOpen)
		})
	}
}

func TestTripsOnFailureRate(t *testing.T) {
	type step struct {
		n       int
		err     error
		advance time.Duration // before the calls
	}
	tests := []struct {
		name  string
		steps []step
		want  State
	}{
		{"all failures below min calls", []step{{n: 9, err: errUnavailable}}, StateClosed},
		{"all failures at min calls", []step{{n: 10, err: errUnavailable}}, StateOpen},
		{"rate reached at min calls", []step{{n: 5, err: nil}, {n: 5, err: errUnavailable}}, StateOpen},
		{"rate just below", []step{{n: 6, err: nil}, {n: 5, err: errUnavailable}}, StateClosed},
		{"contract violations are successes", []step{{n: 6, err: errViolation}, {n: 5, err: errUnavailable}}, StateClosed},
		{"rate reached past min calls", []step{{n: 20, err: nil}, {n: 20, err: errUnavailable}}, StateOpen},
		{"old successes slide out", []step{{n: 6, err: nil}, {n: 5, err: errUnavailable, advance: 10 * time.Second}}, StateClosed},
		{"old successes slid out", []step{{n: 6, err: nil}, {n: 9, err: errUnavailable, advance: 31 * time.Second}}, StateClosed},
		{"new failures fill the window", []step{{n: 6, err: nil}, {n: 10, err: errUnavailable, advance: 31 * time.Second}}, StateOpen},
		{"old failures slide out", []step{{n: 9, err: errUnavailable}, {n: 9, err: nil, advance: 31 * time.Second}, {n: 1, err: errUnavailable}}, StateClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A long consecutive threshold leaves the rate alone to trip the breaker.
			b, clock, _ := newTest(t, Config{ConsecutiveFailures: 1000, FailureRate: 0.5, MinCalls: 10, Window: 30 * time.Second})
			for _, s := range tt.steps {
				clock.Advance(s.advance)
				calls(t, b, s.n, s.err)
			}
			wantState(t, b, tt.want)
		})
	}
}

func TestContractNeverTrips(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"400", errBadRequest},
		{"404 wrapped", fmt.Errorf("gigachat: %w", &afloat.ProviderError{Status: 404, Kind: afloat.Contract})},
		{"contract violation", errViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _, rec := newTest(t, Config{ConsecutiveFailures: 2, MinCalls: 2})
			calls(t, b, 50, tt.err)
			wantState(t, b, StateClosed)
			if ev := rec.list(); len(ev) != 0 {
				t.Errorf("events = %+v, want none", ev)
			}
		})
	}
}

func TestUnusableOpensForCooldown(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, b *Breaker, clock interface{ Advance(time.Duration) })
	}{
		{"first call", nil},
		{"after failures in a row", func(t *testing.T, b *Breaker, _ interface{ Advance(time.Duration) }) {
			calls(t, b, 2, errUnavailable)
		}},
		{"failed probe", func(t *testing.T, b *Breaker, clock interface{ Advance(time.Duration) }) {
			openAndWait(t, b, 3, clock)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, rec := newTest(t, Config{ConsecutiveFailures: 3, Recovery: 10 * time.Second, UnusableCooldown: 5 * time.Minute})
			if tt.setup != nil {
				tt.setup(t, b, clock)
			}
			before := len(rec.list())
			calls(t, b, 1, errUnusable)
			now := clock.Now()
			if snap := b.Snapshot(context.Background()); snap.State != StateOpen || snap.Until != now.Add(5*time.Minute) {
				t.Fatalf("after an unusable failure: %+v, want open until +5m", snap)
			}
			var openings []Event
			for _, e := range rec.list()[before:] {
				if e.To == StateOpen {
					openings = append(openings, e)
				}
			}
			if len(openings) != 1 || openings[0].Kind != afloat.Unusable {
				t.Errorf("openings = %+v, want one of kind unusable", openings)
			}
			clock.Advance(5*time.Minute - time.Nanosecond)
			if err := call(b, nil); !errors.Is(err, ErrOpen) {
				t.Errorf("Allow before the cooldown ended = %v, want ErrOpen", err)
			}
			clock.Advance(time.Nanosecond)
			if err := call(b, nil); err != nil {
				t.Errorf("Allow when the cooldown ended = %v, want the probe admitted", err)
			}
			wantState(t, b, StateClosed)
		})
	}
}

func TestThrottledRetryAfterExtendsOpenPeriod(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter time.Duration
		probe      bool // the failure is a failed probe (Recovery grows to 15s first)
		wantOpen   time.Duration
	}{
		{"longer than recovery", 2 * time.Minute, false, 2 * time.Minute},
		{"shorter than recovery", 5 * time.Second, false, 10 * time.Second},
		{"none named", 0, false, 10 * time.Second},
		{"failed probe, longer", 3 * time.Minute, true, 3 * time.Minute},
		{"failed probe, shorter", 12 * time.Second, true, 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, _ := newTest(t, Config{ConsecutiveFailures: 2, Recovery: 10 * time.Second})
			if tt.probe {
				calls(t, b, 2, errUnavailable)
				clock.Advance(10 * time.Second)
			} else {
				calls(t, b, 1, errUnavailable)
			}
			calls(t, b, 1, throttled(tt.retryAfter))
			snap := b.Snapshot(context.Background())
			if snap.State != StateOpen || snap.Until.Sub(clock.Now()) != tt.wantOpen {
				t.Fatalf("snapshot = %+v, want open for %v", snap, tt.wantOpen)
			}
			clock.Advance(tt.wantOpen - time.Nanosecond)
			if err := call(b, nil); !errors.Is(err, ErrOpen) {
				t.Errorf("Allow just before the end = %v, want ErrOpen", err)
			}
			clock.Advance(time.Nanosecond)
			if err := call(b, nil); err != nil {
				t.Errorf("Allow at the end = %v, want the probe admitted", err)
			}
		})
	}
}

// openAndWait trips b with n failures and advances the clock past the open period.
func openAndWait(t *testing.T, b *Breaker, n int, clock interface{ Advance(time.Duration) }) {
	t.Helper()
	calls(t, b, n, errUnavailable)
	wantState(t, b, StateOpen)
	clock.Advance(b.Snapshot(context.Background()).Until.Sub(b.clock.Now()))
	wantState(t, b, StateHalfOpen)
}

func TestHalfOpenAdmitsExactlyOneOfManyConcurrentCallers(t *testing.T) {
	b, clock, rec := newTest(t, Config{ConsecutiveFailures: 1})
	openAndWait(t, b, 1, clock)
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted []Permit
		refused  int
	)
	startLine := make(chan struct{})
	for range 100 {
		wg.Go(func() {
			<-startLine
			p, err := b.Allow(ctx)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted = append(admitted, p)
			case errors.Is(err, ErrOpen):
				refused++
			default:
				t.Errorf("Allow: %v", err)
			}
		})
	}
	close(startLine)
	wg.Wait()
	if len(admitted) != 1 || refused != 99 {
		t.Fatalf("admitted %d, refused %d; want 1 and 99", len(admitted), refused)
	}
	halfOpens := 0
	for _, e := range rec.list() {
		if e.To == StateHalfOpen {
			halfOpens++
		}
	}
	if halfOpens != 1 {
		t.Errorf("%d events to half-open, want 1", halfOpens)
	}
	admitted[0].Done(ctx, nil)
	wantState(t, b, StateClosed)
}

func TestProbeFailuresGrowRecoveryUpToMax(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	tests := []struct {
		name          string
		recovery, max time.Duration
		growth        float64
		want          []time.Duration // open period after each failed probe
	}{
		{"capped", 10 * time.Second, 35 * time.Second, 0, []time.Duration{15 * time.Second, 22500 * time.Millisecond, 33750 * time.Millisecond, 35 * time.Second, 35 * time.Second}},
		{"max equals recovery", 10 * time.Second, 10 * time.Second, 0, []time.Duration{10 * time.Second, 10 * time.Second}},
		{"growth 2", 10 * time.Second, time.Minute, 2, []time.Duration{20 * time.Second, 40 * time.Second, time.Minute, time.Minute}},
		{"growth 1 keeps recovery", 10 * time.Second, time.Minute, 1, []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second}},
		{"defaults", 0, 0, 0, []time.Duration{15 * time.Second, 22500 * time.Millisecond, 33750 * time.Millisecond,
			ms(50625), ms(75937.5), ms(113906.25), ms(170859.375), ms(256289.0625), 5 * time.Minute, 5 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, _ := newTest(t, Config{ConsecutiveFailures: 1, Recovery: tt.recovery, MaxRecovery: tt.max, Growth: tt.growth})
			openAndWait(t, b, 1, clock)
			for i, want := range tt.want {
				calls(t, b, 1, errUnavailable) // the probe fails
				snap := b.Snapshot(context.Background())
				if snap.State != StateOpen || snap.Until.Sub(clock.Now()) != want || snap.Recovery != want {
					t.Fatalf("after failed probe %d: %+v, want open for %v", i+1, snap, want)
				}
				clock.Advance(want)
			}
		})
	}
}

func TestGoodProbeCloses(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"success", nil},
		{"contract violation", errViolation},
		{"bad request", errBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, _ := newTest(t, Config{ConsecutiveFailures: 3})
			openAndWait(t, b, 3, clock)
			calls(t, b, 1, tt.err)
			wantState(t, b, StateClosed)
			// Counts start again: two failures do not trip a breaker that needs three.
			calls(t, b, 2, errUnavailable)
			wantState(t, b, StateClosed)
		})
	}
}

func TestRecoveryResetsAfterSuccessInClosedState(t *testing.T) {
	tests := []struct {
		name     string
		success  bool // a success follows the closing
		wantOpen time.Duration
	}{
		{"success after closing resets", true, 10 * time.Second},
		{"no success keeps the grown period", false, 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, _ := newTest(t, Config{ConsecutiveFailures: 2, Recovery: 10 * time.Second})
			openAndWait(t, b, 2, clock)
			calls(t, b, 1, errUnavailable) // failed probe: 15s
			clock.Advance(15 * time.Second)
			calls(t, b, 1, nil) // good probe
			if snap := b.Snapshot(context.Background()); snap.State != StateClosed || snap.Recovery != 15*time.Second {
				t.Fatalf("after the good probe: %+v, want closed with recovery 15s", snap)
			}
			if tt.success {
				calls(t, b, 1, nil)
			}
			calls(t, b, 2, errUnavailable)
			snap := b.Snapshot(context.Background())
			if snap.State != StateOpen || snap.Until.Sub(clock.Now()) != tt.wantOpen {
				t.Fatalf("after tripping again: %+v, want open for %v", snap, tt.wantOpen)
			}
		})
	}
}

func TestUnreportedProbeFreesAfterProbeTimeout(t *testing.T) {
	b, clock, _ := newTest(t, Config{ConsecutiveFailures: 1, ProbeTimeout: 20 * time.Second})
	openAndWait(t, b, 1, clock)
	ctx := context.Background()
	lost, err := b.Allow(ctx)
	if err != nil {
		t.Fatalf("first probe: %v", err)
	}
	clock.Advance(20*time.Second - time.Nanosecond)
	if _, err := b.Allow(ctx); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow while the probe is out = %v, want ErrOpen", err)
	}
	clock.Advance(time.Nanosecond)
	second, err := b.Allow(ctx)
	if err != nil {
		t.Fatalf("Allow after the probe timeout = %v, want a second probe", err)
	}
	if _, err := b.Allow(ctx); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow while the second probe is out = %v, want ErrOpen", err)
	}
	// The lost probe's Cancel must not free the slot the second probe holds.
	lost.Cancel(ctx)
	if _, err := b.Allow(ctx); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow after the lost probe's Cancel = %v, want ErrOpen", err)
	}
	second.Done(ctx, nil)
	wantState(t, b, StateClosed)
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	t.Run("frees the probe slot", func(t *testing.T) {
		b, clock, rec := newTest(t, Config{ConsecutiveFailures: 1})
		openAndWait(t, b, 1, clock)
		p, err := b.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Allow(ctx); !errors.Is(err, ErrOpen) {
			t.Fatalf("second Allow = %v, want ErrOpen", err)
		}
		p.Cancel(ctx)
		wantState(t, b, StateHalfOpen)
		if _, err := b.Allow(ctx); err != nil {
			t.Fatalf("Allow after Cancel = %v, want the probe admitted", err)
		}
		if n := len(rec.list()); n != 2 {
			t.Errorf("%d events, want 2 (closed→open, open→half-open)", n)
		}
	})
	t.Run("records nothing", func(t *testing.T) {
		b, _, _ := newTest(t, Config{ConsecutiveFailures: 2})
		calls(t, b, 1, errUnavailable)
		p, err := b.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Cancel(ctx) // were it a success, the row would restart
		calls(t, b, 1, errUnavailable)
		wantState(t, b, StateOpen)
	})
}

func TestOutcomeOfEarlierStateMovesNothing(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"unavailable", errUnavailable},
		{"throttled with a long wait", throttled(time.Hour)},
		{"unusable", errUnusable},
		{"success", nil},
		{"contract", errBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, rec := newTest(t, Config{ConsecutiveFailures: 2, Recovery: 10 * time.Second})
			ctx := context.Background()
			var late []Permit
			for range 5 {
				p, err := b.Allow(ctx)
				if err != nil {
					t.Fatal(err)
				}
				late = append(late, p)
			}
			calls(t, b, 2, errUnavailable)
			before := b.Snapshot(ctx)
			for _, p := range late {
				p.Done(ctx, tt.err)
			}
			if after := b.Snapshot(ctx); after != before {
				t.Fatalf("late outcomes moved the breaker: %+v, was %+v", after, before)
			}
			if n := len(rec.list()); n != 1 {
				t.Fatalf("%d events, want 1", n)
			}
			// The growth starts from Recovery, not from anything the late outcomes did.
			clock.Advance(10 * time.Second)
			calls(t, b, 1, errUnavailable)
			if snap := b.Snapshot(ctx); snap.Until.Sub(clock.Now()) != 15*time.Second {
				t.Errorf("after a failed probe: %+v, want open for 15s", snap)
			}
		})
	}
}

func TestEvents(t *testing.T) {
	var b *Breaker
	var got []Event
	var seen []State // b.State() as the callback sees it
	onChange := func(e Event) {
		got = append(got, e)
		seen = append(seen, b.State(context.Background()))
	}
	b, clock, _ := newTest(t, Config{ConsecutiveFailures: 2, Recovery: 10 * time.Second, OnStateChange: onChange})
	calls(t, b, 2, throttled(0))
	t1 := clock.Now()
	clock.Advance(10 * time.Second)
	calls(t, b, 1, errUnavailable) // half-open, then a failed probe
	t2 := clock.Now()
	clock.Advance(15 * time.Second)
	calls(t, b, 1, nil) // half-open, then a good probe
	t3 := clock.Now()

	want := []Event{
		{Name: "p", From: StateClosed, To: StateOpen, At: t1, Kind: afloat.Throttled, Until: t1.Add(10 * time.Second)},
		{Name: "p", From: StateOpen, To: StateHalfOpen, At: t2},
		{Name: "p", From: StateHalfOpen, To: StateOpen, At: t2, Kind: afloat.Unavailable, Until: t2.Add(15 * time.Second)},
		{Name: "p", From: StateOpen, To: StateHalfOpen, At: t3},
		{Name: "p", From: StateHalfOpen, To: StateClosed, At: t3},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
		if seen[i] != want[i].To {
			t.Errorf("event %d: State() in the callback = %v, want %v", i, seen[i], want[i].To)
		}
	}
}

func TestEventCallbackMayChangeState(t *testing.T) {
	var b *Breaker
	var got []string
	onChange := func(e Event) {
		got = append(got, fmt.Sprintf("%v→%v forced=%t", e.From, e.To, e.Forced))
		if e.To == StateOpen && !e.Forced {
			if err := b.Force(context.Background(), StateClosed); err != nil {
				t.Errorf("Force in the callback: %v", err)
			}
		}
	}
	b, _, _ = newTest(t, Config{ConsecutiveFailures: 1, OnStateChange: onChange})
	calls(t, b, 1, errUnavailable)
	want := []string{"closed→open forced=false", "open→closed forced=true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	wantState(t, b, StateClosed)
}

func TestForce(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		setup     func(t *testing.T, b *Breaker)
		force     State
		wantSnap  Snapshot // Since is checked against the clock; Until as an offset below
		wantOpen  time.Duration
		wantEvent string
	}{
		{"open a closed breaker", nil, StateOpen, Snapshot{State: StateOpen, Recovery: 10 * time.Second}, 10 * time.Second, "closed→open"},
		{"open an open breaker again", func(t *testing.T, b *Breaker) { calls(t, b, 1, errUnusable) },
			StateOpen, Snapshot{State: StateOpen, Recovery: 10 * time.Second}, 10 * time.Second, ""},
		{"close an open breaker", func(t *testing.T, b *Breaker) { calls(t, b, 3, errUnavailable) },
			StateClosed, Snapshot{State: StateClosed, Recovery: 10 * time.Second}, 0, "open→closed"},
		{"half-open an open breaker", func(t *testing.T, b *Breaker) { calls(t, b, 3, errUnavailable) },
			StateHalfOpen, Snapshot{State: StateHalfOpen, Recovery: 10 * time.Second}, 0, "open→half-open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, rec := newTest(t, Config{ConsecutiveFailures: 3, Recovery: 10 * time.Second})
			if tt.setup != nil {
				tt.setup(t, b)
			}
			clock.Advance(time.Second)
			before := len(rec.list())
			if err := b.Force(ctx, tt.force); err != nil {
				t.Fatalf("Force: %v", err)
			}
			want := tt.wantSnap
			want.Since = clock.Now()
			if tt.wantOpen != 0 {
				want.Until = clock.Now().Add(tt.wantOpen)
			}
			if got := b.Snapshot(ctx); got != want {
				t.Errorf("snapshot = %+v, want %+v", got, want)
			}
			events := rec.list()[before:]
			switch {
			case tt.wantEvent == "" && len(events) != 0:
				t.Errorf("events = %+v, want none", events)
			case tt.wantEvent != "" && (len(events) != 1 || !events[0].Forced ||
				fmt.Sprintf("%v→%v", events[0].From, events[0].To) != tt.wantEvent):
				t.Errorf("events = %+v, want one forced %s", events, tt.wantEvent)
			}
		})
	}

	t.Run("forced open probes after recovery", func(t *testing.T) {
		b, clock, _ := newTest(t, Config{Recovery: 10 * time.Second})
		if err := b.Force(ctx, StateOpen); err != nil {
			t.Fatal(err)
		}
		if err := call(b, nil); !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow = %v, want ErrOpen", err)
		}
		clock.Advance(10 * time.Second)
		calls(t, b, 1, nil)
		wantState(t, b, StateClosed)
	})
	t.Run("close resets counts and recovery", func(t *testing.T) {
		b, clock, _ := newTest(t, Config{ConsecutiveFailures: 3, Recovery: 10 * time.Second})
		openAndWait(t, b, 3, clock)
		calls(t, b, 1, errUnavailable) // failed probe: 20s
		if err := b.Force(ctx, StateClosed); err != nil {
			t.Fatal(err)
		}
		calls(t, b, 2, errUnavailable)
		wantState(t, b, StateClosed)
		calls(t, b, 1, errUnavailable)
		if snap := b.Snapshot(ctx); snap.Until.Sub(clock.Now()) != 10*time.Second {
			t.Errorf("after tripping: %+v, want open for 10s", snap)
		}
	})
	t.Run("unknown state", func(t *testing.T) {
		b, _, _ := newTest(t, Config{})
		if err := b.Force(ctx, State(3)); err == nil {
			t.Error("Force(State(3)) succeeded, want an error")
		}
		wantState(t, b, StateClosed)
	})
}

func TestDisabledNeverOpens(t *testing.T) {
	b, clock, rec := newTest(t, Config{Disabled: true, ConsecutiveFailures: 1})
	ctx := context.Background()
	for _, err := range []error{errUnavailable, errUnusable, throttled(time.Hour), errors.New("boom")} {
		calls(t, b, 10, err)
	}
	clock.Advance(time.Minute)
	wantState(t, b, StateClosed)
	if n := len(rec.list()); n != 0 {
		t.Errorf("%d events, want none", n)
	}
	if err := b.Force(ctx, StateOpen); err == nil {
		t.Error("Force on a disabled breaker succeeded, want an error")
	}
	wantState(t, b, StateClosed)
}

func TestZeroPermitDoesNothing(t *testing.T) {
	var p Permit
	p.Done(context.Background(), errUnavailable)
	p.Cancel(context.Background())
	if p != (Permit{}) {
		t.Errorf("zero permit changed: %+v", p)
	}
}

func TestBreakersShareAStore(t *testing.T) {
	store := NewMemoryStore()
	clock := newTestClock()
	var replicas []*Breaker
	for range 2 {
		b, err := New("p", Config{Clock: clock, Store: store, ConsecutiveFailures: 4, Recovery: 10 * time.Second, Rand: noJitter})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, b)
	}
	a, b := replicas[0], replicas[1]
	calls(t, a, 2, errUnavailable)
	calls(t, b, 2, errUnavailable) // the fourth failure in a row, across the fleet
	wantState(t, a, StateOpen)
	if err := call(a, nil); !errors.Is(err, ErrOpen) {
		t.Fatalf("replica a: Allow = %v, want ErrOpen", err)
	}
	clock.Advance(10 * time.Second)
	ctx := context.Background()
	probe, err := a.Allow(ctx)
	if err != nil {
		t.Fatalf("replica a: probe: %v", err)
	}
	if _, err := b.Allow(ctx); !errors.Is(err, ErrOpen) {
		t.Fatalf("replica b: Allow while a probes = %v, want ErrOpen", err)
	}
	probe.Done(ctx, nil)
	wantState(t, b, StateClosed)
}

func TestStoreFailureServesFromLocalState(t *testing.T) {
	store := &flakyStore{MemoryStore: NewMemoryStore()}
	clock := newTestClock()
	b, err := New("p", Config{Clock: clock, Store: store, ConsecutiveFailures: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls(t, b, 1, nil)
	if n := b.StoreErrors(); n != 0 {
		t.Fatalf("StoreErrors = %d while the store works", n)
	}

	store.fail.Store(true)
	calls(t, b, 2, errUnavailable) // each Allow fails over to the local state
	if err := call(b, nil); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow with the store down after 2 failures = %v, want ErrOpen (local state)", err)
	}
	wantState(t, b, StateOpen)
	if n := b.StoreErrors(); n < 3 {
		t.Errorf("StoreErrors = %d, want at least 3", n)
	}
	if err := b.Force(ctx, StateClosed); err == nil || !errors.Is(err, errStoreDown) {
		t.Errorf("Force with the store down = %v, want the store's error", err)
	}
	wantState(t, b, StateClosed) // forced locally all the same

	store.fail.Store(false)
	rec, _ := store.Load(ctx, "p")
	if rec.State != StateClosed {
		t.Fatalf("shared record = %+v, want closed (it never saw the failures)", rec)
	}
	errs := b.StoreErrors()
	calls(t, b, 2, errUnavailable)
	if rec, _ := store.Load(ctx, "p"); rec.State != StateOpen {
		t.Errorf("shared record after 2 failures = %+v, want open", rec)
	}
	if b.StoreErrors() != errs {
		t.Errorf("StoreErrors moved from %d to %d with the store back", errs, b.StoreErrors())
	}
}

func TestDoneRecordsAfterTheCallContextEnded(t *testing.T) {
	store := &flakyStore{MemoryStore: NewMemoryStore()}
	b, err := New("p", Config{Clock: newTestClock(), Store: store, ConsecutiveFailures: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		p, err := b.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cancel() // the call timed out
		p.Done(ctx, errUnavailable)
	}
	if rec, _ := store.Load(context.Background(), "p"); rec.State != StateOpen {
		t.Errorf("record = %+v, want open", rec)
	}
	if n := b.StoreErrors(); n != 0 {
		t.Errorf("StoreErrors = %d, want 0", n)
	}
}

func TestConcurrentCallsKeepEventsInOrder(t *testing.T) {
	b, clock, rec := newTest(t, Config{ConsecutiveFailures: 3, MinCalls: 10, Recovery: 10 * time.Second, MaxRecovery: 10 * time.Second})
	outcomes := []error{errUnavailable, nil, throttled(0), errBadRequest, errUnavailable, errUnusable}
	for round := range 20 {
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Go(func() {
				for i := range 10 {
					_ = call(b, outcomes[(round+g+i)%len(outcomes)])
				}
			})
		}
		wg.Go(func() { _ = b.State(context.Background()) })
		wg.Wait()
		clock.Advance(5 * time.Minute)
	}
	events := rec.list()
	if len(events) < 3 {
		t.Fatalf("only %d events: the load did not move the breaker", len(events))
	}
	from := StateClosed
	for i, e := range events {
		if e.From != from || e.From == e.To {
			t.Fatalf("event %d goes %v→%v, after a change to %v", i, e.From, e.To, from)
		}
		from = e.To
	}
}
