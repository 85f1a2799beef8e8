package redisstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/state"
	"github.com/redis/go-redis/v9"
)

var (
	_ state.Store   = (*Backend)(nil)
	_ state.Watcher = (*Backend)(nil)
)

// The flag document is the hash PREFIX{state}:flags (fields version and doc), the faults the
// hash PREFIX{state}:faults (a field per provider: the fault and its expiry as JSON). Every
// write publishes "s", on which each replica reloads both.
func (b *Backend) flagsKey() string  { return b.prefix + "{state}:flags" }
func (b *Backend) faultsKey() string { return b.prefix + "{state}:faults" }

// LoadFlags implements state.Store.
func (b *Backend) LoadFlags(ctx context.Context) (*flags.Document, uint64, error) {
	var vals []any
	err := b.do(ctx, func(ctx context.Context) error {
		var err error
		vals, err = b.c.HMGet(ctx, b.flagsKey(), "version", "doc").Result()
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("redis state: load flags: %w", err)
	}
	v, _ := vals[0].(string)
	raw, _ := vals[1].(string)
	if v == "" || raw == "" {
		return nil, 0, nil
	}
	version, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("redis state: flags version %q: %w", v, err)
	}
	var doc flags.Document
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, 0, fmt.Errorf("redis state: flags document: %w", err)
	}
	return &doc, version, nil
}

// swapFlagsScript: KEYS[1] the flags; ARGV[1] the expected version, ARGV[2] the document,
// ARGV[3] the channel. It answers 1 when it swapped.
var swapFlagsScript = redis.NewScript(`
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'version', tostring(v + 1), 'doc', ARGV[2])
redis.call('PUBLISH', ARGV[3], 's')
return 1
`)

// SwapFlags implements state.Store.
func (b *Backend) SwapFlags(ctx context.Context, version uint64, doc *flags.Document) (bool, error) {
	if doc == nil { // it would be saved as JSON null and read back as an empty document
		return false, errors.New("redis state: save flags: the document is nil")
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return false, fmt.Errorf("redis state: save flags: %w", err)
	}
	var n int64
	err = b.do(ctx, func(ctx context.Context) error {
		var err error
		n, err = swapFlagsScript.Run(ctx, b.c, []string{b.flagsKey()}, version, raw, b.channel()).Int64()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("redis state: save flags: %w", err)
	}
	return n == 1, nil
}

// savedFault is a fault as the faults hash keeps it.
type savedFault struct {
	Fault fault.Fault `json:"fault"`
	// ExpiresMS is the Unix time in ms when it clears itself; 0: never.
	ExpiresMS int64 `json:"expires_ms,omitempty"`
}

// LoadFaults implements state.Store. It returns expired faults too; State drops them.
func (b *Backend) LoadFaults(ctx context.Context) (map[string]state.Fault, error) {
	var all map[string]string
	err := b.do(ctx, func(ctx context.Context) error {
		var err error
		all, err = b.c.HGetAll(ctx, b.faultsKey()).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redis state: load faults: %w", err)
	}
	out := make(map[string]state.Fault, len(all))
	for name, raw := range all {
		var sf savedFault
		if err := json.Unmarshal([]byte(raw), &sf); err != nil {
			return nil, fmt.Errorf("redis state: fault of %s: %w", name, err)
		}
		f := state.Fault{Fault: sf.Fault}
		if sf.ExpiresMS != 0 {
			f.Expires = time.UnixMilli(sf.ExpiresMS)
		}
		out[name] = f
	}
	return out, nil
}

// saveFaultScript: KEYS[1] the faults; ARGV[1] the provider, ARGV[2] the fault ("" clears),
// ARGV[3] the channel.
var saveFaultScript = redis.NewScript(`
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], 's')
return 1
`)

// SaveFault implements state.Store.
func (b *Backend) SaveFault(ctx context.Context, provider string, f state.Fault) error {
	var raw []byte
	if f.Fault.Mode != fault.ModeNone {
		sf := savedFault{Fault: f.Fault}
		if !f.Expires.IsZero() {
			sf.ExpiresMS = f.Expires.UnixMilli()
		}
		var err error
		if raw, err = json.Marshal(sf); err != nil {
			return fmt.Errorf("redis state: save fault of %s: %w", provider, err)
		}
	}
	err := b.do(ctx, func(ctx context.Context) error {
		return saveFaultScript.Run(ctx, b.c, []string{b.faultsKey()}, provider, string(raw), b.channel()).Err()
	})
	if err != nil {
		return fmt.Errorf("redis state: save fault of %s: %w", provider, err)
	}
	return nil
}

// Watch implements state.Watcher: changed runs on the subscription's goroutine after every
// change another replica (or this one) published, and after every (re)subscription. A
// Backend has one callback; a second Watch replaces the first. It returns at once; the
// callback stops with ctx or Close.
func (b *Backend) Watch(ctx context.Context, changed func()) {
	fn := func() {
		if ctx.Err() == nil {
			changed()
		}
	}
	b.changed.Store(&fn)
}
