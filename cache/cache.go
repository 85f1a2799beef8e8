package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// Entry is one stored answer.
type Entry struct {
	// Value is the validated answer, a JSON document. A Value that Get returns is shared by
	// every Get of its entry: read it, never write into it.
	Value json.RawMessage
	// PromptVersion is the version of the prompt that produced the answer
	// ("triage/openai/v3"), so that a caller can refuse answers of an older prompt.
	PromptVersion string
	// Provider is the provider that answered.
	Provider string
	// Tier is the tier of the cascade that answered.
	Tier int
	// At is when the model answered: the entry's age, and the start of its ttl. Zero means
	// the time of the Put.
	At time.Time
}

// Options configure a Cache.
type Options struct {
	// MaxEntries bounds the entries kept in process: past it, Put evicts the least recently
	// used. It is required: zero or less is an error.
	MaxEntries int
	// Redis, when set, also keeps every entry there, so that a fleet shares its answers: Put
	// writes through a bounded queue drained by one background goroutine, and Get reads
	// memory first, then Redis, and keeps what it read in memory. nil keeps entries in
	// process only. The Cache bounds its reads itself; its writes are bounded by the client's
	// timeouts (go-redis honours ctx deadlines only with ContextTimeoutEnabled), so a slow
	// Redis fills the queue rather than blocking a caller. The Cache does not close it.
	Redis redis.UniversalClient
	// Prefix is prepended to the Redis keys, which are Prefix+"cache:"+hex(key). "" means
	// none.
	Prefix string
	// Clock gives entries their age and expiry; nil means real time. The bounds of Redis
	// calls are in real time, as the network's are.
	Clock clockwork.Clock
	// Logger receives Redis failures, never a value's content; nil discards them.
	Logger *slog.Logger
}

// Stats counts what a Cache did since New. Each Get counts one Hit or one Miss.
type Stats struct {
	// Hits counts the Gets that returned an entry, from memory or from Redis.
	Hits int64
	// Misses counts the Gets that returned none.
	Misses int64
	// Expired counts the Misses that found an entry, in memory or in Redis, but one older
	// than their maxAge or past its ttl.
	Expired int64
	// Evicted counts the entries dropped from memory to stay within MaxEntries.
	Evicted int64
	// RemoteErrors counts the Redis reads and writes that failed or found Redis too slow,
	// and the entries that could not be decoded from it. A read the caller gave up on (its
	// ctx ended) is not counted.
	RemoteErrors int64
	// RemoteDropped counts the Redis writes dropped because the queue was full, or because
	// the Cache was closed.
	RemoteDropped int64
	// RemoteHits counts the Hits read from Redis.
	RemoteHits int64
}

// Cache is an answer cache: an LRU in memory, optionally backed by Redis. It is safe for
// concurrent use.
type Cache struct {
	clock clockwork.Clock
	log   *slog.Logger

	// The Redis side, all zero without Options.Redis; see redis.go.
	rdb      redis.UniversalClient
	prefix   string
	reads    chan struct{}      // a token per read in flight
	queue    chan pending       // Put's writes, drained by writeLoop; closed by Close
	flushes  chan chan struct{} // Flush's requests: writeLoop closes each once the writes queued before it are done
	exited   chan struct{}      // closed when writeLoop returns
	failing  atomic.Bool        // the last Redis call failed: only the changes are logged
	failedAt atomic.Int64       // when a Redis call last failed, in Unix nanoseconds (real time)
	abandon  atomic.Bool        // Close stopped waiting: writeLoop drops what is left

	mu     sync.Mutex
	mem    lru
	closed bool // Close was called; sends on queue happen under mu too, so none follows its close

	hits, misses, expired, evicted          atomic.Int64
	remoteErrors, remoteDropped, remoteHits atomic.Int64
}

// New returns a Cache configured by opts. With opts.Redis it starts the background writer
// that Close stops.
func New(opts Options) (*Cache, error) {
	if opts.MaxEntries <= 0 {
		return nil, fmt.Errorf("cache: MaxEntries must be positive, not %d", opts.MaxEntries)
	}
	c := &Cache{clock: opts.Clock, log: opts.Logger}
	if c.clock == nil {
		c.clock = clockwork.NewRealClock()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.mem.init(opts.MaxEntries)
	if opts.Redis != nil {
		c.rdb = opts.Redis
		c.prefix = opts.Prefix
		c.reads = make(chan struct{}, maxReads)
		c.queue = make(chan pending, queueSize)
		c.flushes = make(chan chan struct{})
		c.exited = make(chan struct{})
		go c.writeLoop()
	}
	return c, nil
}

// Get returns the entry of k when there is one not older than maxAge (Clock.Now()-At <=
// maxAge) and within the ttl of its Put. An older one is never returned; in memory it is
// dropped, and Redis is read for a fresher one that another replica may have put. A Redis
// failure or timeout (bounded by ctx and by 50ms of its own) reads as a miss, logged and
// counted in Stats.
func (c *Cache) Get(ctx context.Context, k Key, maxAge time.Duration) (Entry, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	n := c.mem.nodes[k]
	if n != nil {
		if fresh(n.e.At, n.exp, now, maxAge) {
			c.mem.touch(n)
			e := n.e
			c.mu.Unlock()
			c.hits.Add(1)
			return e, true
		}
		c.mem.remove(n)
	}
	c.mu.Unlock()

	stale := n != nil
	if c.rdb != nil {
		if e, exp, ok := c.read(ctx, k); ok {
			if fresh(e.At, exp, now, maxAge) {
				c.fill(k, e, exp)
				c.hits.Add(1)
				c.remoteHits.Add(1)
				return e, true
			}
			stale = true
		}
	}
	c.misses.Add(1)
	if stale {
		c.expired.Add(1)
	}
	return Entry{}, false
}

// fresh reports whether an entry of at and exp may be served at now under maxAge.
func fresh(at, exp, now time.Time, maxAge time.Duration) bool {
	return now.Sub(at) <= maxAge && now.Before(exp)
}

// fill keeps in memory an entry read from Redis, unless memory got one as new meanwhile.
func (c *Cache) fill(k Key, e Entry, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.mem.nodes[k]; n != nil && !n.e.At.Before(e.At) {
		return
	}
	if c.mem.add(k, e, exp) {
		c.evicted.Add(1)
	}
}

// Put stores e under k for ttl from e.At: in memory at once, evicting the least recently used
// entry past MaxEntries, and in Redis through a bounded queue; when the queue is full the
// Redis write is dropped and counted, so Put never blocks on Redis. The Redis write outlives
// the call, so it does not use ctx. An entry whose ttl has already run out (ttl <= 0, or At
// older than ttl) is not stored. e.Value is copied: the caller may reuse its slice.
func (c *Cache) Put(ctx context.Context, k Key, e Entry, ttl time.Duration) {
	now := c.clock.Now()
	if e.At.IsZero() {
		e.At = now
	}
	exp := e.At.Add(ttl)
	if !now.Before(exp) {
		return
	}
	if e.Value != nil {
		// make and copy, not bytes.Clone, so that cap == len: an append by one reader of a
		// shared Value then copies it rather than writing where the others read.
		v := make(json.RawMessage, len(e.Value))
		copy(v, e.Value)
		e.Value = v
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem.add(k, e, exp) {
		c.evicted.Add(1)
	}
	if c.rdb == nil {
		return
	}
	if c.closed {
		c.remoteDropped.Add(1)
		return
	}
	select {
	case c.queue <- pending{k: k, e: e, exp: exp}:
	default:
		c.remoteDropped.Add(1)
	}
}

// Len is the number of entries in memory.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mem.nodes)
}

// Stats returns the counts since New.
func (c *Cache) Stats() Stats {
	return Stats{
		Hits:          c.hits.Load(),
		Misses:        c.misses.Load(),
		Expired:       c.expired.Load(),
		Evicted:       c.evicted.Load(),
		RemoteErrors:  c.remoteErrors.Load(),
		RemoteDropped: c.remoteDropped.Load(),
		RemoteHits:    c.remoteHits.Load(),
	}
}
