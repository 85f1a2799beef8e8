package redisstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/afloat-dev/afloat/state"
	"github.com/redis/go-redis/v9"
)

// The canary decisions are the hash PREFIX{state}:canaries, a field per task holding its
// state.Canary as JSON; a save publishes "s", on which each replica reloads them with the
// flags and faults.
func (b *Backend) canariesKey() string { return b.prefix + "{state}:canaries" }

// saveCanaryScript: KEYS[1] the canaries; ARGV[1] the task, ARGV[2] the decision as JSON,
// ARGV[3] the channel, ARGV[4] the decision's fingerprint. A decision kept for the same
// fingerprint stands (0: nothing written); else the write and its notification are one
// step, so that no replica misses it.
var saveCanaryScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local ok, kept = pcall(cjson.decode, cur)
  if ok and type(kept) == 'table' and kept['fingerprint'] == ARGV[4] then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], 's')
return 1
`)

// SaveCanary implements state.Store.
func (b *Backend) SaveCanary(ctx context.Context, c state.Canary) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("redis state: save canary of %s: %w", c.Task, err)
	}
	err = b.do(ctx, func(ctx context.Context) error {
		return saveCanaryScript.Run(ctx, b.c, []string{b.canariesKey()}, c.Task, string(raw), b.channel(), c.Fingerprint).Err()
	})
	if err != nil {
		return fmt.Errorf("redis state: save canary of %s: %w", c.Task, err)
	}
	return nil
}

// LoadCanaries implements state.Store.
func (b *Backend) LoadCanaries(ctx context.Context) (map[string]state.Canary, error) {
	var all map[string]string
	err := b.do(ctx, func(ctx context.Context) error {
		var err error
		all, err = b.c.HGetAll(ctx, b.canariesKey()).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redis state: load canaries: %w", err)
	}
	out := make(map[string]state.Canary, len(all))
	for task, raw := range all {
		var c state.Canary
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return nil, fmt.Errorf("redis state: canary of %s: %w", task, err)
		}
		out[task] = c
	}
	return out, nil
}
