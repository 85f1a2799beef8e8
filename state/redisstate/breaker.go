package redisstate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/redis/go-redis/v9"
)

// recordTTL is how long a breaker's record (and its token counter) outlives its last write
// or count: a provider removed from every replica's config leaves nothing behind for long,
// and the record of a provider in use never expires.
const recordTTL = 7 * 24 * time.Hour

// Breakers returns the breaker store: pass it as breaker.Config.Store to every replica's
// breakers.
func (b *Backend) Breakers() breaker.Store { return b.breakers }

// breakerStore is a breaker.Store in Redis. Keys of the breaker NAME, all in the slot of
// {NAME}:
//
//	PREFIX{NAME}:breaker          hash: the Record (revision, state, epoch, since, until, recovery, kind, ramp)
//	PREFIX{NAME}:counts:EPOCH     hash: the failure window's 10 buckets and the run of failures
//	PREFIX{NAME}:probe:EPOCH      string: the probe slot's holder, with Redis's own expiry
//	PREFIX{NAME}:tokens           counter of probe tokens
//
// Every write of a record publishes it ("b NAME FIELDS"), and the records are cached while
// the subscription is up, so that Load, which the breaker calls on every Allow, costs no
// round trip: a replica learns of another's opening within the push delay. A cached record
// that Redis contradicts (Count or AcquireProbe finds the record out of the epoch the cache
// holds: a push was missed, or the record expired and started over) is dropped, so the next
// Load reads it anew.
type breakerStore struct {
	b *Backend

	mu     sync.Mutex
	live   bool   // subscribed: pushed records keep the cache fresh
	gen    uint64 // moves each time the cache starts over; see keep
	cached map[string]breaker.Record
}

var _ breaker.Store = (*breakerStore)(nil)

func newBreakerStore(b *Backend) *breakerStore {
	return &breakerStore{b: b, cached: map[string]breaker.Record{}}
}

func (s *breakerStore) key(name, part string) string {
	return s.b.prefix + "{" + name + "}:" + part
}

// subscribed records whether pushes arrive; either way the cache starts over.
func (s *breakerStore) subscribed(live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = live
	s.gen++
	clear(s.cached)
}

// clear empties the cache when Redis failed: pushes may be lost until it answers again.
func (s *breakerStore) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	clear(s.cached)
}

// lookup returns the cached record of name, or the cache's generation, which keep takes with
// the record read from Redis instead.
func (s *breakerStore) lookup(name string) (rec breaker.Record, ok bool, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok = s.cached[name]
	return rec, ok, s.gen
}

// generation returns the cache's generation, to be taken before a round trip whose answer
// goes to keep.
func (s *breakerStore) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// keep caches rec, read from Redis in the cache's generation gen, if it is newer than what
// the cache holds. A record read in an earlier generation is not cached: the subscription
// (re)started, or Redis failed, while it was read, so the push of a change made just
// before may have been missed, and nothing would ever replace it.
func (s *breakerStore) keep(name string, rec breaker.Record, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live || gen != s.gen {
		return
	}
	if cur, ok := s.cached[name]; ok && cur.Revision >= rec.Revision {
		return
	}
	s.cached[name] = rec
}

// forget drops the cached record of name if it is in epoch, which Redis has just said is
// over. The cache missed a change, or the record expired and started over at revision 0,
// which no push of a lower revision could replace.
func (s *breakerStore) forget(name string, epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.cached[name]; ok && rec.Epoch == epoch {
		delete(s.cached, name)
	}
}

// pushed applies a published record: "NAME FIELDS".
func (s *breakerStore) pushed(payload string) {
	name, fields, ok := strings.Cut(payload, " ")
	if !ok {
		return
	}
	rec, err := decodeRecord(strings.Fields(fields))
	if err != nil {
		return
	}
	s.keep(name, rec, s.generation())
}

// Load implements breaker.Store.
func (s *breakerStore) Load(ctx context.Context, name string) (breaker.Record, error) {
	rec, ok, gen := s.lookup(name)
	if ok {
		return rec, nil
	}
	var vals []any
	err := s.b.do(ctx, func(ctx context.Context) error {
		var err error
		vals, err = s.b.c.HMGet(ctx, s.key(name, "breaker"), recordFields...).Result()
		return err
	})
	if err != nil {
		return breaker.Record{}, fmt.Errorf("redis state: load breaker %s: %w", name, err)
	}
	rec, err = decodeRecord(stringsOf(vals))
	if err != nil {
		return breaker.Record{}, fmt.Errorf("redis state: breaker %s: %w", name, err)
	}
	s.keep(name, rec, gen)
	return rec, nil
}

// swapScript: KEYS[1] the record; ARGV[1] the expected revision, ARGV[2] the channel,
// ARGV[3] the name, ARGV[4] the TTL in ms, ARGV[5..11] the new record's fields after
// revision. It answers {1} when it swapped, else {0, fields…} of the record that won.
var swapScript = redis.NewScript(`
local rec = redis.call('HMGET', KEYS[1], 'revision', 'state', 'epoch', 'since', 'until', 'recovery', 'kind', 'ramp')
local rev = tonumber(rec[1] or '0')
if rev ~= tonumber(ARGV[1]) then
  rec[1] = tostring(rev)
  return {0, rec[1], rec[2] or '', rec[3] or '', rec[4] or '', rec[5] or '', rec[6] or '', rec[7] or '', rec[8] or ''}
end
local next = tostring(rev + 1)
redis.call('HSET', KEYS[1], 'revision', next, 'state', ARGV[5], 'epoch', ARGV[6], 'since', ARGV[7],
  'until', ARGV[8], 'recovery', ARGV[9], 'kind', ARGV[10], 'ramp', ARGV[11])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PUBLISH', ARGV[2], 'b ' .. ARGV[3] .. ' ' .. next .. ' ' .. table.concat(ARGV, ' ', 5, 11))
return {1}
`)

// Swap implements breaker.Store.
func (s *breakerStore) Swap(ctx context.Context, name string, revision uint64, next breaker.Record) (breaker.Record, bool, error) {
	next.Revision = revision + 1
	args := append([]any{revision, s.b.channel(), name, recordTTL.Milliseconds()}, encodeRecord(next)[1:]...)
	gen := s.generation()
	var res []any
	err := s.b.do(ctx, func(ctx context.Context) error {
		var err error
		res, err = swapScript.Run(ctx, s.b.c, []string{s.key(name, "breaker")}, args...).Slice()
		return err
	})
	if err != nil {
		return breaker.Record{}, false, fmt.Errorf("redis state: swap breaker %s: %w", name, err)
	}
	if n, _ := res[0].(int64); n == 1 {
		s.keep(name, next, gen)
		return next, true, nil
	}
	cur, err := decodeRecord(stringsOf(res[1:]))
	if err != nil {
		return breaker.Record{}, false, fmt.Errorf("redis state: breaker %s: %w", name, err)
	}
	s.keep(name, cur, gen)
	return cur, false, nil
}

// countScript: KEYS[1] the record, KEYS[2] the epoch's counts; ARGV[1] the epoch, ARGV[2]
// 1 for a failure, ARGV[3] the bucket index (now / (window/10)), ARGV[4] the counts' TTL in
// ms, ARGV[5] the record's. It answers {0} when the record left the epoch, else {1, calls,
// failures, consecutive}, and keeps the record (if any) for another recordTTL.
var countScript = redis.NewScript(`
local epoch = redis.call('HGET', KEYS[1], 'epoch') or '0'
if epoch ~= ARGV[1] then return {0} end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local idx = tonumber(ARGV[3])
local slot = idx % 10
-- One read of the whole window, one write of the bucket: the script's cost is one hash.
local h = {}
local flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
local si, sc, sf = 'i' .. slot, 'c' .. slot, 'f' .. slot
if h[si] ~= ARGV[3] then
  h[si], h[sc], h[sf] = ARGV[3], '0', '0'
end
h[sc] = tostring(tonumber(h[sc] or '0') + 1)
local consecutive = 0
if ARGV[2] == '1' then
  h[sf] = tostring(tonumber(h[sf] or '0') + 1)
  consecutive = tonumber(h['run'] or '0') + 1
end
h['run'] = tostring(consecutive)
redis.call('HSET', KEYS[2], si, h[si], sc, h[sc], sf, h[sf], 'run', h['run'])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
local calls, failures = 0, 0
for i = 0, 9 do
  local bi = tonumber(h['i' .. i] or '-1')
  if bi and bi > idx - 10 and bi <= idx then
    calls = calls + tonumber(h['c' .. i] or '0')
    failures = failures + tonumber(h['f' .. i] or '0')
  end
end
return {1, calls, failures, consecutive}
`)

// Count implements breaker.Store.
func (s *breakerStore) Count(ctx context.Context, name string, epoch uint64, failed bool, now time.Time, window time.Duration) (breaker.Counts, error) {
	width := max(int64(window/10), 1)
	fail := 0
	if failed {
		fail = 1
	}
	keys := []string{s.key(name, "breaker"), s.key(name, "counts:"+strconv.FormatUint(epoch, 10))}
	var res []int64
	err := s.b.do(ctx, func(ctx context.Context) error {
		var err error
		// The counts outlive their window twice over (the buckets' indexes tell which calls
		// are in it), and at least a second: a TTL that rounds to 0ms would delete them at
		// once, and one of a few ms between two calls.
		countsTTL := max(2*window, time.Second).Milliseconds()
		res, err = countScript.Run(ctx, s.b.c, keys, epoch, fail, now.UnixNano()/width, countsTTL, recordTTL.Milliseconds()).Int64Slice()
		return err
	})
	if err != nil {
		return breaker.Counts{}, fmt.Errorf("redis state: count breaker %s: %w", name, err)
	}
	if len(res) < 4 || res[0] != 1 {
		s.forget(name, epoch)
		return breaker.Counts{}, nil
	}
	return breaker.Counts{Current: true, Calls: int(res[1]), Failures: int(res[2]), Consecutive: int(res[3])}, nil
}

// acquireScript: KEYS[1] the record, KEYS[2] the probe slot, KEYS[3] the token counter;
// ARGV[1] the epoch, ARGV[2] the slot's TTL in ms, ARGV[3] the counter's. It answers the
// token, 0 when the slot is held, or -1 when the record left the epoch.
var acquireScript = redis.NewScript(`
local epoch = redis.call('HGET', KEYS[1], 'epoch') or '0'
if epoch ~= ARGV[1] then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('SET', KEYS[2], token, 'PX', ARGV[2])
return token
`)

// AcquireProbe implements breaker.Store: one replica of the fleet gets the slot.
func (s *breakerStore) AcquireProbe(ctx context.Context, name string, epoch uint64, now time.Time, ttl time.Duration) (uint64, bool, error) {
	ep := strconv.FormatUint(epoch, 10)
	keys := []string{s.key(name, "breaker"), s.key(name, "probe:"+ep), s.key(name, "tokens")}
	var token int64
	err := s.b.do(ctx, func(ctx context.Context) error {
		var err error
		token, err = acquireScript.Run(ctx, s.b.c, keys, ep, max(ttl.Milliseconds(), 1), recordTTL.Milliseconds()).Int64()
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("redis state: probe breaker %s: %w", name, err)
	}
	if token < 0 {
		s.forget(name, epoch)
	}
	if token <= 0 {
		return 0, false, nil
	}
	return uint64(token), true, nil
}

// releaseScript deletes KEYS[1] if it holds ARGV[1].
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// ReleaseProbe implements breaker.Store.
func (s *breakerStore) ReleaseProbe(ctx context.Context, name string, epoch, token uint64) error {
	key := s.key(name, "probe:"+strconv.FormatUint(epoch, 10))
	err := s.b.do(ctx, func(ctx context.Context) error {
		return releaseScript.Run(ctx, s.b.c, []string{key}, strconv.FormatUint(token, 10)).Err()
	})
	if err != nil {
		return fmt.Errorf("redis state: release probe of breaker %s: %w", name, err)
	}
	return nil
}

// recordFields are the record hash's fields, in the order encodeRecord writes them.
var recordFields = []string{"revision", "state", "epoch", "since", "until", "recovery", "kind", "ramp"}

// encodeRecord returns rec's fields in recordFields' order: integers, times as Unix
// nanoseconds (0 for the zero time).
func encodeRecord(rec breaker.Record) []any {
	ramp := "0"
	if rec.RampUp {
		ramp = "1"
	}
	return []any{
		strconv.FormatUint(rec.Revision, 10), strconv.Itoa(int(rec.State)), strconv.FormatUint(rec.Epoch, 10),
		unixNano(rec.Since), unixNano(rec.Until), strconv.FormatInt(int64(rec.Recovery), 10), strconv.Itoa(int(rec.Kind)), ramp,
	}
}

func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

// decodeRecord reads the fields of encodeRecord, as a push or the swap script gives them;
// empty fields read as zero, so a record never written is the zero Record.
func decodeRecord(vals []string) (breaker.Record, error) {
	if len(vals) != len(recordFields) {
		return breaker.Record{}, fmt.Errorf("record of %d fields, want %d", len(vals), len(recordFields))
	}
	num := func(i int) (int64, error) {
		if vals[i] == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(vals[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("record field %s: %w", recordFields[i], err)
		}
		return n, nil
	}
	var n [7]int64
	for i := range n {
		v, err := num(i)
		if err != nil {
			return breaker.Record{}, err
		}
		n[i] = v
	}
	rec := breaker.Record{
		Revision: uint64(n[0]), State: breaker.State(n[1]), Epoch: uint64(n[2]),
		Since: fromNano(n[3]), Until: fromNano(n[4]), Recovery: time.Duration(n[5]), Kind: afloat.Kind(n[6]),
		RampUp: vals[7] == "1",
	}
	return rec, nil
}

func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// stringsOf returns HMGET's answer as strings, "" for a missing field.
func stringsOf(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i], _ = v.(string)
	}
	return out
}
