package latency

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"
)

// waitDone fails the test unless ctx is done soon: the fake clock's timer cancels it from
// another goroutine. The real-time bound only guards against a hang.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not done")
	}
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func TestWithBudgetTakesTheEarlierDeadline(t *testing.T) {
	clk := clockwork.NewFakeClock()
	start := clk.Now()
	tests := []struct {
		name   string
		parent time.Duration // 0: no parent budget
		budget time.Duration
		want   time.Duration
	}{
		{"no parent deadline", 0, 3 * time.Second, 3 * time.Second},
		{"parent earlier", 2 * time.Second, 5 * time.Second, 2 * time.Second},
		{"parent later", 8 * time.Second, 5 * time.Second, 5 * time.Second},
		{"equal", 4 * time.Second, 4 * time.Second, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := context.Background()
			if tt.parent > 0 {
				var cancel context.CancelFunc
				parent, cancel = WithBudget(parent, clk, tt.parent)
				defer cancel()
			}
			ctx, cancel := WithBudget(parent, clk, tt.budget)
			defer cancel()
			d, ok := FromContext(ctx)
			if !ok {
				t.Fatal("FromContext: no Deadline")
			}
			if got := d.At().Sub(start); got != tt.want {
				t.Errorf("At() = start+%v, want start+%v", got, tt.want)
			}
			if got, _ := ctx.Deadline(); !got.Equal(d.At()) {
				t.Errorf("ctx.Deadline() = %v, want %v", got, d.At())
			}
			if got := d.Remaining(); got != tt.want {
				t.Errorf("Remaining() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWithBudgetCancelledWhenFakeClockPasses(t *testing.T) {
	clk := clockwork.NewFakeClock()
	ctx, cancel := WithBudget(context.Background(), clk, time.Second)
	defer cancel()
	d, _ := FromContext(ctx)

	clk.Advance(999 * time.Millisecond)
	if isDone(ctx) || ctx.Err() != nil { // Err must answer at once on a live context
		t.Fatal("context done before its deadline")
	}
	if got := d.Remaining(); got != time.Millisecond {
		t.Errorf("Remaining() = %v, want 1ms", got)
	}
	clk.Advance(time.Millisecond)
	waitDone(t, ctx)
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() = %v, want DeadlineExceeded", err)
	}
	clk.Advance(time.Second)
	if got := d.Remaining(); got != 0 {
		t.Errorf("Remaining() after the deadline = %v, want 0", got)
	}
}

func TestWithBudgetCancellation(t *testing.T) {
	tests := []struct {
		name    string
		clk     clockwork.Clock
		budget  time.Duration
		act     func(cancelParent, cancel context.CancelFunc)
		wantErr error
	}{
		{"fake: cancel func", clockwork.NewFakeClock(), time.Second,
			func(_, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"fake: parent cancelled", clockwork.NewFakeClock(), time.Second,
			func(cancelParent, _ context.CancelFunc) { cancelParent() }, context.Canceled},
		{"fake: zero budget", clockwork.NewFakeClock(), 0,
			func(_, _ context.CancelFunc) {}, context.DeadlineExceeded},
		{"fake: negative budget", clockwork.NewFakeClock(), -time.Second,
			func(_, _ context.CancelFunc) {}, context.DeadlineExceeded},
		{"real: cancel func", nil, time.Hour,
			func(_, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"real: parent cancelled", clockwork.NewRealClock(), time.Hour,
			func(cancelParent, _ context.CancelFunc) { cancelParent() }, context.Canceled},
		{"real: zero budget", nil, 0,
			func(_, _ context.CancelFunc) {}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancelParent := context.WithCancel(context.Background())
			defer cancelParent()
			ctx, cancel := WithBudget(parent, tt.clk, tt.budget)
			defer cancel()
			tt.act(cancelParent, cancel)
			waitDone(t, ctx)
			if err := ctx.Err(); !errors.Is(err, tt.wantErr) {
				t.Errorf("Err() = %v, want %v", err, tt.wantErr)
			}
			cancel() // idempotent
			if err := ctx.Err(); !errors.Is(err, tt.wantErr) {
				t.Errorf("Err() after a second cancel = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestWithBudgetChildSeesDeadlineExceeded(t *testing.T) {
	clk := clockwork.NewFakeClock()
	ctx, cancel := WithBudget(context.Background(), clk, time.Second)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	clk.Advance(time.Second)
	waitDone(t, child)
	if err := child.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("child Err() = %v, want DeadlineExceeded", err)
	}
}

func TestFromContext(t *testing.T) {
	clk := clockwork.NewFakeClock()
	start := clk.Now()
	budget, cancel := WithBudget(context.Background(), clk, 5*time.Second)
	defer cancel()
	narrower, cancelNarrower := WithBudget(budget, clk, time.Second)
	defer cancelNarrower()
	// A plain context.WithDeadline under the budget (an HTTP client's timeout, say): its
	// earlier deadline is the one that counts. It runs on real time, where the fake clock's
	// start has long passed, so it is done already; FromContext reads its deadline all the same.
	earlier, cancelEarlier := context.WithDeadline(budget, start.Add(2*time.Second))
	defer cancelEarlier()
	later, cancelLater := context.WithDeadline(budget, start.Add(10*time.Second))
	defer cancelLater()
	tests := []struct {
		name   string
		ctx    context.Context
		wantOK bool
		want   time.Duration // At - start
	}{
		{"background", context.Background(), false, 0},
		{"budget", budget, true, 5 * time.Second},
		{"derived value context", context.WithValue(budget, struct{}{}, 1), true, 5 * time.Second},
		{"narrower budget", narrower, true, time.Second},
		{"earlier child deadline", earlier, true, 2 * time.Second},
		{"later child deadline", later, true, 5 * time.Second},
		{"without cancel", context.WithoutCancel(budget), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := FromContext(tt.ctx)
			if ok != tt.wantOK {
				t.Fatalf("FromContext ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && d.At().Sub(start) != tt.want {
				t.Errorf("At() = start+%v, want start+%v", d.At().Sub(start), tt.want)
			}
		})
	}
	if got := (Deadline{}).Remaining(); got != 0 {
		t.Errorf("zero Deadline Remaining() = %v, want 0", got)
	}
}

// TestCancelLeavesNoTimer: once cancel returns, the fake clock holds no timer of the
// context's, also while the parent's cancellation, on another goroutine, has closed Done but
// not yet stopped the timer (a test that counted the clock's timers after a Close saw one
// left behind).
func TestCancelLeavesNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clockwork.NewFakeClock()
		inWindow, release := make(chan struct{}), make(chan struct{})
		testAfterDone = func() {
			close(inWindow)
			<-release
		}
		var released sync.Once
		defer func() {
			released.Do(func() { close(release) })
			testAfterDone = nil
		}()
		parent, cancelParent := context.WithCancel(context.Background())
		ctx, cancel := WithBudget(parent, clk, time.Hour)
		cancelParent()
		<-inWindow // the parent's cancellation has closed Done; its timer is still armed
		<-ctx.Done()
		returned := make(chan struct{})
		go func() {
			cancel()
			close(returned)
		}()
		synctest.Wait()
		gone, stop := context.WithCancel(context.Background())
		stop()
		select {
		case <-returned:
			if clk.BlockUntilContext(gone, 1) == nil {
				t.Fatal("cancel returned with the context's timer still on the clock")
			}
		default: // cancel waits for the timer to be stopped
		}
		released.Do(func() { close(release) })
		<-returned
		if clk.BlockUntilContext(gone, 1) == nil {
			t.Fatal("a timer is left on the clock after cancel returned")
		}
	})
}
