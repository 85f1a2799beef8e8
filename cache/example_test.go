package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/afloat-dev/afloat/cache"
	"github.com/jonboulle/clockwork"
)

func Example() {
	clock := clockwork.NewFakeClock()
	c, err := cache.New(cache.Options{MaxEntries: 10_000, Clock: clock})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	input, _ := json.Marshal(map[string]any{"subject": "Refund", "body": "I was charged twice"})
	k := cache.KeyOf("triage", "acme", input)
	// The model answered: keep the answer for a day.
	c.Put(ctx, k, cache.Entry{
		Value:         json.RawMessage(`{"queue":"billing","priority":"high"}`),
		PromptVersion: "triage/openai/v3",
		Provider:      "openai",
		At:            clock.Now(),
	}, 24*time.Hour)

	clock.Advance(2 * time.Hour)
	// Every tier failed: an answer up to 6h old will do.
	if e, ok := c.Get(ctx, k, 6*time.Hour); ok {
		fmt.Printf("%s by %s, %v old\n", e.Value, e.PromptVersion, clock.Since(e.At))
	}
	// Another tenant never gets acme's answer.
	if _, ok := c.Get(ctx, cache.KeyOf("triage", "globex", input), 6*time.Hour); !ok {
		fmt.Println("globex: miss")
	}
	fmt.Printf("%+v\n", c.Stats())
	// Output:
	// {"queue":"billing","priority":"high"} by triage/openai/v3, 2h0m0s old
	// globex: miss
	// {Hits:1 Misses:1 Expired:0 Evicted:0 RemoteErrors:0 RemoteDropped:0 RemoteHits:0}
}
