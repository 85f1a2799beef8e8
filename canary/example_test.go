package canary_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/afloat-dev/afloat/canary"
	"github.com/jonboulle/clockwork"
)

// A new prompt version gets 20% of the tenants for a day; it re-asks less but violates the
// contract on one first answer in four, so the canary rolls it back.
func Example() {
	clock := clockwork.NewFakeClock()
	c, err := canary.New(canary.Config{
		Share:    0.2,
		Window:   24 * time.Hour,
		MinCalls: 50,
		Salt:     "triage/prompt-v8",
		Clock:    clock,
	})
	if err != nil {
		panic(err)
	}
	c.OnDecision(func(d canary.Decision) {
		fmt.Printf("%s by %s:\n", d.State, d.By)
		for _, r := range d.Reasons {
			fmt.Println(" ", r)
		}
	})

	calls := map[canary.Arm]int{}
	for i := range 1000 {
		arm := c.Pick("tenant-" + strconv.Itoa(i%400))
		n := calls[arm]
		calls[arm]++
		o := canary.Observation{Latency: 800 * time.Millisecond, Cost: 0.002}
		if arm == canary.Candidate {
			o.Violation = n%4 == 0
		} else {
			o.Reask = n%10 == 0
		}
		c.Observe(arm, o)
		clock.Advance(time.Minute) // 1000 calls over 16h40m
	}
	fmt.Println(c.Status().State, "after", clock.Since(c.Status().Started))

	clock.Advance(8 * time.Hour)
	c.Check() // a ticker's: the window has passed
	fmt.Println("tenant-1 now gets the", c.Pick("tenant-1"))
	// Output:
	// running after 16h40m0s
	// rolled_back by auto:
	//   violation rate 25.4% vs 0.0% (+25.4 points > 2.0)
	//   re-ask rate 0.0% vs 10.1% (-10.1 points <= 5.0)
	//   failure rate 0.0% vs 0.0% (+0.0 points <= 5.0)
	//   p95 latency 800ms vs 800ms (+0.0% <= 25.0%)
	//   cost per answer 0.002 vs 0.002 (+0.0% <= 25.0%)
	// tenant-1 now gets the incumbent
}
