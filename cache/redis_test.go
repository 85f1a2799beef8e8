package cache

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// testRedisURL returns AFLOAT_REDIS_URL, or skips the test when it is unset outside CI.
func testRedisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("AFLOAT_REDIS_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("AFLOAT_REDIS_URL is unset, and CI must run the tests against a real Redis")
		}
		t.Skip("AFLOAT_REDIS_URL is unset: set it (redis://127.0.0.1:6379/0) to run the tests against a real Redis")
	}
	return u
}

// newTestRedis returns a client of the Redis of AFLOAT_REDIS_URL and a key prefix of the
// test's own, whose keys are deleted when the test ends.
func newTestRedis(t *testing.T) (redis.UniversalClient, string) {
	t.Helper()
	opts, err := redis.ParseURL(testRedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "afloat-test-" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		defer rdb.Close()
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("deleting the test's keys: %v", err)
		}
	})
	return rdb, prefix
}

// newRedisCache returns a Cache over rdb, closed when the test ends.
func newRedisCache(t *testing.T, rdb redis.UniversalClient, prefix string, clock clockwork.Clock, log *slog.Logger) *Cache {
	t.Helper()
	c, err := New(Options{MaxEntries: 100, Redis: rdb, Prefix: prefix, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func flush(t *testing.T, c *Cache) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
}

// logBuffer collects a logger's lines; it is safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLog() (*slog.Logger, *logBuffer) {
	b := new(logBuffer)
	return slog.New(slog.NewTextHandler(b, nil)), b
}

func TestRedisShared(t *testing.T) {
	rdb, prefix := newTestRedis(t)
	clock := clockwork.NewFakeClockAt(epoch)
	a := newRedisCache(t, rdb, prefix, clock, nil)
	b := newRedisCache(t, rdb, prefix, clock, nil)
	ctx := context.Background()
	k := testKey(1)
	want := entry(`{"queue": "billing"}`, clock.Now())
	a.Put(ctx, k, want, time.Hour)
	flush(t, a)

	raw := prefix + "cache:" + hex.EncodeToString(k[:])
	if ttl, err := rdb.PTTL(ctx, raw).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("PTTL %s = %v, %v; want just under 1h", raw, ttl, err)
	}
	got, ok := b.Get(ctx, k, time.Minute)
	if !ok {
		t.Fatal("Get in the second cache: miss")
	}
	if !bytes.Equal(got.Value, want.Value) || got.PromptVersion != want.PromptVersion ||
		got.Provider != want.Provider || got.Tier != want.Tier || !got.At.Equal(want.At) {
		t.Errorf("Get = %+v, want %+v", got, want)
	}
	if b.Len() != 1 {
		t.Errorf("Len() = %d after a Redis hit, want 1: kept in memory", b.Len())
	}
	if _, ok := b.Get(ctx, k, time.Minute); !ok {
		t.Error("second Get: miss")
	}
	wantStats(t, b, Stats{Hits: 2, RemoteHits: 1})
	if _, ok := b.Get(ctx, testKey(2), time.Minute); ok {
		t.Error("Get of a key never put: hit")
	}
	wantStats(t, b, Stats{Hits: 2, Misses: 1, RemoteHits: 1})
}

func TestRedisTooOld(t *testing.T) {
	rdb, prefix := newTestRedis(t)
	clock := clockwork.NewFakeClockAt(epoch)
	a := newRedisCache(t, rdb, prefix, clock, nil)
	b := newRedisCache(t, rdb, prefix, clock, nil)
	ctx := context.Background()
	a.Put(ctx, testKey(1), entry(`{}`, clock.Now().Add(-2*time.Hour)), 24*time.Hour)
	flush(t, a)

	if _, ok := b.Get(ctx, testKey(1), time.Hour); ok {
		t.Fatal("an entry 2h old in Redis served under maxAge 1h")
	}
	if b.Len() != 0 {
		t.Errorf("Len() = %d: the too old entry was kept in memory", b.Len())
	}
	wantStats(t, b, Stats{Misses: 1, Expired: 1})
	if _, ok := b.Get(ctx, testKey(1), 3*time.Hour); !ok {
		t.Error("the same entry under maxAge 3h: miss")
	}
}

// Redis keeps an entry for what is left of its ttl from At, as memory does.
func TestRedisTTLFromAt(t *testing.T) {
	rdb, prefix := newTestRedis(t)
	clock := clockwork.NewFakeClockAt(epoch)
	a := newRedisCache(t, rdb, prefix, clock, nil)
	ctx := context.Background()
	k := testKey(1)
	a.Put(ctx, k, entry(`{}`, clock.Now().Add(-50*time.Minute)), time.Hour)
	flush(t, a)
	raw := prefix + "cache:" + hex.EncodeToString(k[:])
	if ttl, err := rdb.PTTL(ctx, raw).Result(); err != nil || ttl <= 9*time.Minute || ttl > 10*time.Minute {
		t.Errorf("PTTL = %v, %v; want just under 10m", ttl, err)
	}
}

func TestRedisCloseWritesQueued(t *testing.T) {
	rdb, prefix := newTestRedis(t)
	clock := clockwork.NewFakeClockAt(epoch)
	a := newRedisCache(t, rdb, prefix, clock, nil)
	ctx := context.Background()
	const n = 200
	for i := range n {
		a.Put(ctx, testKey(i), entry(`{}`, clock.Now()), time.Hour)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	keys, err := rdb.Keys(ctx, prefix+"cache:*").Result()
	if err != nil || len(keys) != n {
		t.Errorf("after Close: %d keys in Redis (%v), want %d", len(keys), err, n)
	}
	a.Put(ctx, testKey(n), entry(`{}`, clock.Now()), time.Hour)
	if s := a.Stats(); s.RemoteDropped != 1 {
		t.Errorf("a Put after Close: RemoteDropped = %d, want 1", s.RemoteDropped)
	}
}

func TestRedisUndecodable(t *testing.T) {
	rdb, prefix := newTestRedis(t)
	log, logs := newLog()
	b := newRedisCache(t, rdb, prefix, clockwork.NewFakeClockAt(epoch), log)
	ctx := context.Background()
	k := testKey(1)
	if err := rdb.Set(ctx, prefix+"cache:"+hex.EncodeToString(k[:]), `{"secret":"garbage"}`, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Get(ctx, k, time.Hour); ok {
		t.Fatal("an undecodable entry: hit")
	}
	wantStats(t, b, Stats{Misses: 1, RemoteErrors: 1})
	if out := logs.String(); !strings.Contains(out, "undecodable") || strings.Contains(out, "secret") {
		t.Errorf("log = %q: want the failure, without the content", out)
	}
}

// closedAddr returns an address of 127.0.0.1 that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// With Redis down, the cache serves from memory, misses fast, counts, and logs once.
func TestRemoteRefused(t *testing.T) {
	// No retries, so the test waits for no backoff; Get is bounded whatever the options.
	rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	log, logs := newLog()
	clock := clockwork.NewFakeClockAt(epoch)
	c := newRedisCache(t, rdb, "afloat:", clock, log)
	ctx := context.Background()

	start := time.Now()
	if _, ok := c.Get(ctx, testKey(1), time.Hour); ok {
		t.Fatal("Get with Redis down: hit")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Get with Redis down took %v", d)
	}
	const puts = 10
	start = time.Now()
	for i := range puts {
		c.Put(ctx, testKey(i), entry(`{"secret":"answer"}`, clock.Now()), time.Hour)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("%d Puts with Redis down took %v", puts, d)
	}
	flush(t, c)
	if _, ok := c.Get(ctx, testKey(1), time.Hour); !ok {
		t.Error("Get of an entry put with Redis down: miss, want it from memory")
	}
	if _, ok := c.Get(ctx, testKey(99), time.Hour); ok {
		t.Error("Get of an entry never put: hit")
	}
	// That last miss did not read Redis, which failed a moment ago (readBackoff): the
	// errors are still the first read's and the writes'.
	wantStats(t, c, Stats{Hits: 1, Misses: 2, RemoteErrors: 1 + puts})
	out := logs.String()
	if n := strings.Count(out, "redis failing"); n != 1 {
		t.Errorf("log has %d lines of redis failing, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "secret") {
		t.Errorf("log has a value's content:\n%s", out)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}

// hungAddr returns an address that accepts connections and never answers.
func hungAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // the kernel completes the handshakes; nothing reads
	return l.Addr().String()
}

// With Redis hung, Get is bounded by its own timeout, Put drops what the queue cannot hold,
// and Close gives up after its bound.
func TestRemoteHung(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: hungAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	clock := clockwork.NewFakeClockAt(epoch)
	c := newRedisCache(t, rdb, "afloat:", clock, nil)
	ctx := context.Background()

	start := time.Now()
	if _, ok := c.Get(ctx, testKey(1), time.Hour); ok {
		t.Fatal("Get with Redis hung: hit")
	}
	if d := time.Since(start); d < readTimeout || d > time.Second {
		t.Errorf("Get with Redis hung took %v, want about %v", d, readTimeout)
	}
	wantStats(t, c, Stats{Misses: 1, RemoteErrors: 1})

	const extra = 100
	start = time.Now()
	for i := range queueSize + extra {
		c.Put(ctx, testKey(i), entry(`{}`, clock.Now()), time.Hour)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("%d Puts with Redis hung took %v", queueSize+extra, d)
	}
	// The writer holds at most one write; the queue holds queueSize.
	if s := c.Stats(); s.RemoteDropped < extra-1 {
		t.Errorf("RemoteDropped = %d, want at least %d", s.RemoteDropped, extra-1)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := c.Flush(fctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush with Redis hung = %v, want DeadlineExceeded", err)
	}
	start = time.Now()
	if err := c.Close(); err == nil {
		t.Error("Close with the writes stuck: nil")
	}
	if d := time.Since(start); d > closeTimeout+time.Second {
		t.Errorf("Close took %v, want about %v", d, closeTimeout)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

// Past maxReads reads in flight (each held by a hung Redis), Get does not read Redis.
func TestRemoteReadsBounded(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	c := newRedisCache(t, rdb, "afloat:", clockwork.NewFakeClockAt(epoch), nil)
	for range maxReads {
		c.reads <- struct{}{}
	}
	if _, ok := c.Get(context.Background(), testKey(1), time.Hour); ok {
		t.Fatal("Get: hit")
	}
	wantStats(t, c, Stats{Misses: 1, RemoteErrors: 1})
}

// A Get whose caller gave up is not Redis's failure.
func TestRemoteCallerGaveUp(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: hungAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	c := newRedisCache(t, rdb, "afloat:", clockwork.NewFakeClockAt(epoch), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := c.Get(ctx, testKey(1), time.Hour); ok {
		t.Fatal("Get: hit")
	}
	wantStats(t, c, Stats{Misses: 1})
}

func TestSettleLogsChanges(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	log, logs := newLog()
	c := newRedisCache(t, rdb, "afloat:", clockwork.NewFakeClockAt(epoch), log)
	down := errors.New("connection refused")
	for _, err := range []error{down, down, down, nil, nil, down} {
		c.settle("get", err)
	}
	out := logs.String()
	if f, r := strings.Count(out, "redis failing"), strings.Count(out, "redis recovered"); f != 2 || r != 1 {
		t.Errorf("log has %d failing and %d recovered lines, want 2 and 1:\n%s", f, r, out)
	}
	if s := c.Stats(); s.RemoteErrors != 4 {
		t.Errorf("RemoteErrors = %d, want 4", s.RemoteErrors)
	}
}
