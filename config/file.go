package config

import (
	"fmt"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// File is a config file as loaded: every key of shared/DESIGN.md §4, with each default filled
// in where its key was left out (so a loaded File holds the values in force, and a field's
// "Absent means" is what Load put there) and relative paths made absolute against the file's
// folder. Providers, tasks and routes keep
// the order the file wrote them in. A File is plain data: read it from any goroutine, but do
// not modify it while another reads it.
type File struct {
	// Dir is the folder relative paths were resolved against: the config file's folder.
	Dir string

	Server    Server      `yaml:"server"`
	Tenants   []*Tenant   `yaml:"tenants,keyed"`
	State     State       `yaml:"state"`
	Review    Review      `yaml:"review"`
	Operators []*Operator `yaml:"operators,keyed"`
	Flags     Flags       `yaml:"flags"`
	Telemetry Telemetry   `yaml:"telemetry"`
	Defaults  Defaults    `yaml:"defaults"`
	Providers []*Provider `yaml:"providers,keyed"`
	Tasks     []*Task     `yaml:"tasks,keyed"`
	Routes    []*Route    `yaml:"routes,keyed"`
	Alerts    Alerts      `yaml:"alerts"`
	Drill     Drill       `yaml:"drill"`

	// lines maps each key path the file wrote to its line; a path absent here was left out.
	lines map[string]int
	// invalid holds the providers, tasks and routes ("tasks.triage") that had errors, so
	// that Check can build the rest.
	invalid map[string]bool
	// legacyMemory: state.backend says memory, the former name of local (Check warns).
	legacyMemory bool
	// version and digests are what the text and the files it names were at load (stamp).
	version string
	digests map[string]string
}

// Provider returns the provider named name, or nil.
func (f *File) Provider(name string) *Provider {
	for _, p := range f.Providers {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Task returns the task named name, or nil.
func (f *File) Task(name string) *Task {
	for _, t := range f.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Route returns the route named name, or nil.
func (f *File) Route(name string) *Route {
	for _, r := range f.Routes {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Line returns the line the key path was written on, or 0 when the file left it out.
func (f *File) Line(path string) int { return f.lines[path] }

// Server is the gateway's listener.
type Server struct {
	// Listen is the address the gateway listens on. Absent means 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// AdminToken guards the admin API and the console. Absent (or empty) turns them off;
	// otherwise it holds at least MinTokenLen bytes and equals no other credential.
	AdminToken string `yaml:"admin_token"`
	// MaxBody caps a request body. Absent means 1 MiB.
	MaxBody Size `yaml:"max_body"`
	// LogLevel is the least severe level `afloat serve` logs: debug, info, warn or error;
	// serve's -log-level flag overrides it. Absent means info.
	LogLevel string `yaml:"log_level"`
	// DebugListen is a second listener, host:port on a loopback address only, that serves
	// the Go profiler (net/http/pprof) under /debug/pprof/ and nothing else. It has no
	// authentication, so a non-loopback address is an error. Absent serves no profiler.
	DebugListen string `yaml:"debug_listen"`
	// AccessLog is what the gateway's access log writes: on (a line per request), errors
	// (only requests answered 4xx or 5xx) or off. Degraded answers are logged apart, their
	// failed attempts at info, whatever it says. Absent means on.
	AccessLog string `yaml:"access_log"`
	// DefaultRoute names the route that answers a chat or messages call whose model is
	// neither a route's name nor an alias of one (routes.<name>.models). Absent answers those
	// 404.
	DefaultRoute string `yaml:"default_route"`
	// ShedLatency is when afloat counts itself saturated and sheds calls: the 99th
	// percentile of the time its goroutines wait to be scheduled, over a quarter second. At it
	// enrichment calls are shed (answered at once by their policy, reason shed); at twice it
	// assistance calls too; critical calls never. "off" sheds nothing. Absent means 200ms.
	ShedLatency string `yaml:"shed_latency"`
}

// Tenant is one client of the gateway and its keys.
type Tenant struct {
	// Name is the tenant id, the key it is written under.
	Name string `yaml:"-"`
	// Keys are the tenant's client keys (Authorization: Bearer). At least one; each equals no
	// other credential (another tenant's key, the admin or an operator token).
	Keys []string `yaml:"keys"`
}

// State says where breakers, flags and faults live.
type State struct {
	// Backend is "local" (one process: breakers in memory, flags and faults in the SQLite
	// file beside the review queue, so that a kill switch survives a restart) or "redis" (a
	// fleet: every replica shares them). Absent means local; "memory", its former name, is
	// read as local (Check warns).
	Backend string `yaml:"backend"`
	// Redis is the redis backend's server; required when Backend is redis.
	Redis Redis `yaml:"redis"`
	// OnFailure is what a replica does when Redis fails: "local" keeps serving on its own
	// breakers and its last known flags and faults, and rejoins when Redis answers; "fail"
	// answers 503 to calls and to /readyz until it does. Absent means local.
	OnFailure string `yaml:"on_failure"`
}

// Redis is a redis server, a Sentinel set or a Cluster.
type Redis struct {
	// URL is the server ("redis://[user:password@]127.0.0.1:6379/0", rediss:// for TLS;
	// more seed addresses as "?addr=host:port&addr=…"); required with the redis backend.
	URL string `yaml:"url"`
	// Prefix starts every key and the pub/sub channel. Absent means "afloat:".
	Prefix string `yaml:"prefix"`
	// Cluster makes the client a Redis Cluster client, even with one seed address.
	Cluster bool `yaml:"cluster"`
	// MasterName makes the client a Sentinel client: the URL's addresses are the sentinels'.
	MasterName string `yaml:"master_name"`
	// Timeout bounds every command; a slower Redis counts as failed. Absent means 100ms.
	Timeout time.Duration `yaml:"timeout"`
}

// Review configures the human review queue.
type Review struct {
	// Store is "sqlite" (embedded) or "postgres" (a fleet). Absent means sqlite.
	Store    string   `yaml:"store"`
	SQLite   SQLite   `yaml:"sqlite"`
	Postgres Postgres `yaml:"postgres"`
	// ClaimTTL is how long an operator's claim holds before the item is pending again.
	// Absent means 15m; 0s means claims never lapse.
	ClaimTTL time.Duration `yaml:"claim_ttl"`
	// Retention is how long resolved and rejected items are kept. Absent means forever.
	Retention time.Duration `yaml:"retention"`
	// Webhook is told when an item is resolved or rejected (package review/webhook): a
	// signed POST of the answer, retried, recorded in the store. Absent means no webhook:
	// callers poll GET /v1/reviews/{id}.
	Webhook Webhook `yaml:"webhook"`
}

// SQLite is the embedded review store.
type SQLite struct {
	// Path is the database file, relative to the config file's folder. Absent means afloat.db
	// beside the config file.
	Path string `yaml:"path"`
}

// Postgres is the review store of a fleet.
type Postgres struct {
	// URL is the database ("postgres://user:${PGPASSWORD}@db:5432/afloat?search_path=afloat",
	// or a key=value DSN); required when Review.Store is postgres. The tables go in the first
	// schema of its search_path.
	URL string `yaml:"url"`
	// MaxPending caps the items not answered yet (pending or claimed), across every gateway
	// of the database: a critical call beyond it answers 503, never a default. Absent or 0
	// means no cap.
	MaxPending int `yaml:"max_pending"`
}

// Webhook is an HTTP endpoint told of events.
type Webhook struct {
	// URL receives a POST per event, http or https; empty means no webhook. It never
	// reaches a log line (it often holds a token).
	URL string `yaml:"url"`
	// Secret signs each body: X-Afloat-Signature: t=<unix>,v1=<hex HMAC-SHA256 over
	// "<t>.<body>">. Required with a URL: at least MinTokenLen bytes, distinct from every
	// other credential.
	Secret afloat.Secret `yaml:"secret"`
}

// Operator is a person who answers review items.
type Operator struct {
	// Name is the operator's name, the key it is written under.
	Name string `yaml:"-"`
	// Token is the operator's bearer token; required, at least MinTokenLen bytes and equal to
	// no other credential.
	Token string `yaml:"token"`
}

// Flags says where the kill switches come from.
type Flags struct {
	// OpenFeature also reads the kill switches from a team's flag system, over the
	// OpenFeature Remote Evaluation Protocol (OFREP): a task is off when the admin API's flags
	// or the flag system turn it off. Absent: the admin API's flags alone.
	OpenFeature OpenFeature `yaml:"openfeature"`
}

// OpenFeature names an OpenFeature flag system that serves OFREP.
type OpenFeature struct {
	// Provider is "ofrep" (any OFREP server: GO Feature Flag, Flipt, …) or "flagd" (flagd's
	// OFREP service); empty means none.
	Provider string `yaml:"provider"`
	// Endpoint is the OFREP base URL ("http://127.0.0.1:8016"). Required with ofrep; with
	// flagd absent means http://127.0.0.1:8016, flagd's OFREP port.
	Endpoint string `yaml:"endpoint"`
	// Headers are sent with every evaluation (Authorization: "Bearer ${FLAGS_TOKEN}").
	Headers map[string]string `yaml:"headers"`
	// Refresh is how often the flags are evaluated again. Absent means 1s.
	Refresh time.Duration `yaml:"refresh"`
}

// Telemetry says where traces go.
type Telemetry struct {
	// OTLP exports traces: a span per call and a child per attempt. Absent (or an empty
	// endpoint) exports none, and a call pays nothing for tracing.
	OTLP OTLP `yaml:"otlp"`
}

// OTLP is an OpenTelemetry collector that takes traces over OTLP.
type OTLP struct {
	// Endpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is
	// ("http://127.0.0.1:4318"): over http the exporter appends /v1/traces. With grpc it may
	// also be host:port ("collector:4317"). An https:// endpoint uses TLS, an http:// one
	// does not. Empty means no export.
	Endpoint string `yaml:"endpoint"`
	// Protocol is http (OTLP/HTTP, protobuf) or grpc (OTLP/gRPC). Absent means http.
	Protocol string `yaml:"protocol"`
	// Headers are sent with every export (Authorization: "Bearer ${OTLP_TOKEN}"). Their
	// values are credentials: never logged. Absent means none.
	Headers map[string]afloat.Secret `yaml:"headers"`
	// Insecure sends without TLS to a grpc endpoint written as host:port. An https://
	// endpoint with insecure is an error. Absent means false.
	Insecure bool `yaml:"insecure"`
}

// Defaults are the guards every provider takes unless it overrides them.
type Defaults struct {
	Breaker  Breaker  `yaml:"breaker"`
	Timeouts Timeouts `yaml:"timeouts"`
	Retry    Retry    `yaml:"retry"`
	Reask    Reask    `yaml:"reask"`
	// MaxInFlight is the hard cap of each provider's bulkhead, whose limit is adaptive under
	// it. Absent means 256.
	MaxInFlight int `yaml:"max_in_flight"`
	// QueueWait is the longest a call waits for a slot of a full bulkhead (within its
	// budget) before the tier is skipped; 0s skips at once, as a fixed capacity that spills.
	// Absent means 1s.
	QueueWait time.Duration `yaml:"queue_wait"`
}

// Breaker configures a provider's circuit breaker (breaker.Config). Each absent key takes the
// defaults block's value, and the defaults block's absent keys take DESIGN.md §4's values.
type Breaker struct {
	// Enabled false makes a breaker that never opens, for tests and comparisons only.
	// Absent means true.
	Enabled bool `yaml:"enabled"`
	// ConsecutiveFailures trips the breaker after this many failures in a row. Absent means 5.
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// FailureRate trips the breaker at this share of failures over Window. Absent means 0.5.
	FailureRate float64 `yaml:"failure_rate"`
	// Window is the period FailureRate is measured over. Absent means 30s.
	Window time.Duration `yaml:"window"`
	// MinCalls is the fewest calls in Window for FailureRate to count. Absent means 20.
	MinCalls int `yaml:"min_calls"`
	// Recovery is how long the breaker stays open before a probe. Absent means 10s.
	Recovery time.Duration `yaml:"recovery"`
	// Growth multiplies the open period after each failed probe, at least 1. Absent means
	// 1.5.
	Growth float64 `yaml:"growth"`
	// Jitter spreads each open period over ±Jitter of it, in [0, 1), so that replicas and
	// providers do not probe in step. Absent means 0.2.
	Jitter float64 `yaml:"jitter"`
	// MaxRecovery caps the open period, grown by each failed probe. Absent means 5m.
	MaxRecovery time.Duration `yaml:"max_recovery"`
	// UnusableCooldown is how long an unusable failure (bad key, quota) opens the breaker.
	// Absent means 5m.
	UnusableCooldown time.Duration `yaml:"unusable_cooldown"`
	// RampUp is how long a provider whose breaker a good probe closed takes to get its full
	// share of calls back, rising linearly from none. Absent means 30s; 0s turns it off.
	RampUp time.Duration `yaml:"ramp_up"`
}

// Timeouts configures a provider's fixed timeouts and its adaptive read timeout
// (latency.Config). Each absent key takes the defaults block's value.
type Timeouts struct {
	// Connect bounds dialing the provider. Absent means 1s.
	Connect time.Duration `yaml:"connect"`
	// Write bounds sending the request. Absent means 1s. Not applied by this build (the
	// HTTP client has no write timeout): Check warns when a file sets it.
	Write time.Duration `yaml:"write"`
	// Pool bounds the wait for a free connection. Absent means 100ms. Not applied by this
	// build: Check warns when a file sets it.
	Pool time.Duration `yaml:"pool"`
	// Percentile is the quantile of recent latencies the read timeout is built on. Absent
	// means 0.95.
	Percentile float64 `yaml:"percentile"`
	// Multiplier scales the percentile into the read timeout. Absent means 1.5.
	Multiplier float64 `yaml:"multiplier"`
	// Min is the shortest read timeout. Absent means 200ms.
	Min time.Duration `yaml:"min"`
	// Max is the longest read timeout. Absent means 10s.
	Max time.Duration `yaml:"max"`
	// Initial is the read timeout until MinSamples calls succeeded. Absent means 2s.
	Initial time.Duration `yaml:"initial"`
	// MinSamples is how many successes the estimate needs. Absent means 20.
	MinSamples int `yaml:"min_samples"`
	// FirstToken is the adaptive timeout of a stream's first chunk, learnt from measured times
	// to first chunk: each absent key takes this block's own value above (percentile,
	// multiplier, min, max, initial, min_samples).
	FirstToken FirstToken `yaml:"first_token"`
	// StreamIdle is the longest gap between two chunks once a stream has begun: fixed, and
	// usually more generous than the first chunk's timeout. Absent means 10s.
	StreamIdle time.Duration `yaml:"stream_idle"`
}

// FirstToken configures the timeout of a stream's first chunk (latency.Config); an absent key
// takes the enclosing timeouts' value.
type FirstToken struct {
	Percentile float64       `yaml:"percentile"`
	Multiplier float64       `yaml:"multiplier"`
	Min        time.Duration `yaml:"min"`
	Max        time.Duration `yaml:"max"`
	Initial    time.Duration `yaml:"initial"`
	MinSamples int           `yaml:"min_samples"`
}

// Retry bounds retries on the same provider (cascade.RetryConfig).
type Retry struct {
	// Max is the retries of one call after a transient failure; 0 means none. Absent
	// means 1.
	Max int `yaml:"max"`
	// BudgetRatio caps retries at this share of calls over Window, in [0, 1]; 0 means none
	// beyond BudgetFloor. Absent means 0.2.
	BudgetRatio float64 `yaml:"budget_ratio"`
	// BudgetFloor is the retries always allowed over Window, whatever BudgetRatio says; 0
	// means none. Absent means 3.
	BudgetFloor int `yaml:"budget_floor"`
	// Window is the period the budget counts over. Absent means 10s.
	Window time.Duration `yaml:"window"`
	// MaxWait is the longest Retry-After (of a 429) still waited out before the retry, when
	// it also fits the call's budget. Absent means 2s.
	MaxWait time.Duration `yaml:"max_wait"`
}

// Reask bounds clarifying re-asks after a contract violation.
type Reask struct {
	// Max is the re-asks per tier; 0 means none. Absent means 1.
	Max int `yaml:"max"`
}

// Provider is one model endpoint. Which keys apply depends on Type; a key of another type is
// an error.
type Provider struct {
	// Name is the provider's name, the key it is written under.
	Name string `yaml:"-"`
	// Type is the adapter: openai, anthropic, gigachat, yandex or sim; required.
	Type string `yaml:"type"`

	// BaseURL points the adapter at another endpoint. Absent means the vendor's.
	BaseURL string `yaml:"base_url"`
	// Model is the model of every call; required for openai, anthropic and gigachat.
	Model string `yaml:"model"`
	// APIKey is the bearer key (openai, anthropic, yandex). Absent sends none. Like AuthKey
	// and IAMToken it is an afloat.Secret: it prints and logs as "[redacted]".
	APIKey afloat.Secret `yaml:"api_key"`
	// Headers are extra request headers (openai, anthropic): Yandex's OpenAI-compatible
	// endpoint takes its folder as "OpenAI-Project". Absent means none.
	Headers map[string]string `yaml:"headers"`
	// Dialect is the OpenAI-compatible server's quirks (openai only): openai, vllm,
	// llamacpp (json_schema sent as a json_object's schema), ollama (no tool_choice) or
	// yandex (tool_choice auto or none only). Absent means openai.
	Dialect string `yaml:"dialect"`
	// CAFile is a PEM file of extra trusted roots, relative to the config file's folder.
	// Absent trusts the system's roots only.
	CAFile string `yaml:"ca_file"`

	// AuthKey is GigaChat's base64 "client_id:client_secret"; required for gigachat.
	AuthKey afloat.Secret `yaml:"auth_key"`
	// AuthURL is GigaChat's OAuth endpoint. Absent means Sber's.
	AuthURL string `yaml:"auth_url"`
	// Scope is GigaChat's API scope. Absent means GIGACHAT_API_PERS.
	Scope string `yaml:"scope"`

	// ModelURI is Yandex's model ("gpt://<folder>/yandexgpt/latest"); required for yandex.
	ModelURI string `yaml:"model_uri"`
	// IAMToken and FolderID authenticate to Yandex instead of APIKey.
	IAMToken afloat.Secret `yaml:"iam_token"`
	FolderID string        `yaml:"folder_id"`

	// Latency is a sim provider's latency. Absent means none.
	Latency SimLatency `yaml:"latency"`
	// ErrorRate is the share of a sim provider's calls that fail, in [0, 1]. Absent means 0.
	ErrorRate float64 `yaml:"error_rate"`
	// ErrorStatus is the HTTP status of those failures. Absent means 503.
	ErrorStatus int `yaml:"error_status"`
	// Seed seeds a sim provider's random source. Absent means 1.
	Seed uint64 `yaml:"seed"`

	// Price turns tokens into cost. Absent costs nothing.
	Price Price `yaml:"price"`

	// Breaker, Timeouts, Retry and MaxInFlight override the defaults block key by key; after
	// Load they hold the values in force.
	Breaker     Breaker  `yaml:"breaker"`
	Timeouts    Timeouts `yaml:"timeouts"`
	Retry       Retry    `yaml:"retry"`
	MaxInFlight int      `yaml:"max_in_flight"`
	// QueueWait overrides defaults.queue_wait.
	QueueWait time.Duration `yaml:"queue_wait"`

	// Continuation says whether the provider can continue an answer cut on another tier
	// from its text (an assistant prefill): prefill, or restart / none (it only takes over a
	// stream that had not reached the client yet). Absent takes the adapter's own: prefill
	// for anthropic, openai dialects vllm and llamacpp, and sim; none for the others.
	Continuation string `yaml:"continuation"`
	// Probe is how an open breaker is probed in the background: models (the adapter's free
	// models list), completion (a one-token completion, billed) or off (user requests probe).
	// Absent means models where the adapter has a models list (openai, anthropic, gigachat,
	// sim), off otherwise (yandex).
	Probe string `yaml:"probe"`
}

// SimLatency is the latency distribution of a sim provider.
type SimLatency struct {
	// P50 is the median latency. Absent means 0.
	P50 time.Duration `yaml:"p50"`
	// P95 is the 95th percentile, at least P50. Absent means 0.
	P95 time.Duration `yaml:"p95"`
}

// Price is a provider's price per million tokens.
type Price struct {
	// InputPer1M is the price of a million input tokens. Absent means 0.
	InputPer1M float64 `yaml:"input_per_1m"`
	// OutputPer1M is the price of a million output tokens. Absent means 0.
	OutputPer1M float64 `yaml:"output_per_1m"`
	// Currency names the unit ("USD"). Absent means none.
	Currency string `yaml:"currency"`
}

// Task is one use of AI in the product.
type Task struct {
	// Name is the task's name, the key it is written under.
	Name string `yaml:"-"`
	// Criticality is required: the class is an explicit decision, never a default.
	Criticality afloat.Criticality `yaml:"criticality"`
	// OnExhausted is the policy when no tier answers. Absent means the criticality's
	// default (heuristic, unavailable, human); a critical task may only be human or block.
	OnExhausted cascade.Policy `yaml:"on_exhausted"`
	// Budget covers every attempt of one call. Absent means 10s.
	Budget time.Duration `yaml:"budget"`
	// ReviewSLA is when an operator is due to answer a queued item. Absent means 30m.
	ReviewSLA time.Duration `yaml:"review_sla"`
	// Input declares the input fields and their JSON Schemas, in the file's order. Absent
	// takes the fields the templates read, with no type check.
	Input Fields `yaml:"input"`
	// Schema is the JSON Schema file of the answer, relative to the config file's folder;
	// required.
	Schema string `yaml:"schema"`
	// Synonyms map a schema property to the words a model may use for it. Absent means none.
	Synonyms map[string][]string `yaml:"synonyms"`
	// Cascade is the ordered tiers; at least one.
	Cascade []TaskTier `yaml:"cascade"`
	// Heuristic answers under the heuristic policy. Absent makes such a task answer
	// unavailable.
	Heuristic []Rule `yaml:"heuristic"`
	// Reask overrides defaults.reask for this task.
	Reask Reask `yaml:"reask"`
	// OnRefusal is what follows a provider's content-policy refusal: stop (no other tier is
	// asked; a task answers by its on_exhausted policy, a route returns the refusal) or
	// next_tier. Absent means stop.
	OnRefusal string `yaml:"on_refusal"`
	// RolloutPct is the share of tenants the task starts on for, 0–100. Absent means 100.
	RolloutPct int `yaml:"rollout_pct"`
	// Hedge asks the next tier too when a tier is slow to answer. Absent never hedges.
	Hedge *Hedge `yaml:"hedge"`
	// Cache serves the last valid answer to the same input when every tier fails. Absent
	// means none.
	Cache *Cache `yaml:"cache"`
	// Canary sends a share of one tier's calls to a candidate prompt or provider, and
	// promotes or rolls it back by its figures. Absent means none.
	Canary *Canary `yaml:"canary"`
}

// Cache is a task's or route's answer cache: every valid answer a model gives is kept under
// the task (route), the tenant and the input (the chat request), and served, as source
// cache, when every tier fails on the same input. It is kept in process, and in Redis too when state.backend is redis (the fleet
// shares it).
type Cache struct {
	// TTL is the age past which a kept answer is no longer served; required.
	TTL time.Duration `yaml:"ttl"`
	// MaxEntries bounds the answers kept in process (the least recently used go first).
	// Absent means 100000.
	MaxEntries int `yaml:"max_entries"`
	// Serve is on_error (the cache answers only when every tier failed) or always_fresh (it
	// also answers an input answered within ttl before any tier is asked, saving the call).
	// Absent means on_error.
	Serve string `yaml:"serve"`
	// AllowCritical lets a critical task answer with a cached verdict when no model can
	// judge the call. Absent means false, and a critical task may not have a cache.
	AllowCritical bool `yaml:"allow_critical"`
}

// Canary is a task's canary release of a candidate for one tier: a new prompt version, a
// provider (another model), or both.
type Canary struct {
	// Tier is the index of the tier canaried. Absent means 0, the primary.
	Tier int `yaml:"tier"`
	// Prompt is the candidate's template file, relative to the config file's folder. Absent
	// keeps the tier's.
	Prompt string `yaml:"prompt"`
	// Provider names the candidate's provider. Absent keeps the tier's.
	Provider string `yaml:"provider"`
	// Share is the candidate's share of the tier's calls at the start, such as 10%;
	// required.
	Share Share `yaml:"share"`
	// By is how calls are split: tenant (a tenant sees one arm; a call without a tenant is
	// split by its request id) or request. Absent means tenant.
	By string `yaml:"by"`
	// Window is how long the canary runs before it is decided. Absent means 30m.
	Window time.Duration `yaml:"window"`
	// MinCalls is how many calls each arm needs before it is decided. Absent means 200.
	MinCalls int `yaml:"min_calls"`
	// RollbackIf are how much worse than the incumbent the candidate may be before it is
	// rolled back; otherwise it is promoted.
	RollbackIf CanaryThresholds `yaml:"rollback_if"`
}

// CanaryThresholds: the candidate is rolled back when it is worse than the incumbent by more
// than any of them.
type CanaryThresholds struct {
	// ViolationRate is the share of first answers breaking the contract, in points above
	// the incumbent's. Absent means 2%.
	ViolationRate Share `yaml:"violation_rate"`
	// FailureRate is the share of calls the candidate gave no valid answer to (a timeout, an
	// error, a violation its re-ask did not mend), in points above the incumbent's. Absent
	// means 5%.
	FailureRate Share `yaml:"failure_rate"`
	// ReaskRate is the share of calls that needed a re-ask, in points above the
	// incumbent's. Absent means 5%.
	ReaskRate Share `yaml:"reask_rate"`
	// P95 is the latency p95, relative to the incumbent's. Absent means 25%.
	P95 Share `yaml:"p95"`
	// Cost is the cost per answer, relative to the incumbent's. Absent means 25%.
	Cost Share `yaml:"cost"`
}

// Hedge is a task's or route's hedging: when a tier has not answered after After, the next
// tier is asked the same; the first valid answer wins and the other attempt is cancelled.
// Each hedge takes a retry from the tier's provider's retry budget, so hedges stay a share of
// the calls (retry.budget_ratio). A streamed call is never hedged.
type Hedge struct {
	// After is p95 (the tier's measured p95 for the task, no hedge until it is measured) or a
	// duration (800ms); required.
	After string `yaml:"after"`
	// Max is how many hedges one call may send, each from one tier to the next. Absent
	// means 1.
	Max *int `yaml:"max"`
}

// Field is one declared input field.
type Field struct {
	Name string
	// Schema is the field's JSON Schema ({"type": "string"}).
	Schema map[string]any
}

// Fields are a task's input fields in the order the file wrote them.
type Fields []Field

// Names returns the field names in order.
func (fs Fields) Names() []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// TaskTier is one tier of a task: a provider with its own prompt.
type TaskTier struct {
	// Provider names a provider; required.
	Provider string `yaml:"provider"`
	// Prompt is the template file, relative to the config file's folder; required.
	Prompt string `yaml:"prompt"`
	// ReaskPrompt is this provider's own clarifying message after a contract violation, a
	// template file over {{.answer}}, {{.errors}}, {{.schema}} and {{.stage}}. Absent uses
	// afloat's message.
	ReaskPrompt string `yaml:"reask_prompt"`
	// MaxTokens caps the answer. Absent leaves it to the provider.
	MaxTokens int `yaml:"max_tokens"`
	// Temperature is the sampling temperature. Absent leaves it to the provider.
	Temperature *float64 `yaml:"temperature"`
}

// Rule is one heuristic rule: either a default (Default set) or a rule that sets fields when
// one of its words occurs in the input.
type Rule struct {
	// WhenAny are the words matched, case-insensitively, in any string of the input.
	WhenAny []string `yaml:"when_any"`
	// Set are the fields the rule sets.
	Set map[string]any `yaml:"set"`
	// Default, in a rule of its own, sets every field first.
	Default map[string]any `yaml:"default"`
}

// Route is a named cascade for /v1/chat/completions.
type Route struct {
	// Name is the route's name, the model a client asks for.
	Name string `yaml:"-"`
	// Criticality is required: the class is an explicit decision, never a default.
	Criticality afloat.Criticality `yaml:"criticality"`
	// Budget covers every attempt of one call. Absent means 30s.
	Budget time.Duration `yaml:"budget"`
	// Cascade is the ordered tiers; at least one. An entry is a provider name or an object.
	Cascade []RouteTier `yaml:"cascade"`
	// Reask overrides defaults.reask for this route.
	Reask Reask `yaml:"reask"`
	// OnRefusal is what follows a provider's content-policy refusal: stop (no other tier is
	// asked; a task answers by its on_exhausted policy, a route returns the refusal) or
	// next_tier. Absent means stop.
	OnRefusal string `yaml:"on_refusal"`
	// RolloutPct is the share of tenants the route starts on for, 0–100. Absent means 100.
	RolloutPct int `yaml:"rollout_pct"`
	// Hedge asks the next tier too when a tier is slow to answer a call that is not streamed.
	// Absent never hedges.
	Hedge *Hedge `yaml:"hedge"`
	// Models are aliases: model names a client may send instead of the route's name
	// ("gpt-4o-mini"), so that an app written for a vendor needs only a new base URL. An
	// alias is no other route's name and is listed by one route only. Absent means none.
	Models []string `yaml:"models"`
	// Cache serves the last valid answer to the same request when every tier fails. Absent
	// means none.
	Cache *Cache `yaml:"cache"`
	// Canary is a task's only: check refuses it on a route.
	Canary *Canary `yaml:"canary"`
}

// RouteTier is one tier of a route.
type RouteTier struct {
	// Provider names a provider; required.
	Provider string `yaml:"provider"`
	// System is this provider's system prompt, a template over {{.system}} (the client's).
	// Absent passes the client's messages unchanged.
	System string `yaml:"system"`
	// SystemMode is replace or prepend. Absent means replace.
	SystemMode cascade.SystemMode `yaml:"system_mode"`
	// ReaskPrompt is this provider's own clarifying message when an answer breaks the
	// request's json_schema or tool schemas, as for a task tier. Absent uses afloat's.
	ReaskPrompt string `yaml:"reask_prompt"`
	// MaxTokens caps the answer below the client's. Absent keeps the client's.
	MaxTokens int `yaml:"max_tokens"`
	// Temperature replaces the client's. Absent keeps it.
	Temperature *float64 `yaml:"temperature"`
}

// Alerts are the conditions that raise an alert, evaluated inside afloat (package alerts): an
// alert the file writes is on, with its absent keys at their defaults; one it leaves out is
// off. Each fires once its condition has held for its For, and resolves once the condition
// has stopped holding for as long again.
type Alerts struct {
	// FallbackShare fires when a task's (or route's) share of calls not answered by tier 0,
	// over Window, stays above Above for For.
	FallbackShare Alert `yaml:"fallback_share"`
	// PrimaryOpen fires when a task's tier-0 provider's breaker stays open for For.
	PrimaryOpen Alert `yaml:"primary_open"`
	// ContractViolationRate fires when a provider's share of answers to a task that fail the
	// contract, over Window, stays above Above for For while its breaker stays closed.
	ContractViolationRate Alert `yaml:"contract_violation_rate"`
	// ReviewSLA fires when more than Above review items of a task (0: any) have outlived its
	// review_sla unanswered, for For.
	ReviewSLA Alert `yaml:"review_sla"`
	// Unusable fires when a provider's breaker opened on an unusable failure (bad key,
	// exhausted quota), for For.
	Unusable Alert `yaml:"unusable"`
	// DrillStale fires when a drilled task's last passing drill is older than drill.max_age
	// (or none passed), for For.
	DrillStale Alert `yaml:"drill_stale"`
	// CanaryRolledBack fires when a task's canary release was rolled back, for For; it
	// resolves when the config drops or renews the canary.
	CanaryRolledBack Alert `yaml:"canary_rolled_back"`
	// EvaluateEvery is how often the alerts are evaluated. Absent means 5s.
	EvaluateEvery time.Duration `yaml:"evaluate_every"`
}

// Alert is one alert's condition and where it is sent.
type Alert struct {
	// On is set by Load when the file writes the alert's key, even empty ({}): the alert is
	// evaluated. An alert left out is off.
	On bool `yaml:"-"`
	// Above is the threshold: a share in [0, 1] for fallback_share and
	// contract_violation_rate, a whole number of items for review_sla. The other alerts
	// have none and take no above. Absent means 0.
	Above float64 `yaml:"above"`
	// For is how long the condition must hold before the alert fires, and how long it must
	// have stopped holding before it resolves. Absent means at once.
	For time.Duration `yaml:"for"`
	// Window is the sliding period fallback_share and contract_violation_rate count calls
	// over (only they take it). Absent means 5m.
	Window time.Duration `yaml:"window"`
	// MinCalls is the fewest calls in Window for a rate alert's share to count (only
	// fallback_share and contract_violation_rate take it). Absent means 20.
	MinCalls int `yaml:"min_calls"`
	// Webhook receives a JSON POST when the alert fires and when it resolves. Absent means
	// the alert is logged, counted and listed in /admin/status only.
	Webhook string `yaml:"webhook"`
	// Secret signs each webhook body: X-Afloat-Signature: t=<unix>,v1=<hex HMAC-SHA256 over
	// "<t>.<body>">. Absent sends it unsigned.
	Secret afloat.Secret `yaml:"secret"`
}

// Drill configures unavailability drills.
type Drill struct {
	// MaxAge is the longest a task may go without a passing drill before /admin/status
	// reports it stale (drill_stale). Absent means 2160h (90 days).
	MaxAge time.Duration `yaml:"max_age"`
}

// cascade is the hedge as the engine takes it (validated: After is p95 or a duration, Max
// at least 1); the zero Hedge for none.
func (h *Hedge) cascade() cascade.Hedge {
	if h == nil {
		return cascade.Hedge{}
	}
	out := cascade.Hedge{Max: 1}
	if h.Max != nil {
		out.Max = *h.Max
	}
	if h.After == "p95" {
		out.P95 = true
	} else {
		out.After, _ = time.ParseDuration(h.After)
	}
	return out
}

// check reports what is wrong with the hedge at path, or nil.
func (h *Hedge) check(path string) *Error {
	if h == nil {
		return nil
	}
	if h.Max != nil && *h.Max < 1 {
		return &Error{Path: path + ".max", Msg: fmt.Sprintf("%d: a hedge sends at least 1 (leave hedge out to turn it off)", *h.Max)}
	}
	if h.After == "p95" {
		return nil
	}
	d, err := time.ParseDuration(h.After)
	if err != nil || d <= 0 {
		return &Error{Path: path + ".after", Msg: fmt.Sprintf("want p95 or a positive duration such as 800ms, not %q", h.After)}
	}
	return nil
}

// ShedThreshold is server.shed_latency as a duration: 0 for off.
func (s Server) ShedThreshold() time.Duration {
	switch s.ShedLatency {
	case "":
		return 200 * time.Millisecond
	case "off":
		return 0
	}
	d, _ := time.ParseDuration(s.ShedLatency)
	return d
}
