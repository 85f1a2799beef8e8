package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/jonboulle/clockwork"
)

func Example() {
	clock := clockwork.NewFakeClock()
	b, err := breaker.New("gigachat-pro", breaker.Config{
		ConsecutiveFailures: 2,
		Recovery:            30 * time.Second,
		Clock:               clock,
		OnStateChange:       func(e breaker.Event) { fmt.Printf("%s: %v → %v\n", e.Name, e.From, e.To) },
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	down := &afloat.ProviderError{Provider: "gigachat-pro", Status: 503, Kind: afloat.Unavailable}
	for range 3 {
		p, err := b.Allow(ctx)
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Println("skipped: circuit open")
			continue
		}
		p.Done(ctx, down) // the provider's answer
	}
	clock.Advance(36 * time.Second) // Recovery and its jitter (±20%) have passed
	p, err := b.Allow(ctx)          // the one probe
	if err != nil {
		panic(err)
	}
	p.Done(ctx, nil)
	fmt.Println(b.State(ctx))
	// Output:
	// gigachat-pro: closed → open
	// skipped: circuit open
	// gigachat-pro: open → half-open
	// gigachat-pro: half-open → closed
	// closed
}
