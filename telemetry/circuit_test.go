package telemetry

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat/breaker"
)

const circuitHeader = `
# HELP afloat_circuit_state State of a provider's circuit breaker: 0 closed, 1 half-open, 2 open.
# TYPE afloat_circuit_state gauge
`

// TestCircuitStateHalfOpenAtScrape: a breaker whose open period is over reads half-open at
// the next scrape, with no call in between to move it.
func TestCircuitStateHalfOpenAtScrape(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClock()
	br, err := breaker.New("primary", breaker.Config{Clock: clock, Recovery: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m.CircuitState.Watch("primary", func() float64 { return float64(br.State(context.Background())) })
	m.InitProvider("primary") // after Watch, as cascade.New does: it must keep the func
	m.InitProvider("backup")  // never watched: exported at 0

	scrape := func(primary float64) {
		t.Helper()
		want := circuitHeader + `afloat_circuit_state{provider="backup"} 0
afloat_circuit_state{provider="primary"} ` + strconv.FormatFloat(primary, 'g', -1, 64) + "\n"
		if err := testutil.CollectAndCompare(m.CircuitState, strings.NewReader(want)); err != nil {
			t.Fatal(err)
		}
		if got := m.CircuitState.Value("primary"); got != primary {
			t.Fatalf("Value = %v, want %v", got, primary)
		}
	}
	scrape(0)
	if err := br.Force(context.Background(), breaker.StateOpen); err != nil {
		t.Fatal(err)
	}
	scrape(2)
	clock.Advance(29 * time.Second)
	scrape(2)
	clock.Advance(time.Second)
	scrape(1)
}

func TestCircuitStates(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *CircuitStates)
		want  string
	}{
		{
			name:  "none",
			setup: func(*CircuitStates) {},
			want:  "",
		},
		{
			name:  "init alone reads 0",
			setup: func(c *CircuitStates) { c.Init("p") },
			want:  `afloat_circuit_state{provider="p"} 0`,
		},
		{
			name: "watch before init is kept",
			setup: func(c *CircuitStates) {
				c.Watch("p", func() float64 { return 2 })
				c.Init("p")
			},
			want: `afloat_circuit_state{provider="p"} 2`,
		},
		{
			name: "watch after init replaces the zero",
			setup: func(c *CircuitStates) {
				c.Init("p")
				c.Watch("p", func() float64 { return 1 })
			},
			want: `afloat_circuit_state{provider="p"} 1`,
		},
		{
			name: "a later watch replaces the earlier",
			setup: func(c *CircuitStates) {
				c.Watch("p", func() float64 { return 2 })
				c.Watch("p", func() float64 { return 0 })
			},
			want: `afloat_circuit_state{provider="p"} 0`,
		},
		{
			name:  "nil func reads 0",
			setup: func(c *CircuitStates) { c.Watch("p", nil) },
			want:  `afloat_circuit_state{provider="p"} 0`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCircuitStates()
			tc.setup(c)
			want := ""
			if tc.want != "" {
				want = circuitHeader + tc.want + "\n"
			}
			if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
				t.Fatal(err)
			}
		})
	}
	if got := newCircuitStates().Value("unknown"); got != 0 {
		t.Fatalf("Value of an unknown provider = %v, want 0", got)
	}
}

// TestCircuitStatesReentrant: a state func may call Watch (Collect holds no lock while it
// runs); with the lock held this test deadlocks.
func TestCircuitStatesReentrant(t *testing.T) {
	c := newCircuitStates()
	c.Watch("p", func() float64 {
		c.Watch("q", func() float64 { return 1 })
		return 2
	})
	done := make(chan int)
	go func() { done <- testutil.CollectAndCount(c) }()
	select {
	case n := <-done:
		if n != 1 {
			t.Fatalf("%d series, want 1 (q was watched during the scrape)", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Collect deadlocked: it holds its lock while a state func runs")
	}
	if got := c.Value("q"); got != 1 {
		t.Fatalf("q = %v, want 1", got)
	}
}

// TestCircuitStatesConcurrent: Watch, Init and Value while scrapes collect (run with -race).
func TestCircuitStatesConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				p := string(rune('a' + (i*200+j)%26))
				m.InitProvider(p)
				m.CircuitState.Watch(p, func() float64 { return float64(j % 3) })
				_ = m.CircuitState.Value(p)
			}
		})
		wg.Go(func() {
			for range 50 {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := testutil.CollectAndCount(m.CircuitState); n != 26 {
		t.Fatalf("%d series, want 26", n)
	}
}
