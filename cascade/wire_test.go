package cascade

import (
	"context"
	"net/http/httptrace"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/shed"
)

// onTheWire is a provider that is an HTTP client as far as the transport's hooks tell: it asks
// for a connection, waits before (begin) its connect begins, or never begins it (begin < 0),
// and then hangs, as a provider that never answers.
func onTheWire(begin time.Duration) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
		tr := httptrace.ContextClientTrace(ctx)
		if tr == nil {
			panic("the attempt's context has no client trace")
		}
		tr.GetConn("provider.example:443")
		if begin >= 0 {
			select {
			case <-time.After(begin):
				tr.ConnectStart("tcp", "127.0.0.1:443")
			case <-ctx.Done():
			}
		}
		return hang(ctx, req, n)
	}
}

// tenCalls makes ten calls of task and fails the test with what wrong says of a call's first
// attempt, unless it says "".
func tenCalls(t *testing.T, task *Task, wrong func(afloat.Attempt) string) {
	t.Helper()
	for range 10 {
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if msg := wrong(res.Attempts[0]); msg != "" {
			t.Fatalf("attempts %+v: %s", res.Attempts, msg)
		}
	}
}

// TestCutBeforeTheNetworkIsNotBlamed: an attempt whose request never reached the network (it
// asked its transport for a connection, and no connect began) was cut in afloat's own wait:
// it is not blamed, however often. The same hang with its connect begun at once is the
// provider's, and its breaker opens.
func TestCutBeforeTheNetworkIsNotBlamed(t *testing.T) {
	for _, reached := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			begin := time.Duration(-1)
			if reached {
				begin = 0
			}
			fx := newFixture(t, realClock, onTheWire(begin), answer(validAnswer))
			task := fx.task(t, func(c *TaskConfig) { c.Budget = 3 * time.Second })
			tenCalls(t, task, func(a afloat.Attempt) string {
				if !reached && (a.Outcome != afloat.OutcomeDeadline || a.Error != "cut before its request reached the provider") {
					return "never reached the network: want p0 cut in afloat's own wait"
				}
				if reached && a.Outcome != afloat.OutcomeTimeout && a.Outcome != afloat.OutcomeCircuitOpen {
					return "connected at once: want p0's own timeout"
				}
				return ""
			})
			want := 0.0
			if reached {
				want = 1
			}
			if got := opened(fx, "p0"); got != want {
				t.Errorf("request reached the network %v: p0's breaker opened %v times; want %v", reached, got, want)
			}
		})
	}
}

// TestLateConnectIsJudgedOnWhatTheProviderHad: goroutines wait 470 ms to run (shedding off),
// under a quarter of p0's 2 s read timeout. A connect that began at once and hung is the
// provider's: its breaker opens. A connect that began only after 1.4 s, as under an
// overloaded gateway, left the provider 600 ms, and a wait of 470 ms is more than a quarter of
// that: the cut is afloat's, and no breaker opens.
func TestLateConnectIsJudgedOnWhatTheProviderHad(t *testing.T) {
	for _, begin := range []time.Duration{0, 1400 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			fx := newFixture(t, func(c *Config) {
				realClock(c)
				c.Shed = shed.New(0, func() time.Duration { return 470 * time.Millisecond })
			}, onTheWire(begin), answer(validAnswer))
			task := fx.task(t, func(c *TaskConfig) { c.Budget = 3 * time.Second })
			tenCalls(t, task, func(a afloat.Attempt) string {
				if begin > 0 && (a.Outcome != afloat.OutcomeDeadline || !strings.HasPrefix(a.Error, "cut while afloat itself was saturated")) {
					return "connect after 1.4s: want p0 cut while afloat was saturated"
				}
				return ""
			})
			want := 0.0
			if begin == 0 {
				want = 1
			}
			if got := opened(fx, "p0"); got != want {
				t.Errorf("connect after %v: p0's breaker opened %v times; want %v", begin, got, want)
			}
		})
	}
}

// TestALateHookMarksItsOwnTry: a retry reuses the attempt, and a hook of the try before it may
// run late (the transport's dial outlives the request it was made for). Try 0 fails at once
// with a 503 and its connect begins only once try 1 has started; try 1 never reaches the
// network and is cut. The late connect is try 0's: try 1 is still cut in afloat's own wait.
func TestALateHookMarksItsOwnTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		late := make(chan struct{})
		p0 := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			tr := httptrace.ContextClientTrace(ctx)
			tr.GetConn("provider.example:443")
			if n == 0 {
				go func() {
					<-started
					tr.ConnectStart("tcp", "127.0.0.1:443")
					close(late)
				}()
				return nil, &afloat.ProviderError{Provider: "p0", Status: 503, Kind: afloat.Unavailable}
			}
			close(started)
			<-late
			return hang(ctx, req, n)
		}
		fx := newFixture(t, realClock, p0, answer(validAnswer))
		task := fx.task(t, func(c *TaskConfig) { c.Budget = 3 * time.Second })
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Attempts) < 2 || res.Attempts[1].Provider != "p0" || res.Attempts[1].Outcome != afloat.OutcomeDeadline ||
			res.Attempts[1].Error != "cut before its request reached the provider" {
			t.Fatalf("attempts %+v; want p0's retry cut in afloat's own wait", res.Attempts)
		}
	})
}
