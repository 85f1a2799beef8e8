package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// The benchmarks measure the memory side, what every call pays; a Redis round trip is the
// network's. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 3 ./cache/

// benchInput is a call's canonical input of about 200 bytes.
func benchInput(i int) []byte {
	b, err := json.Marshal(map[string]any{
		"subject":  "Refund for order #" + fmt.Sprint(100000+i),
		"body":     "I was charged twice for the same order, please refund the second charge as soon as possible.",
		"customer": map[string]any{"id": "cus_8f2a91", "plan": "pro"},
		"lang":     "en",
	})
	if err != nil {
		panic(err)
	}
	return b
}

// benchValue is an answer of about 100 bytes.
func benchValue(i int) json.RawMessage {
	return fmt.Appendf(nil, `{"queue":"billing","priority":"high","lang":"en","tags":["refund","double-charge"],"confidence":0.%04d}`, i%10000)
}

func benchEntry(i int, at time.Time) Entry {
	return Entry{Value: benchValue(i), PromptVersion: "triage/openai/v3.12", Provider: "openai", Tier: 0, At: at}
}

func BenchmarkKeyOf(b *testing.B) {
	input := benchInput(0)
	b.ReportAllocs()
	b.SetBytes(int64(len(input)))
	for b.Loop() {
		KeyOf("triage", "acme", input)
	}
}

// newBenchCache returns a memory-only cache of max entries on the real clock, as in
// production: the fake clock's Now takes a lock of its own.
func newBenchCache(b *testing.B, max int) *Cache {
	c, err := New(Options{MaxEntries: max})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// fullCache returns a memory-only cache holding n entries, and their keys.
func fullCache(b *testing.B, n int) (*Cache, []Key) {
	c := newBenchCache(b, n)
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = KeyOf("triage", "acme", benchInput(i))
		c.Put(context.Background(), keys[i], benchEntry(i, time.Now()), time.Hour)
	}
	return c, keys
}

func BenchmarkGetHit(b *testing.B) {
	c, keys := fullCache(b, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := c.Get(ctx, keys[i%len(keys)], time.Hour); !ok {
			b.Fatal("miss")
		}
		i++
	}
}

// BenchmarkGetHitParallel is BenchmarkGetHit from every P at once: the cost of the one mutex.
func BenchmarkGetHitParallel(b *testing.B) {
	c, keys := fullCache(b, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Get(ctx, keys[i%len(keys)], time.Hour)
			i++
		}
	})
}

func BenchmarkGetMiss(b *testing.B) {
	c, _ := fullCache(b, 1024)
	ctx := context.Background()
	k := KeyOf("triage", "globex", benchInput(0))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Get(ctx, k, time.Hour); ok {
			b.Fatal("hit")
		}
	}
}

// BenchmarkPut puts new keys into a full cache, so that each Put evicts: the steady state of
// a busy cache. The value's copy is its allocation.
func BenchmarkPut(b *testing.B) {
	const n = 1 << 14
	c := newBenchCache(b, n)
	keys := make([]Key, 4*n)
	for i := range keys {
		keys[i] = KeyOf("triage", "acme", benchInput(i))
	}
	e := benchEntry(0, time.Now())
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Put(ctx, keys[i%len(keys)], e, time.Hour)
		i++
	}
}

// BenchmarkMemoryPerEntry reports the heap that one entry holds in a cache of 100,000: each a
// ~100-byte answer and a ~20-byte prompt version shared by all, as a prompt's version is.
func BenchmarkMemoryPerEntry(b *testing.B) {
	const n = 100_000
	at := time.Now()
	entries := make([]Entry, n)
	keys := make([]Key, n)
	for i := range entries {
		entries[i] = benchEntry(i, at)
		keys[i] = KeyOf("triage", "acme", benchInput(i))
	}
	ctx := context.Background()
	var perEntry float64
	runs := 0
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c, err := New(Options{MaxEntries: n})
		if err != nil {
			b.Fatal(err)
		}
		for i := range entries {
			c.Put(ctx, keys[i], entries[i], 24*time.Hour)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.Len() != n {
			b.Fatalf("Len() = %d, want %d", c.Len(), n)
		}
		perEntry += float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(c)
		runs++
	}
	b.ReportMetric(perEntry/float64(runs), "B/entry")
	b.ReportMetric(float64(len(benchValue(0))), "value-B")
}
