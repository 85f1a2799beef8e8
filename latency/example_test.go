package latency_test

import (
	"fmt"
	"time"

	"github.com/afloat-dev/afloat/latency"
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
