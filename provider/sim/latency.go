package sim

import (
	"fmt"
	"math"
	"time"
)

// z95 is the standard normal's 95th percentile: a log-normal's p95 is exp(mu + z95*sigma).
const z95 = 1.6448536269514722

// lognormal is a latency distribution fitted to a p50 and a p95. The zero value is no latency.
type lognormal struct {
	mu, sigma float64
	on        bool
}

func fitLognormal(p50, p95 time.Duration) (lognormal, error) {
	switch {
	case p50 < 0 || p95 < 0:
		return lognormal{}, fmt.Errorf("latency p50 %v and p95 %v must not be negative", p50, p95)
	case p50 == 0 && p95 == 0:
		return lognormal{}, nil
	case p50 == 0:
		return lognormal{}, fmt.Errorf("latency p50 is 0 while p95 is %v", p95)
	case p95 < p50:
		return lognormal{}, fmt.Errorf("latency p95 %v is less than p50 %v", p95, p50)
	}
	mu := math.Log(float64(p50))
	return lognormal{mu: mu, sigma: (math.Log(float64(p95)) - mu) / z95, on: true}, nil
}

// at returns the latency at standard normal deviate z.
func (l lognormal) at(z float64) time.Duration {
	if !l.on {
		return 0
	}
	ns := math.Exp(l.mu + l.sigma*z)
	if ns >= math.MaxInt64 { // a far tail of a wide distribution
		return math.MaxInt64
	}
	return time.Duration(math.Round(ns)) // so P50 == P95 gives exactly that latency
}
