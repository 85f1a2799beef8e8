// Package redisstate keeps afloat's shared state in Redis, so that a fleet of gateways acts
// as one: the breakers (breaker.Store), the flag document and the injected faults
// (state.Store, state.Watcher). It works over any go-redis UniversalClient: a standalone
// server, Sentinel or a Cluster (every key of one breaker carries its provider as the hash
// tag, so each script touches one slot).
//
// Nothing here is read on the happy path of a call: the flags and faults live in process
// and change when Redis pushes a change (pub/sub), and a breaker's record is cached while
// the subscription that pushes its changes is up. A call costs at most one round trip, when
// its outcome is counted.
//
// When Redis fails (down, slow, partitioned) every command is bounded by Options.Timeout,
// and the first failure opens a gate: for the next Options.Retry every operation fails at
// once without touching the network, so that callers (the breakers, State) serve from their
// local state at no cost. The condition is logged once when it starts and once when it ends.
package redisstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// Options configure a Backend.
type Options struct {
	// Client is the connection to Redis; required. Its own timeouts should not exceed
	// Timeout (NewClient sets them so), and its retries should be off.
	Client redis.UniversalClient
	// Prefix starts every key and the pub/sub channel. It may not hold '{' or '}', which
	// would move the keys' hash slot. "" means "afloat:".
	Prefix string
	// Timeout bounds every command. 0 means 100ms.
	Timeout time.Duration
	// Retry is how long the gate stays shut after a failure before a command tries Redis
	// again. 0 means 1s.
	Retry time.Duration
	// Clock drives the gate and the subscription's reconnects. nil means real time.
	Clock clockwork.Clock
	// Logger receives the start and the end of a failure of Redis, once each. nil discards.
	Logger *slog.Logger
}

// ErrUnavailable is wrapped by every error of an operation that the gate refused: Redis
// failed less than Options.Retry ago.
var ErrUnavailable = errors.New("redis state: unavailable")

// Backend is afloat's state in one Redis. It is safe for concurrent use; Close stops its
// subscription.
type Backend struct {
	c       redis.UniversalClient
	prefix  string
	timeout time.Duration
	retry   time.Duration
	clock   clockwork.Clock
	log     *slog.Logger

	// The gate: while down, operations fail at once until retryAt.
	gmu       sync.Mutex
	down      bool
	retryAt   time.Time
	lastErr   error
	failures  atomic.Uint64 // times Redis went from up to down
	downSince time.Time

	breakers *breakerStore

	changed atomic.Pointer[func()] // Watch's callback
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns the Backend over opts.Client and starts its subscription.
func New(opts Options) (*Backend, error) {
	if opts.Client == nil {
		return nil, errors.New("redis state: a client is required")
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("redis state: prefix %q holds a brace, which would move the keys' hash slot", opts.Prefix)
	}
	b := &Backend{
		c: opts.Client, prefix: opts.Prefix, timeout: opts.Timeout, retry: opts.Retry,
		clock: opts.Clock, log: opts.Logger, done: make(chan struct{}),
	}
	if b.prefix == "" {
		b.prefix = "afloat:"
	}
	if b.timeout <= 0 {
		b.timeout = 100 * time.Millisecond
	}
	if b.retry <= 0 {
		b.retry = time.Second
	}
	if b.clock == nil {
		b.clock = clockwork.NewRealClock()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.breakers = newBreakerStore(b)
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go b.subscribe(ctx)
	return b, nil
}

// ClientOptions are what NewClient needs beyond the URL.
type ClientOptions struct {
	// Cluster makes the client a Redis Cluster client even with one seed address.
	Cluster bool
	// MasterName makes the client a Sentinel (failover) client: the URL's addresses are
	// the sentinels'.
	MasterName string
	// Timeout bounds connecting, reading and writing. 0 means 100ms.
	Timeout time.Duration
}

// NewClient returns a go-redis UniversalClient for url ("redis://[user:password@]host:port/db",
// "rediss://" for TLS; more seed addresses as "?addr=host:port&addr=…"), with its timeouts
// set to opts.Timeout and its retries (of commands and of dials) off: the Backend's gate
// decides when to try again.
func NewClient(url string, opts ClientOptions) (redis.UniversalClient, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 100 * time.Millisecond
	}
	// ParseClusterURL reads every address and the credentials; a simple server's db is
	// read by ParseURL, which refuses the addr parameter.
	co, err := redis.ParseClusterURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	uo := &redis.UniversalOptions{
		Addrs: co.Addrs, Username: co.Username, Password: co.Password, TLSConfig: co.TLSConfig,
		MasterName: opts.MasterName, IsClusterMode: opts.Cluster,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
		// One dial per command: go-redis would otherwise dial a refused address again every
		// 100ms, five times, so that a command to a dead Redis took the whole timeout and
		// failed with the deadline instead of the dial's error.
		MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true,
	}
	if !opts.Cluster && opts.MasterName == "" && len(co.Addrs) == 1 {
		so, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		uo.DB = so.DB
	}
	return redis.NewUniversalClient(uo), nil
}

// Close stops the subscription. It does not close the client, which its creator owns.
func (b *Backend) Close() error {
	b.cancel()
	<-b.done
	return nil
}

// Health returns nil while Redis answers, and the last failure while the gate is shut.
func (b *Backend) Health() error {
	b.gmu.Lock()
	defer b.gmu.Unlock()
	if b.down {
		return fmt.Errorf("redis state unavailable since %s: %w", b.downSince.UTC().Format(time.RFC3339), b.lastErr)
	}
	return nil
}

// Failures returns how many times Redis went from answering to failing.
func (b *Backend) Failures() uint64 { return b.failures.Load() }

// do runs op under the gate with the command timeout. A failure of Redis (not a decision of
// a script, not redis.Nil) shuts the gate.
func (b *Backend) do(ctx context.Context, op func(ctx context.Context) error) error {
	b.gmu.Lock()
	if b.down && b.clock.Now().Before(b.retryAt) {
		err := b.lastErr
		b.gmu.Unlock()
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	b.gmu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	defer cancel()
	err := op(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		b.fail(err)
		return err
	}
	b.ok()
	return err
}

func (b *Backend) fail(err error) {
	b.gmu.Lock()
	defer b.gmu.Unlock()
	now := b.clock.Now()
	b.retryAt, b.lastErr = now.Add(b.retry), err
	if b.down {
		return
	}
	b.down, b.downSince = true, now
	b.failures.Add(1)
	b.breakers.clear()
	b.log.Warn("redis state unavailable: every replica serves from its own state until it answers again",
		"err", err, "retry_every", b.retry.String())
}

func (b *Backend) ok() {
	b.gmu.Lock()
	if !b.down {
		b.gmu.Unlock()
		return
	}
	b.down = false
	since := b.downSince
	b.gmu.Unlock()
	b.log.Info("redis state answers again: shared state resumed", "down_for", b.clock.Since(since).String())
}

// channel is where every change is published.
func (b *Backend) channel() string { return b.prefix + "events" }

// quietWait is how long the subscription waits for a message before it pings Redis: a
// quiet channel and a connection that died without a word look the same until then.
const quietWait = 2 * time.Second

// subscribe listens for changes until ctx ends. While it is not subscribed the breaker
// records are not cached; after each (re)subscription every record is read anew and Watch's
// callback runs, as changes may have been missed.
//
// A connection can die without closing (a middlebox lost it, a host vanished): writes still
// succeed and nothing ever arrives. So after quietWait without a message it pings, and a
// ping unanswered within Options.Timeout counts as a failure, as does any error; after a
// failure it waits Options.Retry and subscribes on a new connection.
func (b *Backend) subscribe(ctx context.Context) {
	defer close(b.done)
	// Once closed, nothing keeps the cache fresh: a breaker still in use reads Redis.
	defer b.breakers.subscribed(false)
	for {
		err := b.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		b.breakers.subscribed(false)
		b.fail(fmt.Errorf("subscription: %w", err))
		select {
		case <-ctx.Done():
			return
		case <-b.clock.After(b.retry):
		}
	}
}

// listen subscribes on a connection of its own and applies what arrives, until the
// connection fails (its error is returned) or ctx ends.
func (b *Backend) listen(ctx context.Context) error {
	ps := b.c.Subscribe(ctx, b.channel())
	// Closing interrupts a receive, which the end of ctx alone does not: Close would wait
	// out quietWait.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		stop()
		_ = ps.Close()
	}()
	pinged := false // a ping is out and unanswered
	for {
		wait := quietWait
		if pinged {
			wait = b.timeout
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		if err == nil {
			pinged = false
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.breakers.subscribed(true)
				b.notify()
				b.ok()
			}
			continue
		case *redis.Message:
			b.dispatch(m.Payload)
			continue
		case *redis.Pong:
			continue
		}
		if err == nil {
			continue // a message of no interest
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ne interface{ Timeout() bool }
		if !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
		if pinged {
			return fmt.Errorf("no answer to a ping within %v", b.timeout)
		}
		// PubSub.Ping only writes the ping; its answer arrives as a message.
		pctx, cancel := context.WithTimeout(ctx, b.timeout)
		err = ps.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
		pinged = true
	}
}

// dispatch applies one published change: "b NAME RECORD" for a breaker, "s" for the flags or
// the faults.
func (b *Backend) dispatch(payload string) {
	kind, rest, _ := strings.Cut(payload, " ")
	switch kind {
	case "b":
		b.breakers.pushed(rest)
	case "s":
		b.notify()
	}
}

func (b *Backend) notify() {
	if fn := b.changed.Load(); fn != nil {
		(*fn)()
	}
}
