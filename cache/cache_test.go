package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newTestCache returns a memory-only Cache of max entries on a fake clock at epoch.
func newTestCache(t testing.TB, max int) (*Cache, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(epoch)
	c, err := New(Options{MaxEntries: max, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clock
}

func entry(value string, at time.Time) Entry {
	return Entry{
		Value:         json.RawMessage(value),
		PromptVersion: "triage/openai/v3",
		Provider:      "openai",
		Tier:          1,
		At:            at,
	}
}

func testKey(i int) Key { return KeyOf("triage", "acme", fmt.Appendf(nil, `{"n":%d}`, i)) }

// recency returns the keys in memory, the most recently used first.
func (c *Cache) recency() []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []Key
	for n := c.mem.root.next; n != &c.mem.root; n = n.next {
		keys = append(keys, n.key)
	}
	return keys
}

func wantStats(t *testing.T, c *Cache, want Stats) {
	t.Helper()
	if got := c.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestNewRejectsMaxEntries(t *testing.T) {
	for _, max := range []int{0, -1} {
		if _, err := New(Options{MaxEntries: max}); err == nil {
			t.Errorf("New(MaxEntries: %d): no error", max)
		}
	}
}

func TestGetHitMiss(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	want := entry(`{"queue":"billing"}`, clock.Now())
	c.Put(ctx, testKey(1), want, time.Hour)

	got, ok := c.Get(ctx, testKey(1), time.Minute)
	if !ok {
		t.Fatal("Get of the key put: miss")
	}
	if !bytes.Equal(got.Value, want.Value) || got.PromptVersion != want.PromptVersion ||
		got.Provider != want.Provider || got.Tier != want.Tier || !got.At.Equal(want.At) {
		t.Errorf("Get = %+v, want %+v", got, want)
	}
	if _, ok := c.Get(ctx, testKey(2), time.Minute); ok {
		t.Error("Get of a key never put: hit")
	}
	if c.Len() != 1 {
		t.Errorf("Len() = %d, want 1", c.Len())
	}
	wantStats(t, c, Stats{Hits: 1, Misses: 1})
}

func TestPutZeroAtIsNow(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	c.Put(ctx, testKey(1), entry(`{}`, time.Time{}), time.Hour)
	got, ok := c.Get(ctx, testKey(1), 0)
	if !ok || !got.At.Equal(clock.Now()) {
		t.Errorf("Get = %+v, %v; want At %v", got, ok, clock.Now())
	}
}

func TestPutReplaces(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	c.Put(ctx, testKey(1), entry(`{"v":1}`, clock.Now()), time.Hour)
	c.Put(ctx, testKey(1), entry(`{"v":2}`, clock.Now()), time.Hour)
	got, _ := c.Get(ctx, testKey(1), time.Hour)
	if string(got.Value) != `{"v":2}` || c.Len() != 1 {
		t.Errorf("after two Puts: Get = %s, Len() = %d; want {\"v\":2}, 1", got.Value, c.Len())
	}
}

func TestTenantsNeverShare(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	input := []byte(`{"body":"I was charged twice","subject":"Refund"}`)
	a, b := KeyOf("triage", "tenant-a", input), KeyOf("triage", "tenant-b", input)
	if a == b {
		t.Fatal("KeyOf gives tenants a and b the same key")
	}
	c.Put(ctx, a, entry(`{"queue":"billing"}`, clock.Now()), time.Hour)
	if _, ok := c.Get(ctx, b, time.Hour); ok {
		t.Error("tenant b got tenant a's answer")
	}
	if _, ok := c.Get(ctx, a, time.Hour); !ok {
		t.Error("tenant a missed its own answer")
	}
	if _, ok := c.Get(ctx, KeyOf("triage", "", input), time.Hour); ok {
		t.Error("no tenant got tenant a's answer")
	}
}

func TestScopesNeverShare(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	input := []byte(`{"text":"hello"}`)
	c.Put(ctx, KeyOf("triage", "acme", input), entry(`{"queue":"billing"}`, clock.Now()), time.Hour)
	if _, ok := c.Get(ctx, KeyOf("summarize", "acme", input), time.Hour); ok {
		t.Error("scope summarize got scope triage's answer")
	}
}

func TestAgeBoundary(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	const maxAge = 10 * time.Minute
	c.Put(ctx, testKey(1), entry(`{}`, clock.Now()), time.Hour)

	clock.Advance(maxAge)
	if _, ok := c.Get(ctx, testKey(1), maxAge); !ok {
		t.Fatal("an entry exactly maxAge old: miss")
	}
	clock.Advance(time.Nanosecond)
	if _, ok := c.Get(ctx, testKey(1), maxAge); ok {
		t.Fatal("an entry maxAge+1ns old: hit")
	}
	// Dropped: not even a longer maxAge finds it now.
	if c.Len() != 0 {
		t.Errorf("Len() = %d after the too old entry was found, want 0", c.Len())
	}
	if _, ok := c.Get(ctx, testKey(1), time.Hour); ok {
		t.Error("the too old entry was served after it was dropped")
	}
	wantStats(t, c, Stats{Hits: 1, Misses: 2, Expired: 1})
}

func TestTTLExpiry(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	c.Put(ctx, testKey(1), entry(`{}`, clock.Now()), 10*time.Minute)

	clock.Advance(10*time.Minute - time.Nanosecond)
	if _, ok := c.Get(ctx, testKey(1), 24*time.Hour); !ok {
		t.Fatal("an entry 1ns before its ttl ends: miss")
	}
	clock.Advance(time.Nanosecond)
	if _, ok := c.Get(ctx, testKey(1), 24*time.Hour); ok {
		t.Fatal("an entry whose ttl ended: hit, though maxAge allows it")
	}
	if c.Len() != 0 {
		t.Errorf("Len() = %d, want 0", c.Len())
	}
	wantStats(t, c, Stats{Hits: 1, Misses: 1, Expired: 1})
}

// The ttl runs from At, not from the Put: an answer put late does not live longer.
func TestTTLFromAt(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	c.Put(ctx, testKey(1), entry(`{}`, clock.Now().Add(-50*time.Minute)), time.Hour)
	clock.Advance(10 * time.Minute)
	if _, ok := c.Get(ctx, testKey(1), 24*time.Hour); ok {
		t.Error("an entry At+ttl after At: hit")
	}

	for _, tc := range []struct {
		name string
		at   time.Time
		ttl  time.Duration
	}{
		{"ttl 0", clock.Now(), 0},
		{"ttl negative", clock.Now(), -time.Second},
		{"At older than ttl", clock.Now().Add(-2 * time.Hour), time.Hour},
	} {
		c.Put(ctx, testKey(2), entry(`{}`, tc.at), tc.ttl)
		if c.Len() != 0 {
			t.Errorf("%s: Put stored an expired entry", tc.name)
		}
	}
}

func TestLRUEviction(t *testing.T) {
	c, clock := newTestCache(t, 3)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		c.Put(ctx, testKey(i), entry(`{}`, clock.Now()), time.Hour)
	}
	if _, ok := c.Get(ctx, testKey(1), time.Hour); !ok { // 1 is now the most recently used
		t.Fatal("miss before MaxEntries was reached")
	}
	c.Put(ctx, testKey(4), entry(`{}`, clock.Now()), time.Hour) // evicts 2
	if got, want := c.recency(), []Key{testKey(4), testKey(1), testKey(3)}; !slices.Equal(got, want) {
		t.Errorf("after the 4th Put: keys by recency %x, want %x", got, want)
	}
	c.Put(ctx, testKey(5), entry(`{}`, clock.Now()), time.Hour) // evicts 3
	if _, ok := c.Get(ctx, testKey(2), time.Hour); ok {
		t.Error("2, the least recently used at the 4th Put, was not evicted")
	}
	if _, ok := c.Get(ctx, testKey(3), time.Hour); ok {
		t.Error("3, the least recently used at the 5th Put, was not evicted")
	}
	for _, i := range []int{1, 4, 5} {
		if _, ok := c.Get(ctx, testKey(i), time.Hour); !ok {
			t.Errorf("%d was evicted", i)
		}
	}
	if c.Len() != 3 {
		t.Errorf("Len() = %d, want MaxEntries 3", c.Len())
	}
	wantStats(t, c, Stats{Hits: 4, Misses: 2, Evicted: 2})
}

func TestPutCopiesValue(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	buf := []byte(`{"queue":"billing"}`)
	c.Put(ctx, testKey(1), Entry{Value: buf, At: clock.Now()}, time.Hour)
	copy(buf, `{"queue":"spammer"}`)

	got, _ := c.Get(ctx, testKey(1), time.Hour)
	if string(got.Value) != `{"queue":"billing"}` {
		t.Fatalf("Get = %s after the caller reused its slice, want the value put", got.Value)
	}
	// A reader's append must copy rather than write where the next reader reads.
	if cap(got.Value) != len(got.Value) {
		t.Errorf("stored Value has cap %d > len %d", cap(got.Value), len(got.Value))
	}
	_ = append(got.Value, "garbage"...)
	if again, _ := c.Get(ctx, testKey(1), time.Hour); string(again.Value) != `{"queue":"billing"}` {
		t.Errorf("Get = %s after a reader appended, want the value put", again.Value)
	}
}

func TestConcurrentGetPut(t *testing.T) {
	const (
		goroutines = 8
		ops        = 2000
		keys       = 64
	)
	c, clock := newTestCache(t, keys/2) // evictions as well
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 0))
			for range ops {
				i := r.IntN(keys)
				if r.IntN(2) == 0 {
					c.Put(ctx, testKey(i), entry(fmt.Sprintf(`{"n":%d}`, i), clock.Now()), time.Hour)
					continue
				}
				if e, ok := c.Get(ctx, testKey(i), time.Hour); ok && string(e.Value) != fmt.Sprintf(`{"n":%d}`, i) {
					t.Errorf("Get of key %d = %s", i, e.Value)
				}
			}
		})
	}
	wg.Go(func() {
		for range ops {
			clock.Advance(time.Millisecond)
			_ = c.Len()
			_ = c.Stats()
		}
	})
	wg.Wait()
	s := c.Stats()
	if n := c.Len(); n > keys/2 {
		t.Errorf("Len() = %d > MaxEntries %d", n, keys/2)
	}
	if s.Hits == 0 || s.Evicted == 0 {
		t.Errorf("Stats() = %+v: the test did not exercise hits and evictions", s)
	}
	if got := len(c.recency()); got != c.Len() {
		t.Errorf("the recency list holds %d entries, the map %d", got, c.Len())
	}
}

func TestCloseWithoutRedis(t *testing.T) {
	c, clock := newTestCache(t, 10)
	ctx := context.Background()
	if err := c.Flush(ctx); err != nil {
		t.Errorf("Flush() = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	c.Put(ctx, testKey(1), entry(`{}`, clock.Now()), time.Hour)
	if _, ok := c.Get(ctx, testKey(1), time.Hour); !ok {
		t.Error("Get after Close: miss")
	}
	if s := c.Stats(); s.RemoteDropped != 0 {
		t.Errorf("RemoteDropped = %d without Redis", s.RemoteDropped)
	}
}
