package redisstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/afloat-dev/afloat/state"
	"github.com/redis/go-redis/v9"
)

// The drills are the hash PREFIX{state}:drills, a field per scope holding state.Drills as
// JSON; a save publishes "s", on which each replica reloads them with the flags and faults.
func (b *Backend) drillsKey() string { return b.prefix + "{state}:drills" }

// saveDrillScript: KEYS[1] the drills; ARGV[1] the scope, ARGV[2] the drill as JSON,
// ARGV[3] 1 when it passed, ARGV[4] the channel. It keeps {"last", "last_passed"}.
var saveDrillScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local ds = {}
if cur then ds = cjson.decode(cur) end
local d = cjson.decode(ARGV[2])
ds['last'] = d
if ARGV[3] == '1' then ds['last_passed'] = d end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(ds))
redis.call('PUBLISH', ARGV[4], 's')
return 1
`)

// SaveDrill implements state.Store.
func (b *Backend) SaveDrill(ctx context.Context, d state.Drill) error {
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	passed := 0
	if d.Passed {
		passed = 1
	}
	err = b.do(ctx, func(ctx context.Context) error {
		return saveDrillScript.Run(ctx, b.c, []string{b.drillsKey()}, d.Scope, raw, passed, b.channel()).Err()
	})
	if err != nil {
		return fmt.Errorf("redis state: save drill of %s: %w", d.Scope, err)
	}
	return nil
}

// LoadDrills implements state.Store.
func (b *Backend) LoadDrills(ctx context.Context) (map[string]state.Drills, error) {
	var all map[string]string
	err := b.do(ctx, func(ctx context.Context) error {
		var err error
		all, err = b.c.HGetAll(ctx, b.drillsKey()).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redis state: load drills: %w", err)
	}
	out := make(map[string]state.Drills, len(all))
	for scope, raw := range all {
		var ds state.Drills
		if err := json.Unmarshal([]byte(raw), &ds); err != nil {
			return nil, fmt.Errorf("redis state: drills of %s: %w", scope, err)
		}
		out[scope] = ds
	}
	return out, nil
}
