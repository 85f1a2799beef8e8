package cache

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// readTimeout bounds a Get's Redis read: the cache is read when the call is already
	// failing, so a slow Redis must not add more than this to it.
	readTimeout = 50 * time.Millisecond
	// readBackoff is how long after a failed Redis call Get does not read Redis (a miss at
	// once): during a Redis outage a call waits readTimeout at most once a readBackoff.
	readBackoff = time.Second
	// maxReads bounds the reads in flight. A read that readTimeout gave up on runs on until
	// the client's own timeouts end it (go-redis ignores ctx deadlines unless
	// ContextTimeoutEnabled), so a hung Redis holds at most this many goroutines; past it, a
	// Get does not read Redis.
	maxReads = 256
	// writeTimeout bounds one write (where the client honours ctx); writes are off every
	// caller's path, so it can be longer than readTimeout.
	writeTimeout = time.Second
	// queueSize bounds the writes waiting for writeLoop: past it, Put drops them.
	queueSize = 1024
	// closeTimeout bounds Close's wait for the queued writes.
	closeTimeout = time.Second
)

var (
	errReadsBusy   = fmt.Errorf("%d reads in flight", maxReads)
	errReadTimeout = fmt.Errorf("no answer within %v", readTimeout)
)

// pending is one entry waiting for writeLoop. Its Value is the copy kept in memory, which
// nothing writes into.
type pending struct {
	k   Key
	e   Entry
	exp time.Time
}

func (c *Cache) redisKey(k Key) string {
	return c.prefix + "cache:" + hex.EncodeToString(k[:])
}

// writeLoop writes the queued entries to Redis, one at a time, until Close closes the queue
// and what it holds is written.
func (c *Cache) writeLoop() {
	defer close(c.exited)
	for {
		select {
		case w, ok := <-c.queue:
			if !ok {
				return
			}
			c.write(w)
		case done := <-c.flushes:
			// The writes queued before the Flush are all in the queue now: writeLoop is its
			// only reader, and it is here.
			for n := len(c.queue); n > 0; n-- {
				w, ok := <-c.queue
				if !ok {
					break
				}
				c.write(w)
			}
			close(done)
		}
	}
}

// write sets w in Redis with what is left of its ttl, so that Redis drops it when memory
// would.
func (c *Cache) write(w pending) {
	if c.abandon.Load() {
		c.remoteDropped.Add(1)
		return
	}
	ttl := w.exp.Sub(c.clock.Now())
	if ttl < time.Millisecond {
		return // expired while queued: Redis would drop it at once
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	err := c.rdb.Set(ctx, c.redisKey(w.k), encode(w.e, w.exp), ttl).Err()
	c.settle("set", err)
}

// read returns the entry of k in Redis and its expiry, if there is one and it decodes. A
// failure is counted and reads as none.
func (c *Cache) read(ctx context.Context, k Key) (Entry, time.Time, bool) {
	if ctx.Err() != nil {
		return Entry{}, time.Time{}, false
	}
	if c.failing.Load() && time.Since(time.Unix(0, c.failedAt.Load())) < readBackoff {
		// Redis failed a moment ago: the calls of an outage do not each wait for it. One read
		// a readBackoff tries again (and a write's success clears failing).
		return Entry{}, time.Time{}, false
	}
	select {
	case c.reads <- struct{}{}:
	default:
		c.settle("get", errReadsBusy)
		return Entry{}, time.Time{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	// The read runs on its own goroutine so that readTimeout holds whatever the client's
	// options; see maxReads.
	go func() {
		defer func() { <-c.reads }()
		b, err := c.rdb.Get(rctx, c.redisKey(k)).Bytes()
		got <- result{b, err}
	}()
	var r result
	select {
	case r = <-got:
	case <-rctx.Done():
		r.err = errReadTimeout
	}
	switch {
	case r.err != nil && ctx.Err() != nil:
		return Entry{}, time.Time{}, false // the caller gave up: no fault of Redis
	case errors.Is(r.err, redis.Nil):
		c.settle("get", nil)
		return Entry{}, time.Time{}, false
	case r.err != nil:
		c.settle("get", r.err)
		return Entry{}, time.Time{}, false
	}
	c.settle("get", nil)
	e, exp, err := decode(r.b)
	if err != nil {
		c.remoteErrors.Add(1)
		c.log.Warn("cache: undecodable entry in redis", "key", c.redisKey(k), "err", err)
		return Entry{}, time.Time{}, false
	}
	return e, exp, true
}

// settle counts a Redis call's failure, and logs when Redis starts failing and when it
// recovers: one line per outage, not one per call, as the calls of an outage can be many.
func (c *Cache) settle(op string, err error) {
	if err != nil {
		c.remoteErrors.Add(1)
		c.failedAt.Store(time.Now().UnixNano())
		if c.failing.CompareAndSwap(false, true) {
			c.log.Warn("cache: redis failing: reads miss and writes are lost until it recovers",
				"op", op, "err", err)
		}
		return
	}
	if c.failing.CompareAndSwap(true, false) {
		c.log.Info("cache: redis recovered", "op", op)
	}
}

// Flush waits until the Redis writes queued before it are done, or ctx ends. Without Redis
// it returns nil at once. A write counts as done when Redis answered, failed, or, after
// Close gave up waiting, was dropped.
func (c *Cache) Flush(ctx context.Context) error {
	if c.rdb == nil {
		return nil
	}
	done := make(chan struct{})
	select {
	case c.flushes <- done:
	case <-c.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the background writer after it wrote what is queued, waiting at most 1s;
// then it returns an error and the writer drops the rest. Get and Put keep working after
// Close, but Put no longer writes to Redis. Close does not close Options.Redis. It is safe
// to call more than once: the later calls return nil.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if c.queue != nil {
		close(c.queue)
	}
	c.mu.Unlock()
	if c.rdb == nil {
		return nil
	}
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-c.exited:
		return nil
	case <-t.C:
		c.abandon.Store(true)
		return fmt.Errorf("cache: close: redis writes still queued after %v: dropped", closeTimeout)
	}
}
