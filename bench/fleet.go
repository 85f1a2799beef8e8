package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// fleet runs three gateway replicas in front of a dead primary, round robin, twice: sharing
// their breakers in Redis (state.backend redis) and each on its own (local), and counts the
// calls the primary got at the mock. It is skipped when Redis does not answer.
func fleet(ctx context.Context, p plan, r *report) error {
	r.printf("## 5. fleet: three replicas, shared state or not\n\n")
	url := os.Getenv("AFLOAT_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("AFLOAT_REDIS_URL: %w", err)
	}
	rc := redis.NewClient(opts)
	defer rc.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	err = rc.Ping(pctx).Err()
	cancel()
	if err != nil {
		r.printf("Skipped: Redis at %s does not answer (%v). Set AFLOAT_REDIS_URL to run it.\n\n", redactURL(url), err)
		r.skip("fleet: calls to a dead primary ≤ trip threshold + one probe per recovery period", "Redis does not answer")
		return nil
	}

	const (
		replicas  = 3
		rate      = 150
		threshold = 5
		recovery  = 2 * time.Second
	)
	d := p.dur(15*time.Second, 3*time.Second)
	defaults := []string{
		fmt.Sprintf("breaker: {consecutive_failures: %d, recovery: %s, growth: 1, jitter: 0, ramp_up: 0s}", threshold, recovery),
		"retry: {max: 0}",
	}
	type result struct {
		name           string
		calls, answers int
		sent           int
		opened         []int
	}
	var results []result
	for _, shared := range []bool{true, false} {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		primary, err := startUpstream("primary", upstreamOptions{})
		if err != nil {
			return err
		}
		primary.SetFail(503)
		backup, err := startUpstream("backup", upstreamOptions{})
		if err != nil {
			primary.Close()
			return err
		}
		state, name := "", "local (no shared state)"
		prefix := fmt.Sprintf("afloat-bench-%d-%d:", os.Getpid(), time.Now().UnixNano())
		if shared {
			state, name = fmt.Sprintf("{backend: redis, redis: {url: %q, prefix: %q}}", url, prefix), "redis (shared breakers)"
		}
		var gws []*instance
		closeAll := func() {
			for _, g := range gws {
				g.Close()
			}
			primary.Close()
			backup.Close()
			if shared {
				cleanPrefix(rc, prefix)
			}
		}
		for range replicas {
			g, err := startGateway(gwConfig{
				Providers: []gwProvider{{Name: "primary", URL: primary.URL}, {Name: "backup", URL: backup.URL}},
				Defaults:  defaults, State: state,
				Routes: []gwRoute{{Name: "chat", Budget: 10 * time.Second}},
			})
			if err != nil {
				closeAll()
				return err
			}
			gws = append(gws, g)
		}
		client := newClient(256)
		calls := make([]Call, replicas)
		for i, g := range gws {
			calls[i] = chatCall(client, g.URL+"/v1/chat/completions", "chat", "backup")
		}
		var next atomic.Int64
		run := OpenLoop{Rate: rate, Duration: d}.Run(ctx, func(ctx context.Context, at time.Time) Outcome {
			return calls[int(next.Add(1)-1)%replicas](ctx, at)
		})
		res := result{name: name, calls: int(primary.Calls()), answers: run.OK(), sent: len(run.Outcomes)}
		for _, g := range gws {
			res.opened = append(res.opened, g.Opened("primary"))
		}
		results = append(results, res)
		client.CloseIdleConnections()
		closeAll()
	}

	bound := threshold + int(math.Ceil(float64(d)/float64(recovery)))
	r.printf("Three replicas in one process, round robin, %d req/s open loop for %s, route `chat` [primary, backup]; "+
		"the primary mock answers 503 throughout. Breaker: %d consecutive failures, recovery %s, growth 1, no jitter, no ramp-up; "+
		"retries off, no background probes (half-open probes are user calls). "+
		"Bound for one fleet: %d (trip) + one probe per recovery period (%d) = %d.\n\n",
		rate, d, threshold, recovery, threshold, bound-threshold, bound)
	var rows [][]string
	for _, res := range results {
		rows = append(rows, []string{res.name, fmt.Sprint(res.calls), fmt.Sprint(bound), fmt.Sprint(res.opened),
			fmt.Sprintf("%d of %d", res.answers, res.sent)})
	}
	r.table([]string{"state", "calls to the dead primary", "bound (one fleet)", "breaker openings per replica", "answered by the backup"}, rows)
	r.check(fmt.Sprintf("fleet on Redis: calls to a dead primary ≤ %d trip + one probe per %s recovery = %d", threshold, recovery, bound),
		fmt.Sprintf("%d (without shared state: %d)", results[0].calls, results[1].calls), results[0].calls <= bound)
	return nil
}

// cleanPrefix deletes every key the benchmark's replicas wrote.
func cleanPrefix(rc *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		_ = rc.Del(ctx, keys[:n]...).Err()
		keys = keys[n:]
	}
}

// redactURL drops a password from a Redis URL before it is printed.
func redactURL(u string) string {
	if at := strings.LastIndex(u, "@"); at >= 0 {
		if i := strings.Index(u, "://"); i >= 0 && i < at {
			return u[:i+3] + "…" + u[at:]
		}
	}
	return u
}
