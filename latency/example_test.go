package latency_test

import (
	"context"
	"fmt"
	"time"

	"github.com/afloat-dev/afloat/latency"
	"github.com/jonboulle/clockwork"
)

func ExampleEstimator() {
	est, err := latency.NewEstimator(latency.Config{MinSamples: 5})
	if err != nil {
		panic(err)
	}
	fmt.Println("before any call:", est.ReadTimeout())
	for _, ms := range []time.Duration{420, 380, 510, 450, 400} {
		est.Observe(ms * time.Millisecond)
	}
	p95, _ := est.Percentile()
	fmt.Println("p95:", p95.Round(10*time.Millisecond))
	fmt.Println("read timeout:", est.ReadTimeout().Round(10*time.Millisecond))
	// Output:
	// before any call: 2s
	// p95: 450ms
	// read timeout: 680ms
}

func ExampleAttemptTimeout() {
	clk := clockwork.NewFakeClock()
	ctx, cancel := latency.WithBudget(context.Background(), clk, 3*time.Second)
	defer cancel()

	const read, useful = 2 * time.Second, 500 * time.Millisecond
	fmt.Println(latency.AttemptTimeout(ctx, clk, read, useful))
	clk.Advance(2 * time.Second) // the first attempt timed out
	fmt.Println(latency.AttemptTimeout(ctx, clk, read, useful))
	clk.Advance(600 * time.Millisecond) // a retry failed fast
	fmt.Println(latency.AttemptTimeout(ctx, clk, read, useful))
	// Output:
	// 2s true
	// 1s true
	// 400ms false
}
