package canary

import (
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

const testWindow = time.Hour

// newTest returns a canary of share 0.1, window testWindow and MinCalls 100 on a fake
// clock, with cfg's other fields.
func newTest(t testing.TB, cfg Config) (*Canary, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	cfg.Clock = clock
	if cfg.Share == 0 {
		cfg.Share = 0.1
	}
	if cfg.Window == 0 {
		cfg.Window = testWindow
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

// good is an answer: valid at once, 100ms, cost 1.
func good(int) Observation { return Observation{Latency: 100 * time.Millisecond, Cost: 1} }

// violating returns observations of which perTen of every ten violate the contract.
func violating(perTen int) func(int) Observation {
	return func(i int) Observation {
		o := good(i)
		o.Violation = i%10 < perTen
		return o
	}
}

// feed observes n observations of arm made by obs.
func feed(c *Canary, arm Arm, n int, obs func(int) Observation) {
	for i := range n {
		c.Observe(arm, obs(i))
	}
}

// incumbent1pct is an incumbent that violates on 1 call of every 100.
func incumbent1pct(i int) Observation {
	o := good(i)
	o.Violation = i%100 == 0
	return o
}

func hasReason(d *Decision, prefix string) bool {
	for _, r := range d.Reasons {
		if strings.HasPrefix(r, prefix) && strings.Contains(r, " > ") {
			return true
		}
	}
	return false
}
