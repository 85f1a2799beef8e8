package redisstate_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/state"
	"github.com/afloat-dev/afloat/state/redisstate"
	"github.com/afloat-dev/afloat/telemetry"
)

// The benchmarks of this file measure what the redis backend adds to one call over the
// local one: BenchmarkBreakerCall a breaker's Allow and Done alone, BenchmarkTaskCall a whole
// task call through the engine, wired as config.Build wires state.backend redis (the
// breaker store in Redis, the flags in a flags.Memory kept by a state.State over the
// Backend). Each reports, besides ns/op, the p50 and p99 of the calls' latencies and the
// round trips to Redis per call, counted by a go-redis hook on the Backend's client:
// breaker_rt/op for commands on a breaker's keys, flags_rt/op for those on the flags and
// faults ({state} keys), redis_rt/op for all. BenchmarkRedisPing is the bare round trip
// they are read against.
//
//	AFLOAT_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' \
//	  -bench 'BenchmarkBreakerCall|BenchmarkTaskCall' -benchtime 2000x -count 6 ./state/redisstate

// benchRedisURL returns the Redis of AFLOAT_REDIS_URL, or skips the benchmark.
func benchRedisURL(b *testing.B) string {
	b.Helper()
	url := os.Getenv("AFLOAT_REDIS_URL")
	if url == "" {
		b.Skip("AFLOAT_REDIS_URL is not set: these benchmarks need a real Redis")
	}
	return url
}

// benchHook is a redis.Hook that counts the round trips of a client: one per command, one
// per pipeline, by the keys the command touches. It is safe for concurrent use.
type benchHook struct {
	all, flags, breaker, dials atomic.Int64

	mu   sync.Mutex
	cmds map[string]int64 // "evalsha breaker": round trips by command and key kind
}

func newBenchHook() *benchHook { return &benchHook{cmds: map[string]int64{}} }

func (h *benchHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *benchHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd.Args())
		return next(ctx, cmd)
	}
}

func (h *benchHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			h.count(cmds[0].Args()) // one round trip, named after its first command
		}
		return next(ctx, cmds)
	}
}

// count records one round trip of the command args.
func (h *benchHook) count(args []any) {
	h.all.Add(1)
	name := strings.ToLower(fmt.Sprint(args[0]))
	kind := benchKeyKind(args)
	switch kind {
	case "flags":
		h.flags.Add(1)
	case "breaker":
		h.breaker.Add(1)
	}
	h.mu.Lock()
	h.cmds[name+" "+kind]++
	h.mu.Unlock()
}

// benchKeyKind tells what the command args touch by their first key: "flags" for the
// {state} keys (the flag document and the faults), "breaker" for a breaker's keys, "other"
// for anything else (a command without keys).
func benchKeyKind(args []any) string {
	key := ""
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) > 3 && fmt.Sprint(args[2]) != "0" {
			key = fmt.Sprint(args[3])
		}
	default:
		if len(args) > 1 {
			key = fmt.Sprint(args[1])
		}
	}
	switch {
	case strings.Contains(key, "{state}:"):
		return "flags"
	case strings.Contains(key, "}:"):
		return "breaker"
	}
	return "other"
}

// reset zeroes the counts.
func (h *benchHook) reset() {
	h.all.Store(0)
	h.flags.Store(0)
	h.breaker.Store(0)
	h.dials.Store(0)
	h.mu.Lock()
	clear(h.cmds)
	h.mu.Unlock()
}

// summary lists the round trips per call by command, for the log.
func (h *benchHook) summary(calls int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var parts []string
	for k, n := range h.cmds {
		parts = append(parts, fmt.Sprintf("%s %.3f", k, float64(n)/float64(calls)))
	}
	slices.Sort(parts)
	return fmt.Sprintf("round trips per call: %s; dials %d", strings.Join(parts, ", "), h.dials.Load())
}

// benchBackend is a Backend over the Redis of AFLOAT_REDIS_URL, with keys under a prefix of
// its own (deleted at the end) and the client's round trips counted by the hook it returns.
func benchBackend(b *testing.B) (*redisstate.Backend, *benchHook) {
	b.Helper()
	client, err := redisstate.NewClient(benchRedisURL(b), redisstate.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		b.Fatalf("redis at AFLOAT_REDIS_URL: %v", err)
	}
	hook := newBenchHook()
	client.AddHook(hook)
	prefix := fmt.Sprintf("afloat-bench-%d-%d:", os.Getpid(), time.Now().UnixNano())
	backend, err := redisstate.New(redisstate.Options{Client: client, Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = backend.Close()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		_ = client.Close()
	})
	return backend, hook
}

// benchWarm runs op until one run costs at most one round trip to Redis (the subscription
// is up and the breaker's record cached; the scripts are loaded), then 200 more runs, so
// that the measured calls are the steady state. hook is nil for the local backend.
func benchWarm(b *testing.B, hook *benchHook, op func()) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for hook != nil {
		before := hook.all.Load()
		op()
		if hook.all.Load()-before <= 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("after 5s every call still costs more than one round trip: %s", hook.summary(1))
		}
	}
	for range 200 {
		op()
	}
}

// benchMeasure runs op in the benchmark's loop, timing each run, and reports the p50 and
// p99 of those times in µs and, when hook is not nil, the round trips per run (0 for the
// local backend, which has none).
func benchMeasure(b *testing.B, hook *benchHook, op func()) {
	b.Helper()
	if hook != nil {
		hook.reset()
	}
	times := make([]time.Duration, 0, 4096)
	for b.Loop() {
		start := time.Now()
		op()
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	n := len(times)
	pct := func(q float64) float64 {
		i := max(int(q*float64(n)+0.5)-1, 0) // nearest rank
		return float64(times[min(i, n-1)].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	var all, fl, br float64
	if hook != nil {
		all, fl, br = float64(hook.all.Load()), float64(hook.flags.Load()), float64(hook.breaker.Load())
		b.Log(hook.summary(n))
	}
	b.ReportMetric(all/float64(n), "redis_rt/op")
	b.ReportMetric(fl/float64(n), "flags_rt/op")
	b.ReportMetric(br/float64(n), "breaker_rt/op")
}

// BenchmarkBreakerCall is one Allow and one Done(nil) of a closed breaker: over a
// MemoryStore (local), and over the redis backend's store (redis), where Allow reads the
// cached record and Done counts the success with one script.
func BenchmarkBreakerCall(b *testing.B) {
	for _, backend := range []string{"local", "redis"} {
		b.Run(backend, func(b *testing.B) {
			var store breaker.Store = breaker.NewMemoryStore()
			var hook *benchHook
			if backend == "redis" {
				be, h := benchBackend(b)
				store, hook = be.Breakers(), h
			}
			br, err := breaker.New("bench", breaker.Config{Recovery: time.Hour, MaxRecovery: time.Hour, Store: store})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			op := func() {
				p, err := br.Allow(ctx)
				if err != nil {
					b.Fatal(err)
				}
				p.Done(ctx, nil)
			}
			benchWarm(b, hook, op)
			benchMeasure(b, hook, op)
			if n := br.StoreErrors(); n != 0 {
				b.Fatalf("%d store errors: the calls were served locally", n)
			}
		})
	}
}

// benchStatic answers at once with a prebuilt answer, so that a task call costs afloat's
// own work and none of a model's.
type benchStatic struct{ resp *afloat.Response }

func (s benchStatic) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	return s.resp, nil
}

const benchSchema = `{
  "type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
  },
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false
}`

// BenchmarkTaskCall is one whole call of a one-tier task answered by its provider at once:
// flags, gates, breaker, template, contract check, metrics. The redis engine is wired as
// config.Build wires state.backend redis: its breaker in the Backend's store, its flags in
// a flags.Memory that a state.State over the Backend keeps.
func BenchmarkTaskCall(b *testing.B) {
	for _, backend := range []string{"local", "redis"} {
		b.Run(backend, func(b *testing.B) {
			var (
				store     state.Store = state.NewMemory()
				breakers  breaker.Store
				hook      *benchHook
				ctx       = context.Background()
				mem       = flags.NewMemory()
				providerP = fault.Wrap("p0", benchStatic{&afloat.Response{
					Content: `{"department":"technical","is_urgent":0.8,"urgency_score":2}`,
					Usage:   afloat.Usage{InputTokens: 120, OutputTokens: 30},
				}}, nil)
			)
			if backend == "redis" {
				be, h := benchBackend(b)
				store, breakers, hook = be, be.Breakers(), h
			}
			metrics, err := telemetry.New(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			e, err := cascade.New(cascade.Config{
				Providers: []cascade.ProviderConfig{{Name: "p0", Provider: providerP,
					Breaker: breaker.Config{Store: breakers}, Probe: cascade.ProbeOff}},
				Flags: mem, Metrics: metrics,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = e.Close() })
			tpl, err := prompt.Parse("triage.v1.tmpl", "--- system\nTriage the ticket as JSON.\n--- user\nSubject: {{.subject}}\nMessage: {{.message}}\n")
			if err != nil {
				b.Fatal(err)
			}
			task, err := e.Task(cascade.TaskConfig{
				Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(benchSchema),
				Cascade:   []cascade.Tier{{Provider: "p0", Prompt: tpl}},
				Heuristic: cascade.Rules{{Default: map[string]any{"is_urgent": 0.2, "urgency_score": 0.5, "department": nil}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			pct := 100
			if err := mem.Set(ctx, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: &pct}}}); err != nil {
				b.Fatal(err)
			}
			st, err := state.New(ctx, state.Options{Kind: backend, Store: store, Flags: mem,
				Faults: map[string]*fault.Provider{"p0": providerP}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() }) // closes the Backend too; benchBackend's Close then returns at once
			in := afloat.Input{"subject": "Сайт не работает", "message": "Ошибка 502 при входе"}
			op := func() {
				res, err := task.RunJSON(ctx, in)
				if err != nil || res.Source != afloat.SourceModel {
					b.Fatal(res, err)
				}
			}
			benchWarm(b, hook, op)
			benchMeasure(b, hook, op)
			if n := e.Breaker("p0").StoreErrors(); n != 0 {
				b.Fatalf("%d store errors: the calls were served locally", n)
			}
		})
	}
}

// BenchmarkRedisPing is one PING through a client made as the Backend's is (NewClient): the
// bare round trip to Redis, against which the one round trip of a breaker call is read.
func BenchmarkRedisPing(b *testing.B) {
	client, err := redisstate.NewClient(benchRedisURL(b), redisstate.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	hook := newBenchHook()
	client.AddHook(hook)
	ctx := context.Background()
	op := func() {
		if err := client.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	benchWarm(b, hook, op)
	benchMeasure(b, hook, op)
}
