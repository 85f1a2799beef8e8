package redisstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// The tests of this package run against the real Redis of AFLOAT_REDIS_URL
// (redis://127.0.0.1:6379/0): each under a key prefix of its own, whose keys it deletes when
// it ends. Without the variable they skip, except in CI (CI=true), where they fail. The
// helpers below serve this file and store_test.go.

// epochStart is the replicas' clock in the tests that give one: times in records and the
// buckets of the failure window are theirs, never Redis's.
var epochStart = time.Unix(1_700_000_000, 0)

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

// testTimeout bounds the commands of the tests' Backends: wide, so that a test run under
// -race on a busy machine does not shut the gate by accident.
const testTimeout = 2 * time.Second

// newTestClient returns a client made as the Backend's are (NewClient), closed when the test
// ends.
func newTestClient(t *testing.T, u string, timeout time.Duration) redis.UniversalClient {
	t.Helper()
	c, err := NewClient(u, ClientOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fixture is one test's part of the Redis: a key prefix of its own, whose keys are deleted
// when the test ends, and a client of its own to look at them. The Backends and clients it
// makes are closed when the test ends, the Backends first, so that no subscription sees its
// client closed under it.
type fixture struct {
	url    string
	prefix string
	admin  redis.UniversalClient
	seq    atomic.Int64 // names settle's records

	mu       sync.Mutex
	backends []*Backend
	clients  []redis.UniversalClient
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	u := testRedisURL(t)
	admin := newTestClient(t, u, testTimeout)
	if err := admin.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at AFLOAT_REDIS_URL %s: %v", u, err)
	}
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	f := &fixture{url: u, prefix: "afloat-test-" + hex.EncodeToString(raw[:]) + ":", admin: admin}
	t.Cleanup(func() { // runs before admin is closed: cleanups run last in, first out
		f.close()
		ctx := context.Background()
		for _, k := range f.keys(t) {
			if err := admin.Del(ctx, k).Err(); err != nil {
				t.Errorf("deleting %s: %v", k, err)
			}
		}
	})
	return f
}

// keys returns the test's keys, sorted.
func (f *fixture) keys(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := f.admin.Scan(ctx, 0, f.prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return slices.Compact(keys) // SCAN may return a key twice
}

// client returns a client of u made as the Backend's are (NewClient).
func (f *fixture) client(t *testing.T, u string, timeout time.Duration) redis.UniversalClient {
	t.Helper()
	c, err := NewClient(u, ClientOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clients = append(f.clients, c)
	return c
}

// backend returns a Backend over client with the test's prefix.
func (f *fixture) backend(t *testing.T, client redis.UniversalClient, opts Options) *Backend {
	t.Helper()
	opts.Client, opts.Prefix = client, f.prefix
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = append(f.backends, b)
	return b
}

// close closes the fixture's Backends and then their clients.
func (f *fixture) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.backends {
		_ = b.Close()
	}
	for _, c := range f.clients {
		_ = c.Close()
	}
}

// replica returns one gateway's Backend over a client of its own, whose round trips the
// returned hook counts, once its subscription is up.
func (f *fixture) replica(t *testing.T) (*Backend, *roundTrips) {
	t.Helper()
	client := f.client(t, f.url, testTimeout)
	rt := new(roundTrips)
	client.AddHook(rt)
	if err := client.Ping(context.Background()).Err(); err != nil { // dial now: no handshake among the round trips measured
		t.Fatal(err)
	}
	b := f.backend(t, client, Options{})
	f.settle(t, b)
	rt.take()
	return b, rt
}

// settle waits until b is subscribed and has handled every message published before the
// call: it publishes the record of a name of its own until b caches it. Pushes are handled
// in order, after the (re)subscription that made the cache live, so once that record is
// cached, so are the earlier ones, and Watch's callback has run for the subscription.
func (f *fixture) settle(t *testing.T, b *Backend) {
	t.Helper()
	name := fmt.Sprintf("settle-%d", f.seq.Add(1))
	payload := "b " + name + " " + fieldsOf(breaker.Record{Revision: 1})
	eventually(t, "the subscription handles a push", func() bool {
		if err := f.admin.Publish(context.Background(), b.channel(), payload).Err(); err != nil {
			t.Fatal(err)
		}
		_, ok := cachedRecord(b, name)
		return ok
	})
}

// fieldsOf returns rec's fields as a push carries them.
func fieldsOf(rec breaker.Record) string {
	var parts []string
	for _, v := range encodeRecord(rec) {
		parts = append(parts, v.(string))
	}
	return strings.Join(parts, " ")
}

// cachedRecord returns what b's breaker store has cached for name.
func cachedRecord(b *Backend, name string) (breaker.Record, bool) {
	rec, ok, _ := b.breakers.lookup(name)
	return rec, ok
}

// eventually polls cond until it holds, failing the test after 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		<-tick.C
	}
}

// roundTrips is a redis.Hook that records a client's round trips: one per command, one per
// pipeline. It is safe for concurrent use.
type roundTrips struct {
	mu   sync.Mutex
	cmds []string
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		r.add("pipeline(" + strings.Join(names, " ") + ")")
		return next(ctx, cmds)
	}
}

func (r *roundTrips) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, name)
}

// take returns the round trips since the last take.
func (r *roundTrips) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmds := r.cmds
	r.cmds = nil
	return cmds
}

// sameRecord reports whether a and b are one record, their times compared as instants.
func sameRecord(a, b breaker.Record) bool {
	return a.State == b.State && a.Epoch == b.Epoch && a.Revision == b.Revision &&
		a.Since.Equal(b.Since) && a.Until.Equal(b.Until) &&
		a.Recovery == b.Recovery && a.Kind == b.Kind && a.RampUp == b.RampUp
}

// hashTag returns the part of key that Redis Cluster hashes to pick its slot: what lies
// between the first '{' and the next '}' when that is not empty, else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

func TestRecordEncoding(t *testing.T) {
	since := time.Unix(1_700_000_000, 123_456_789)
	tests := []struct {
		name string
		rec  breaker.Record
	}{
		{"zero", breaker.Record{}},
		{"open", breaker.Record{State: breaker.StateOpen, Epoch: 7, Revision: 12, Since: since,
			Until: since.Add(1500 * time.Millisecond), Recovery: 22*time.Second + 500*time.Millisecond, Kind: afloat.Throttled}},
		{"closed by a probe", breaker.Record{State: breaker.StateClosed, Epoch: 9, Revision: 14, Since: since, RampUp: true}},
		{"unusable", breaker.Record{State: breaker.StateOpen, Epoch: 1, Revision: 1, Since: since, Until: since.Add(5 * time.Minute), Kind: afloat.Unusable}},
		{"half-open, zero until", breaker.Record{State: breaker.StateHalfOpen, Epoch: 1 << 40, Revision: 1<<40 + 3, Since: since, Kind: afloat.Contract}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := encodeRecord(tt.rec)
			vals := make([]string, len(enc))
			for i, v := range enc {
				s, ok := v.(string)
				if !ok {
					t.Fatalf("field %s encoded as %T, want a string", recordFields[i], v)
				}
				vals[i] = s
			}
			got, err := decodeRecord(vals)
			if err != nil {
				t.Fatal(err)
			}
			if !sameRecord(got, tt.rec) || got.Since.IsZero() != tt.rec.Since.IsZero() || got.Until.IsZero() != tt.rec.Until.IsZero() {
				t.Errorf("decode(encode(%+v)) = %+v (fields %q)", tt.rec, got, vals)
			}
		})
	}
	t.Run("zero times", func(t *testing.T) {
		vals := strings.Fields(fieldsOf(breaker.Record{Epoch: 1}))
		if vals[3] != "0" || vals[4] != "0" {
			t.Errorf("zero since and until encoded as %q, %q; want 0", vals[3], vals[4])
		}
	})
	t.Run("never written", func(t *testing.T) {
		got, err := decodeRecord(make([]string, len(recordFields)))
		if err != nil || got != (breaker.Record{}) {
			t.Errorf("decode of empty fields = %+v, %v; want the zero Record", got, err)
		}
	})
	for _, bad := range [][]string{
		{"1", "0", "1", "0", "0", "0", "0"},
		{"1", "0", "x", "0", "0", "0", "0", "0"},
		{"1", "0", "1", "0", "0", "1.5", "0", "0"},
	} {
		if rec, err := decodeRecord(bad); err == nil {
			t.Errorf("decode of %q = %+v, want an error", bad, rec)
		}
	}
}

// TestBreakerStoreCacheGenerations: a record read before the cache started over (a
// resubscription, a failure of Redis) is not cached, as a push made meanwhile may have been
// missed; forget drops a record only in the epoch that Redis said is over.
func TestBreakerStoreCacheGenerations(t *testing.T) {
	s := newBreakerStore(&Backend{prefix: "x:"})
	rec := breaker.Record{State: breaker.StateOpen, Epoch: 2, Revision: 3}
	s.keep("p", rec, s.generation())
	if _, ok, _ := s.lookup("p"); ok {
		t.Fatal("cached while not subscribed")
	}
	s.subscribed(true)
	gen := s.generation()
	s.subscribed(true) // resubscribed while the record was read
	s.keep("p", rec, gen)
	if _, ok, _ := s.lookup("p"); ok {
		t.Fatal("a record read before the resubscription was cached")
	}
	gen = s.generation()
	s.clear() // Redis failed while the record was read
	s.keep("p", rec, gen)
	if _, ok, _ := s.lookup("p"); ok {
		t.Fatal("a record read before a failure was cached")
	}
	s.keep("p", rec, s.generation())
	s.keep("p", breaker.Record{Revision: 2}, s.generation())
	if got, ok, _ := s.lookup("p"); !ok || got != rec {
		t.Fatalf("cache holds %+v, %t; want %+v, not replaced by an older revision", got, ok, rec)
	}
	s.forget("p", 1)
	if _, ok, _ := s.lookup("p"); !ok {
		t.Fatal("forget of another epoch dropped the record")
	}
	s.forget("p", 2)
	if _, ok, _ := s.lookup("p"); ok {
		t.Fatal("forget of the record's epoch kept it")
	}
}

// TestBreakerStoreSwap: a name never written loads as the zero Record; Swap at the stored
// revision writes every field and bumps the revision; at any other revision it returns the
// record that won, as Redis holds it.
func TestBreakerStoreSwap(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, _ := f.replica(t)
	b, _ := f.replica(t)
	for _, name := range []string{"openai", "anthropic"} {
		if rec, err := a.Breakers().Load(ctx, name); err != nil || rec != (breaker.Record{}) {
			t.Fatalf("Load of %s, never written = %+v, %v; want the zero Record", name, rec, err)
		}
	}
	open := breaker.Record{State: breaker.StateOpen, Epoch: 1, Since: epochStart, Until: epochStart.Add(10 * time.Second),
		Recovery: 15 * time.Second, Kind: afloat.Throttled}
	got, ok, err := a.Breakers().Swap(ctx, "openai", 0, open)
	want := open
	want.Revision = 1
	if err != nil || !ok || !sameRecord(got, want) {
		t.Fatalf("Swap at revision 0 = %+v, %t, %v; want %+v swapped", got, ok, err, want)
	}
	// b has not read the record: what it is told comes from Redis.
	for _, rev := range []uint64{0, 2, 7} {
		got, ok, err = b.Breakers().Swap(ctx, "openai", rev, breaker.Record{State: breaker.StateClosed, Epoch: 2})
		if err != nil || ok || !sameRecord(got, want) {
			t.Fatalf("Swap at stale revision %d = %+v, %t, %v; want refused with the winner %+v", rev, got, ok, err, want)
		}
	}
	var stored map[string]string
	if stored, err = f.admin.HGetAll(ctx, f.prefix+"{openai}:breaker").Result(); err != nil {
		t.Fatal(err)
	}
	if stored["revision"] != "1" || stored["epoch"] != "1" || stored["state"] != fmt.Sprint(int(breaker.StateOpen)) {
		t.Errorf("record hash after a refused swap = %v, want the winner's", stored)
	}
	if rec, err := b.Breakers().Load(ctx, "anthropic"); err != nil || rec != (breaker.Record{}) {
		t.Errorf("another name loads %+v, %v; want the zero Record", rec, err)
	}
}

// TestBreakerStoreEpoch: a swap within the epoch keeps the counts; a new epoch starts with
// empty counts and a free probe slot, as they live in keys named after the epoch; a Count or
// an AcquireProbe of an epoch that is over records nothing.
func TestBreakerStoreEpoch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	be, _ := f.replica(t)
	s := be.Breakers()
	count := func(epoch uint64, failed bool) breaker.Counts {
		t.Helper()
		c, err := s.Count(ctx, "p", epoch, failed, epochStart, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	swap := func(rev uint64, next breaker.Record) {
		t.Helper()
		if _, ok, err := s.Swap(ctx, "p", rev, next); err != nil || !ok {
			t.Fatalf("Swap at revision %d: %t, %v", rev, ok, err)
		}
	}
	acquire := func(epoch uint64) bool {
		t.Helper()
		_, ok, err := s.AcquireProbe(ctx, "p", epoch, epochStart, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for range 3 {
		count(0, true)
	}
	swap(0, breaker.Record{Recovery: time.Minute}) // same epoch 0
	if c := count(0, true); c != (breaker.Counts{Current: true, Calls: 4, Failures: 4, Consecutive: 4}) {
		t.Fatalf("counts after a same-epoch swap = %+v, want 4 failures in a row", c)
	}
	if !acquire(0) {
		t.Fatal("AcquireProbe in epoch 0 refused")
	}
	swap(1, breaker.Record{State: breaker.StateHalfOpen, Epoch: 1})
	before, err := f.admin.HGetAll(ctx, f.prefix+"{p}:counts:0").Result()
	if err != nil || len(before) == 0 {
		t.Fatalf("counts of epoch 0: %v, %v", before, err)
	}
	if c := count(0, true); c != (breaker.Counts{}) {
		t.Errorf("Count in an ended epoch = %+v, want nothing recorded", c)
	}
	if after, _ := f.admin.HGetAll(ctx, f.prefix+"{p}:counts:0").Result(); !reflect.DeepEqual(after, before) {
		t.Errorf("Count in an ended epoch changed its counts from %v to %v", before, after)
	}
	if acquire(0) {
		t.Error("AcquireProbe in an ended epoch succeeded")
	}
	if !acquire(1) {
		t.Fatal("AcquireProbe in the current epoch refused: the slot of epoch 0 was kept")
	}
	swap(2, breaker.Record{State: breaker.StateHalfOpen, Epoch: 2})
	if !acquire(2) {
		t.Error("AcquireProbe in a new epoch refused: the slot of the old one was kept")
	}
	if c := count(2, false); c != (breaker.Counts{Current: true, Calls: 1}) {
		t.Errorf("counts in a new epoch = %+v, want 1 call", c)
	}
	for _, key := range []string{"counts:0", "counts:2", "probe:0", "probe:1", "probe:2"} {
		if n, _ := f.admin.Exists(ctx, f.prefix+"{p}:"+key).Result(); n != 1 {
			t.Errorf("key %s missing: counts and probe slots are named after their epoch", key)
		}
	}
}

// TestBreakerStoreWindow: the failure window is 10 buckets of window/10 by the replicas'
// clock; a call leaves it once its bucket is 10 behind, and a success ends the run of
// failures. Each case is also run on a breaker.MemoryStore, which Redis must agree with.
func TestBreakerStoreWindow(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	be, _ := f.replica(t)
	type call struct {
		at     time.Duration
		failed bool
	}
	fail := func(at ...time.Duration) []call {
		var cs []call
		for _, d := range at {
			cs = append(cs, call{d, true})
		}
		return cs
	}
	tests := []struct {
		name   string
		window time.Duration
		calls  []call
		want   breaker.Counts // after the last call
	}{
		{"all in one bucket", 10 * time.Second, fail(0, 0, 0), breaker.Counts{Current: true, Calls: 3, Failures: 3, Consecutive: 3}},
		{"spread over the window", 10 * time.Second, fail(0, 5*time.Second, 9*time.Second+999*time.Millisecond),
			breaker.Counts{Current: true, Calls: 3, Failures: 3, Consecutive: 3}},
		{"first bucket left", 10 * time.Second, fail(0, 5*time.Second, 10*time.Second),
			breaker.Counts{Current: true, Calls: 2, Failures: 2, Consecutive: 3}},
		{"all but the last left", 10 * time.Second, fail(0, time.Second, time.Minute),
			breaker.Counts{Current: true, Calls: 1, Failures: 1, Consecutive: 3}},
		{"a bucket reused after a lap", 10 * time.Second, fail(0, 0, 10*time.Second, 20*time.Second),
			breaker.Counts{Current: true, Calls: 1, Failures: 1, Consecutive: 4}},
		{"a success ends the run", 10 * time.Second, []call{{0, true}, {0, true}, {time.Second, false}, {2 * time.Second, true}},
			breaker.Counts{Current: true, Calls: 4, Failures: 3, Consecutive: 1}},
		{"a success last", 10 * time.Second, []call{{0, true}, {0, true}, {0, false}},
			breaker.Counts{Current: true, Calls: 3, Failures: 2, Consecutive: 0}},
		{"window of 30s", 30 * time.Second, fail(0, 29*time.Second, 32*time.Second),
			breaker.Counts{Current: true, Calls: 2, Failures: 2, Consecutive: 3}},
		// 2×window is under 1ms, which would round to a TTL of 0: the counts must outlive it.
		{"window under a millisecond", 400 * time.Microsecond, fail(0, 0, 0, 100*time.Microsecond),
			breaker.Counts{Current: true, Calls: 4, Failures: 4, Consecutive: 4}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("w%d", i)
			mem := breaker.NewMemoryStore()
			var got, ref breaker.Counts
			for _, c := range tt.calls {
				var err error
				if got, err = be.Breakers().Count(ctx, name, 0, c.failed, epochStart.Add(c.at), tt.window); err != nil {
					t.Fatal(err)
				}
				ref, _ = mem.Count(ctx, name, 0, c.failed, epochStart.Add(c.at), tt.window)
				if got != ref {
					t.Fatalf("after the call at %v: Redis counts %+v, the MemoryStore %+v", c.at, got, ref)
				}
			}
			if got != tt.want {
				t.Errorf("counts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBreakerStoreProbeSlot: a token holds the slot until it releases it; a release with
// another token does nothing; every acquisition has a new non-zero token.
func TestBreakerStoreProbeSlot(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	be, _ := f.replica(t)
	s := be.Breakers()
	acquire := func() (uint64, bool) {
		t.Helper()
		tok, ok, err := s.AcquireProbe(ctx, "p", 0, epochStart, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok, ok
	}
	release := func(tok uint64) {
		t.Helper()
		if err := s.ReleaseProbe(ctx, "p", 0, tok); err != nil {
			t.Fatal(err)
		}
	}
	tok, ok := acquire()
	if !ok || tok == 0 {
		t.Fatalf("AcquireProbe = %d, %t; want a non-zero token", tok, ok)
	}
	if tok2, ok := acquire(); ok || tok2 != 0 {
		t.Fatalf("slot taken twice: AcquireProbe = %d, %t", tok2, ok)
	}
	release(tok + 1)
	if _, ok := acquire(); ok {
		t.Fatal("a release with another token freed the slot")
	}
	if err := s.ReleaseProbe(ctx, "p", 1, tok); err != nil {
		t.Fatal(err)
	}
	if _, ok := acquire(); ok {
		t.Fatal("a release in another epoch freed the slot")
	}
	release(tok)
	tok2, ok := acquire()
	if !ok || tok2 == 0 || tok2 == tok {
		t.Fatalf("after the release: AcquireProbe = %d, %t; want a new token (the first was %d)", tok2, ok, tok)
	}
	release(tok) // the first holder, late: the second still holds the slot
	if _, ok := acquire(); ok {
		t.Fatal("a late release of an earlier token freed the slot of the next holder")
	}
}

// TestBreakerStoreProbeOneWinner: of acquirers that race for the slot, from goroutines of one
// replica or from many replicas, exactly one gets it.
func TestBreakerStoreProbeOneWinner(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	const n = 16
	first, _ := f.replica(t)
	replicas := []*Backend{first}
	for range 5 {
		b, _ := f.replica(t)
		replicas = append(replicas, b)
	}
	tests := []struct {
		name  string
		store func(i int) breaker.Store
	}{
		{"goroutines of one replica", func(int) breaker.Store { return first.Breakers() }},
		{"replicas", func(i int) breaker.Store { return replicas[i%len(replicas)].Breakers() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(tt.name, " ", "-")
			if _, ok, err := first.Breakers().Swap(ctx, name, 0, breaker.Record{State: breaker.StateHalfOpen, Epoch: 1}); !ok || err != nil {
				t.Fatalf("swap: %t, %v", ok, err)
			}
			start := make(chan struct{})
			tokens := make(chan uint64, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					tok, ok, err := tt.store(i).AcquireProbe(ctx, name, 1, epochStart, time.Minute)
					if err != nil {
						t.Error(err)
					}
					if ok {
						tokens <- tok
					}
				})
			}
			close(start)
			wg.Wait()
			close(tokens)
			var won []uint64
			for tok := range tokens {
				won = append(won, tok)
			}
			if len(won) != 1 || won[0] == 0 {
				t.Errorf("tokens of the winners: %v; want exactly one, non-zero", won)
			}
		})
	}
}

// TestBreakerStoreProbeExpires: the slot of a probe that never reports frees itself after
// its ttl, by Redis's own clock.
func TestBreakerStoreProbeExpires(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	be, _ := f.replica(t)
	s := be.Breakers()
	const ttl = 50 * time.Millisecond
	start := time.Now()
	if _, ok, err := s.AcquireProbe(ctx, "p", 0, epochStart, ttl); !ok || err != nil {
		t.Fatalf("AcquireProbe: %t, %v", ok, err)
	}
	if left, err := f.admin.PTTL(ctx, f.prefix+"{p}:probe:0").Result(); err != nil || left <= 0 || left > ttl {
		t.Fatalf("probe slot's PTTL = %v, %v; want in (0, %v]", left, err, ttl)
	}
	if _, ok, _ := s.AcquireProbe(ctx, "p", 0, epochStart, ttl); ok {
		t.Fatal("slot taken twice within its ttl")
	}
	eventually(t, "the probe slot frees itself", func() bool {
		_, ok, err := s.AcquireProbe(ctx, "p", 0, epochStart, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	if took := time.Since(start); took < ttl-5*time.Millisecond {
		t.Errorf("slot freed after %v, before its ttl of %v", took, ttl)
	}
}

// TestBreakerStoreKeys: every key of a breaker expires on its own, and all of them hash to
// one Redis Cluster slot, the one of the breaker's name: each script touches one slot.
func TestBreakerStoreKeys(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	be, _ := f.replica(t)
	s := be.Breakers()
	names := []string{"openai", "yandex-gpt"}
	for _, name := range names {
		if _, ok, err := s.Swap(ctx, name, 0, breaker.Record{State: breaker.StateHalfOpen, Epoch: 1, Since: epochStart}); !ok || err != nil {
			t.Fatalf("swap: %t, %v", ok, err)
		}
		if _, err := s.Count(ctx, name, 1, true, epochStart, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.AcquireProbe(ctx, name, 1, epochStart, time.Minute); !ok || err != nil {
			t.Fatalf("AcquireProbe: %t, %v", ok, err)
		}
	}
	keys := f.keys(t)
	want := map[string]time.Duration{"breaker": recordTTL, "counts:1": time.Minute, "probe:1": time.Minute, "tokens": recordTTL}
	if len(keys) != len(names)*len(want) {
		t.Errorf("keys %q, want %d of each of %v", keys, len(want), names)
	}
	_, clusterErr := f.admin.ClusterKeySlot(ctx, "x").Result() // a standalone server refuses it
	for _, key := range keys {
		name := hashTag(key)
		if !slices.Contains(names, name) {
			t.Errorf("key %s hashes on %q, not on a breaker's name", key, name)
			continue
		}
		part := strings.TrimPrefix(key, f.prefix+"{"+name+"}:")
		limit, ok := want[part]
		if !ok {
			t.Errorf("unexpected key %s", key)
			continue
		}
		if left, err := f.admin.PTTL(ctx, key).Result(); err != nil || left <= 0 || left > limit {
			t.Errorf("PTTL of %s = %v, %v; want in (0, %v]", key, left, err, limit)
		}
		if clusterErr != nil {
			continue
		}
		slot, err1 := f.admin.ClusterKeySlot(ctx, key).Result()
		nameSlot, err2 := f.admin.ClusterKeySlot(ctx, name).Result()
		if err1 != nil || err2 != nil || slot != nameSlot {
			t.Errorf("key %s in slot %d (%v), its name %s in %d (%v)", key, slot, err1, name, nameSlot, err2)
		}
	}

	// Counting keeps the record of a breaker in use, however long since its last change.
	rec := f.prefix + "{openai}:breaker"
	if err := f.admin.PExpire(ctx, rec, time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Count(ctx, "openai", 1, false, epochStart, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if left, _ := f.admin.PTTL(ctx, rec).Result(); left < recordTTL-time.Minute {
		t.Errorf("record's PTTL after a count = %v, want about %v", left, recordTTL)
	}
}

// TestBreakerStoreCache: a replica caches the records it reads while its subscription is
// up, and the record another replica swaps in is pushed to it: Load then costs no round
// trip, and a closed breaker's Allow and Done cost one, the Count script.
func TestBreakerStoreCache(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, _ := f.replica(t)
	b, rt := f.replica(t)

	if rec, err := b.Breakers().Load(ctx, "p"); err != nil || rec != (breaker.Record{}) {
		t.Fatalf("Load = %+v, %v", rec, err)
	}
	if cmds := rt.take(); len(cmds) != 1 {
		t.Errorf("first Load: round trips %q, want one", cmds)
	}
	for range 10 {
		if _, err := b.Breakers().Load(ctx, "p"); err != nil {
			t.Fatal(err)
		}
	}
	if cmds := rt.take(); len(cmds) != 0 {
		t.Errorf("10 Loads of a cached closed record: round trips %q, want none", cmds)
	}

	open := breaker.Record{State: breaker.StateOpen, Epoch: 1, Since: epochStart, Until: epochStart.Add(time.Minute), Kind: afloat.Unavailable}
	want, ok, err := a.Breakers().Swap(ctx, "p", 0, open)
	if err != nil || !ok {
		t.Fatalf("Swap: %t, %v", ok, err)
	}
	eventually(t, "the push of the swap reaches the other replica", func() bool {
		rec, _ := cachedRecord(b, "p")
		return rec.Revision == want.Revision
	})
	if rec, err := b.Breakers().Load(ctx, "p"); err != nil || !sameRecord(rec, want) {
		t.Errorf("Load after the push = %+v, %v; want %+v", rec, err, want)
	}
	if cmds := rt.take(); len(cmds) != 0 {
		t.Errorf("Load of a pushed record: round trips %q, want none", cmds)
	}

	br, err := breaker.New("q", breaker.Config{Store: b.Breakers(), Clock: clockwork.NewFakeClockAt(epochStart)})
	if err != nil {
		t.Fatal(err)
	}
	call := func() {
		t.Helper()
		p, err := br.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Done(ctx, nil)
	}
	call() // reads and caches the record; Redis may load the script
	t.Logf("the first Allow and Done: round trips %q", rt.take())
	call()
	if cmds := rt.take(); !slices.Equal(cmds, []string{"evalsha"}) {
		t.Errorf("Allow and Done(success) of a closed breaker: round trips %q, want one evalsha (Count)", cmds)
	}
	const calls = 50
	for range calls {
		call()
	}
	if cmds := rt.take(); len(cmds) != calls {
		t.Errorf("%d calls: %d round trips (%q), want %d", calls, len(cmds), cmds, calls)
	}
	if n := br.StoreErrors(); n != 0 {
		t.Errorf("%d store errors", n)
	}
}

// TestBreakerStoreHealsCache: a cached record that Redis contradicts (its push was missed,
// or it expired and started over at revision 0) is read anew after the first Count or
// AcquireProbe that finds it out of its epoch, so the breaker keeps counting.
func TestBreakerStoreHealsCache(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, _ := f.replica(t)
	b, _ := f.replica(t)
	for _, tt := range []struct {
		name  string
		state breaker.State
		act   func(epoch uint64) bool // Count or AcquireProbe in the cached epoch; reports Current/ok
	}{
		{"count", breaker.StateClosed, func(epoch uint64) bool {
			c, err := b.Breakers().Count(ctx, "count", epoch, true, epochStart, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return c.Current
		}},
		{"probe", breaker.StateHalfOpen, func(epoch uint64) bool {
			_, ok, err := b.Breakers().AcquireProbe(ctx, "probe", epoch, epochStart, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, ok, err := a.Breakers().Swap(ctx, tt.name, 0, breaker.Record{State: tt.state, Epoch: 3, Since: epochStart})
			if err != nil || !ok {
				t.Fatalf("Swap: %t, %v", ok, err)
			}
			eventually(t, "the push reaches the other replica", func() bool {
				got, _ := cachedRecord(b, tt.name)
				return got.Revision == rec.Revision
			})
			// The record expires, as its TTL would have it: no push tells of that.
			if err := f.admin.Del(ctx, f.prefix+"{"+tt.name+"}:breaker").Err(); err != nil {
				t.Fatal(err)
			}
			if tt.act(3) {
				t.Fatal("the cached epoch is current, though Redis holds no record")
			}
			if got, err := b.Breakers().Load(ctx, tt.name); err != nil || got != (breaker.Record{}) {
				t.Fatalf("Load after the contradiction = %+v, %v; want the zero Record read anew", got, err)
			}
			if !tt.act(0) {
				t.Error("the record read anew is not current")
			}
		})
	}
}

// TestBreakerOverReplicas: breakers of three replicas share one state through Redis.
// Failures on one open it; the others skip calls once the opening is pushed to them, at no
// round trip; after the open period exactly one replica probes, and its success closes the
// breaker on every replica, ramping up.
func TestBreakerOverReplicas(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	clock := clockwork.NewFakeClockAt(epochStart)
	cfg := breaker.Config{ConsecutiveFailures: 3, Recovery: 10 * time.Second, Jitter: -1, Clock: clock}
	var (
		backends []*Backend
		trips    []*roundTrips
		breakers []*breaker.Breaker
	)
	for range 3 {
		be, rt := f.replica(t)
		cfg.Store = be.Breakers()
		br, err := breaker.New("openai", cfg)
		if err != nil {
			t.Fatal(err)
		}
		backends, trips, breakers = append(backends, be), append(trips, rt), append(breakers, br)
	}
	down := &afloat.ProviderError{Provider: "openai", Status: 503, Kind: afloat.Unavailable}
	for i := range 3 {
		p, err := breakers[0].Allow(ctx)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		p.Done(ctx, down)
	}
	if s := breakers[0].State(ctx); s != breaker.StateOpen {
		t.Fatalf("after 3 failures the breaker is %v, want open", s)
	}
	for i, be := range backends[1:] {
		eventually(t, "the opening reaches the other replicas", func() bool {
			rec, _ := cachedRecord(be, "openai")
			return rec.State == breaker.StateOpen
		})
		trips[i+1].take()
		if _, err := breakers[i+1].Allow(ctx); !errors.Is(err, breaker.ErrOpen) {
			t.Errorf("replica %d: Allow = %v, want ErrOpen", i+1, err)
		}
		if cmds := trips[i+1].take(); len(cmds) != 0 {
			t.Errorf("replica %d: Allow of an open breaker cost round trips %q, want none", i+1, cmds)
		}
	}

	clock.Advance(cfg.Recovery)
	permits := make([]breaker.Permit, len(breakers))
	errs := make([]error, len(breakers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, br := range breakers {
		wg.Go(func() {
			<-start
			permits[i], errs[i] = br.Allow(ctx)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && permits[i].Probe() && winner < 0:
			winner = i
		case err == nil:
			t.Errorf("replica %d was admitted too (probe %t)", i, permits[i].Probe())
		case !errors.Is(err, breaker.ErrOpen):
			t.Errorf("replica %d: Allow = %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no replica got the probe: %v", errs)
	}
	halfOpen, err := backends[winner].Breakers().Load(ctx, "openai")
	if err != nil || halfOpen.State != breaker.StateHalfOpen {
		t.Fatalf("record during the probe = %+v, %v; want half-open", halfOpen, err)
	}
	permits[winner].Done(ctx, nil)
	for i, be := range backends {
		eventually(t, "the close reaches every replica", func() bool {
			rec, _ := cachedRecord(be, "openai")
			return rec.State == breaker.StateClosed && rec.Epoch > halfOpen.Epoch
		})
		rec, err := be.Breakers().Load(ctx, "openai")
		if err != nil || !rec.RampUp || rec.Epoch != halfOpen.Epoch+1 || !rec.Since.Equal(clock.Now()) {
			t.Errorf("replica %d: record after the good probe = %+v, %v; want closed in epoch %d, ramping up from %v",
				i, rec, err, halfOpen.Epoch+1, clock.Now())
		}
		p, err := breakers[i].Allow(ctx)
		if err != nil || p.Probe() {
			t.Errorf("replica %d: Allow after the close = probe %t, %v; want an ordinary call", i, p.Probe(), err)
		}
		p.Done(ctx, nil)
		if n := breakers[i].StoreErrors(); n != 0 {
			t.Errorf("replica %d: %d store errors: it served from its local state", i, n)
		}
	}
}

// TestGateClosedPort: against a port where nothing listens, the first operation fails within
// about the Timeout, and then every operation fails at once with ErrUnavailable until Retry
// has passed; Health tells why, and Failures counts one failure of Redis.
func TestGateClosedPort(t *testing.T) {
	const timeout = 200 * time.Millisecond
	client := newTestClient(t, "redis://127.0.0.1:1/0", timeout)
	clock := clockwork.NewFakeClock()
	be, err := New(Options{Client: client, Prefix: "afloat-test:", Timeout: timeout, Retry: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	ctx := context.Background()

	start := time.Now()
	if _, err := be.Breakers().Load(ctx, "p"); err == nil {
		t.Fatal("Load succeeded against a closed port")
	}
	// The subscription may have shut the gate first; either way the call was bounded.
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("the first operation failed after %v, want about the timeout %v", took, timeout)
	}
	start = time.Now()
	const ops = 20
	for i := range ops {
		var err error
		if i%2 == 0 {
			_, err = be.Breakers().Load(ctx, "p")
		} else {
			_, _, err = be.LoadFlags(ctx)
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("operation %d while the gate is shut: %v, want ErrUnavailable", i, err)
		}
	}
	if took := time.Since(start); took > timeout {
		t.Errorf("%d operations refused by the gate took %v, want far under one timeout (%v)", ops, took, timeout)
	}
	// The refused dial, or the deadline of the operation that kept redialing it.
	if err := be.Health(); !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Health = %v, want the refused connection or the timeout", err)
	}
	if n := be.Failures(); n != 1 {
		t.Errorf("Failures = %d, want 1", n)
	}
}

// TestGateRetry: when Redis stops answering (a partition: the connections stay open, nothing
// comes back), the first operation fails after the Timeout; the gate then refuses every
// operation without a dial until Retry has passed on the Backend's clock, when one tries
// again; once Redis answers, the gate opens.
func TestGateRetry(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	px := newCutProxy(t, f.url)
	const timeout, retry = 300 * time.Millisecond, 5 * time.Second
	client := f.client(t, px.url, timeout)
	clock := clockwork.NewFakeClock()
	be := f.backend(t, client, Options{Timeout: timeout, Retry: retry, Clock: clock})
	f.settle(t, be) // the subscription has its connection, which it keeps
	if _, err := be.Breakers().Load(ctx, "warm"); err != nil {
		t.Fatal(err)
	}

	// The subscription pings after 2s without a message, and would find the cut too: this
	// test is about commands, and is over long before.
	f.settle(t, be)
	px.cut.Store(true)
	start := time.Now()
	_, err := be.Breakers().Load(ctx, "p")
	took := time.Since(start)
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("first Load while Redis is cut off: %v, want its own failure", err)
	}
	if took < timeout*9/10 || took > timeout+time.Second {
		t.Errorf("the first operation failed after %v, want about the timeout %v", took, timeout)
	}
	dials := px.accepted.Load()
	start = time.Now()
	for i := range 20 {
		if _, err := be.Breakers().Load(ctx, "p"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("operation %d while the gate is shut: %v, want ErrUnavailable", i, err)
		}
	}
	if took := time.Since(start); took > timeout {
		t.Errorf("20 operations refused by the gate took %v, want far under one timeout (%v)", took, timeout)
	}
	clock.Advance(retry - time.Millisecond)
	if _, _, err := be.LoadFlags(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("just before Retry has passed: %v, want ErrUnavailable", err)
	}
	if n := px.accepted.Load(); n != dials {
		t.Errorf("the gate let %d dials through while shut", n-dials)
	}
	if err := be.Health(); err == nil {
		t.Error("Health is nil while the gate is shut")
	}
	if n := be.Failures(); n != 1 {
		t.Errorf("Failures = %d, want 1", n)
	}

	clock.Advance(time.Millisecond)
	if _, err := be.Breakers().Load(ctx, "p"); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("Load after Retry: %v, want a new attempt that fails", err)
	}
	if n := px.accepted.Load(); n != dials+1 {
		t.Errorf("Load after Retry dialed %d times, want once", n-dials)
	}

	px.cut.Store(false)
	clock.Advance(retry)
	if _, err := be.Breakers().Load(ctx, "p"); err != nil {
		t.Errorf("Load once Redis answers again: %v", err)
	}
	if err := be.Health(); err != nil {
		t.Errorf("Health once Redis answers again: %v", err)
	}
	if n := be.Failures(); n != 1 {
		t.Errorf("Failures = %d, want 1: Redis failed once", n)
	}
}

// cutProxy forwards TCP connections to a Redis until cut: then it accepts connections and
// swallows what goes through them either way, as a network partition does.
type cutProxy struct {
	url      string // the Redis URL with the proxy's address
	target   string
	cut      atomic.Bool
	accepted atomic.Int64 // connections accepted: dials of the client

	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, redisURL string) *cutProxy {
	t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "redis" {
		t.Skipf("the proxy forwards plain TCP; AFLOAT_REDIS_URL is %s://", u.Scheme)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{target: u.Host}
	u.Host = ln.Addr().String()
	p.url = u.String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			p.serve(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go p.pipe(up, c)
	go p.pipe(c, up)
}

// pipe copies src to dst while the proxy is not cut, and drops what src sends while it is.
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
