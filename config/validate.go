package config

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/review"
)

// Provider types of shared/DESIGN.md §1.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeGigaChat  = "gigachat"
	TypeYandex    = "yandex"
	TypeSim       = "sim"
)

// typeKeys returns the provider keys a type takes besides the common ones, and whether the
// type is known.
func typeKeys(typ string) ([]string, bool) {
	switch typ {
	case TypeOpenAI:
		return []string{"base_url", "model", "api_key", "headers", "dialect", "ca_file"}, true
	case TypeAnthropic:
		return []string{"base_url", "model", "api_key", "headers", "ca_file"}, true
	case TypeGigaChat:
		return []string{"base_url", "model", "auth_key", "auth_url", "scope", "ca_file"}, true
	case TypeYandex:
		return []string{"base_url", "model_uri", "api_key", "iam_token", "folder_id", "ca_file"}, true
	case TypeSim:
		return []string{"latency", "error_rate", "error_status", "seed"}, true
	}
	return nil, false
}

// commonProviderKey reports whether every provider type takes key.
func commonProviderKey(key string) bool {
	switch key {
	case "type", "price", "breaker", "timeouts", "retry", "max_in_flight", "queue_wait", "continuation", "probe":
		return true
	}
	return false
}

// Defaults of keys left out (shared/DESIGN.md §4).
const (
	defaultListen      = "127.0.0.1:8080"
	defaultMaxBody     = 1 << 20
	defaultSQLitePath  = "afloat.db"
	defaultRedisPrefix = "afloat:"
	defaultTaskBudget  = 10 * time.Second
	defaultRouteBudget = 30 * time.Second
	defaultReviewSLA   = 30 * time.Minute
	defaultClaimTTL    = 15 * time.Minute
	defaultDrillMaxAge = 2160 * time.Hour
)

// builtinDefaults is the defaults block of shared/DESIGN.md §4, which a file's own defaults
// block overrides key by key.
func builtinDefaults() Defaults {
	return Defaults{
		Breaker: Breaker{
			Enabled: true, ConsecutiveFailures: 5, FailureRate: 0.5, Window: 30 * time.Second,
			MinCalls: 20, Recovery: 10 * time.Second, Growth: 1.5, Jitter: 0.2, MaxRecovery: 5 * time.Minute,
			UnusableCooldown: 5 * time.Minute, RampUp: 30 * time.Second,
		},
		Timeouts: Timeouts{
			Connect: time.Second, Write: time.Second, Pool: 100 * time.Millisecond, Percentile: 0.95,
			Multiplier: 1.5, Min: 200 * time.Millisecond, Max: 10 * time.Second, Initial: 2 * time.Second,
			MinSamples: 20, StreamIdle: 10 * time.Second,
		},
		Retry:       Retry{Max: 1, BudgetRatio: 0.2, BudgetFloor: 3, Window: 10 * time.Second, MaxWait: 2 * time.Second},
		Reask:       Reask{Max: 1},
		MaxInFlight: cascade.DefaultMaxInFlight,
		QueueWait:   time.Second,
	}
}

// validator fills in defaults and checks a decoded File, adding to the decoder's errors.
type validator struct {
	f    *File
	errs Errors
}

// written reports whether the file wrote the key path.
// minShedLatency is the lowest server.shed_latency accepted.
const minShedLatency = time.Millisecond

func (v *validator) written(path string) bool {
	_, ok := v.f.lines[path]
	return ok
}

// line returns the line of path or, when the file left it out, of its nearest written
// parent.
func (v *validator) line(path string) int {
	for path != "" {
		if l, ok := v.f.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// errorf reports a problem at path, unless one is reported there already: a value that did
// not decode is not also reported as out of range.
func (v *validator) errorf(path, format string, args ...any) {
	v.errorAt(path, v.line(path), format, args...)
}

func (v *validator) errorAt(path string, line int, format string, args ...any) {
	for _, e := range v.errs {
		if e.Path == path {
			return
		}
	}
	v.errs = append(v.errs, &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) resolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(v.f.Dir, p)
}

// inherit copies into dst each field of src whose key the file left out under path,
// descending into nested structs.
func (v *validator) inherit(dst, src reflect.Value, path string) {
	t := dst.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := join(path, name)
		if t.Field(i).Type.Kind() == reflect.Struct {
			v.inherit(dst.Field(i), src.Field(i), p)
			continue
		}
		if !v.written(p) {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

func (v *validator) validate() {
	f := v.f
	v.server()
	v.tenants()
	v.state()
	v.openFeature()
	v.telemetry()
	v.review()
	v.operators()
	v.credentials()
	v.defaults()
	if len(f.Providers) == 0 {
		v.errorf("providers", "at least one provider is required")
	}
	for _, p := range f.Providers {
		v.provider(p)
	}
	distinctPaths(v, "providers", "provider", reflect.TypeFor[Provider](), f.Providers, func(p *Provider) string { return p.Name })
	for _, t := range f.Tasks {
		v.task(t)
	}
	distinctPaths(v, "tasks", "task", reflect.TypeFor[Task](), f.Tasks, func(t *Task) string { return t.Name })
	distinctPaths(v, "routes", "route", reflect.TypeFor[Route](), f.Routes, func(r *Route) string { return r.Name })
	names := map[string]bool{}
	for _, t := range f.Tasks {
		names[t.Name] = true
	}
	for _, r := range f.Routes {
		if names[r.Name] {
			v.errorf("routes."+r.Name, "name %q is already a task's: tasks and routes share flags and metrics, so their names must differ", r.Name)
		}
		v.route(r)
	}
	v.models()
	v.alerts()
	if !v.written("drill.max_age") {
		f.Drill.MaxAge = defaultDrillMaxAge
	}
	v.positive("drill.max_age", f.Drill.MaxAge)
}

func (v *validator) server() {
	s := &v.f.Server
	if !v.written("server.listen") {
		s.Listen = defaultListen
	}
	if _, port, err := net.SplitHostPort(s.Listen); err != nil {
		v.errorf("server.listen", "invalid address %q (want host:port)", s.Listen)
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		v.errorf("server.listen", "invalid port %q in %q (want 0 to 65535)", port, s.Listen)
	}
	if !v.written("server.max_body") {
		s.MaxBody = defaultMaxBody
	}
	if s.MaxBody <= 0 && v.written("server.max_body") {
		v.errorf("server.max_body", "must be positive")
	}
	if !v.written("server.log_level") {
		s.LogLevel = "info"
	}
	if _, err := ParseLogLevel(s.LogLevel); err != nil {
		v.errorf("server.log_level", "%v", err)
	}
	if s.ShedLatency != "" && s.ShedLatency != "off" {
		switch d, err := time.ParseDuration(s.ShedLatency); {
		case err != nil || d <= 0:
			v.errorf("server.shed_latency", "want off or a positive duration such as 200ms, not %q", s.ShedLatency)
		case d < minShedLatency:
			// An idle process's goroutines wait tens of microseconds to run: a threshold that
			// low would shed calls while nothing is saturated.
			v.errorf("server.shed_latency", "want off or at least %s (an idle process's scheduling latency reaches less), not %q", minShedLatency, s.ShedLatency)
		}
	}
	switch s.AccessLog {
	case "":
		s.AccessLog = "on"
	case "on", "errors", "off":
	default:
		v.errorf("server.access_log", "unknown value %q (want on, errors or off)", s.AccessLog)
	}
	if s.DebugListen != "" || v.written("server.debug_listen") {
		if host, _, err := net.SplitHostPort(s.DebugListen); err != nil {
			v.errorf("server.debug_listen", "invalid address %q (want host:port)", s.DebugListen)
		} else if !Loopback(host) {
			v.errorf("server.debug_listen", "%q is not a loopback address: the profiler has no authentication, so it listens on 127.0.0.1, ::1 or localhost only", s.DebugListen)
		}
	}
}

// ParseLogLevel reads a log level as server.log_level and serve's -log-level flag write it:
// debug, info, warn or error.
func ParseLogLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
}

// Loopback reports whether host (an address's host part) is the loopback interface only:
// localhost or a loopback IP. An empty host listens on every interface, so it is not.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (v *validator) tenants() {
	for _, t := range v.f.Tenants {
		path := "tenants." + t.Name
		if len(t.Keys) == 0 {
			v.errorf(path+".keys", "a tenant needs at least one key")
		}
		for i, k := range t.Keys {
			if k == "" {
				v.errorf(fmt.Sprintf("%s.keys[%d]", path, i), "key is empty")
			}
		}
	}
}

// MinTokenLen is the fewest bytes an admin or operator token may hold: a token a person
// could guess or type from memory would open the admin API to whoever reaches the port.
const MinTokenLen = 16

// credentials checks the gateway's credentials together: the admin token, each operator's
// token, the review webhook's secret and each tenant's keys. No two may be equal, since the
// gateway would take one for the other (a tenant key equal to the admin token makes its
// bearer the admin), and no one may start or end with white space, which the gateway trims
// from the header it compares. The admin and operator tokens and the webhook secret must
// hold at least MinTokenLen bytes. The errors never quote a credential.
func (v *validator) credentials() {
	owner := map[string]string{}
	add := func(path, what, secret string) {
		if secret == "" {
			return // reported where it is required
		}
		if strings.TrimSpace(secret) != secret {
			v.errorf(path, "starts or ends with white space, which the gateway trims from the Authorization header: it would never match")
			return
		}
		if prev, dup := owner[secret]; dup {
			v.errorf(path, "is also %s: every credential must be distinct, or the gateway takes one for the other", prev)
			return
		}
		owner[secret] = what
	}
	token := func(path, what, secret string) {
		if secret != "" && len(secret) < MinTokenLen {
			v.errorf(path, "too short: %d bytes, want at least %d (generate one with `openssl rand -hex 16`)", len(secret), MinTokenLen)
		}
		add(path, what, secret)
	}
	token("server.admin_token", "the admin token (server.admin_token)", v.f.Server.AdminToken)
	for _, o := range v.f.Operators {
		token("operators."+o.Name+".token", "operator "+o.Name+"'s token", o.Token)
	}
	// A webhook secret equal to a token would hand that token to the receiver's operators.
	token("review.webhook.secret", "the review webhook's secret (review.webhook.secret)", v.f.Review.Webhook.Secret.Reveal())
	for _, t := range v.f.Tenants {
		for i, k := range t.Keys {
			add(fmt.Sprintf("tenants.%s.keys[%d]", t.Name, i), "a key of tenant "+t.Name, k)
		}
	}
}

func (v *validator) openFeature() {
	o := &v.f.Flags.OpenFeature
	switch o.Provider {
	case "":
		if v.written("flags.openfeature") {
			v.errorf("flags.openfeature.provider", "required: ofrep or flagd")
		}
		return
	case "flagd":
		if o.Endpoint == "" {
			o.Endpoint = "http://127.0.0.1:8016"
		}
	case "ofrep":
		if o.Endpoint == "" {
			v.errorAt("flags.openfeature.endpoint", v.line("flags.openfeature"), "required with provider ofrep (the OFREP base URL)")
		}
	default:
		v.errorf("flags.openfeature.provider", "unknown provider %q (want ofrep or flagd)", o.Provider)
	}
	if o.Endpoint != "" {
		if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf("flags.openfeature.endpoint", "invalid URL (want http://host:port)")
		}
	}
	v.nonNegative("flags.openfeature.refresh", o.Refresh)
}

func (v *validator) state() {
	s := &v.f.State
	switch s.Backend {
	case "", "memory":
		v.f.legacyMemory = s.Backend == "memory"
		s.Backend = "local" // memory is the former name: one process, now persisted
	case "local":
	case "redis":
		if s.Redis.URL == "" {
			v.errorAt("state.redis.url", v.line("state.backend"), "required with state.backend redis")
		}
	default:
		v.errorf("state.backend", "unknown backend %q (want local or redis)", s.Backend)
	}
	if s.Redis.URL != "" {
		if u, err := url.Parse(s.Redis.URL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			v.errorf("state.redis.url", "invalid redis url (want redis://host:port/db)")
		}
	}
	if !v.written("state.redis.prefix") {
		s.Redis.Prefix = defaultRedisPrefix
	} else if strings.ContainsAny(s.Redis.Prefix, "{}") {
		v.errorf("state.redis.prefix", "may not hold '{' or '}': they would move the keys' Redis Cluster hash slot")
	}
	if s.Redis.Cluster && s.Redis.MasterName != "" {
		v.errorf("state.redis.master_name", "a Sentinel master and cluster: true exclude each other")
	}
	v.nonNegative("state.redis.timeout", s.Redis.Timeout)
	if s.Redis.Timeout == 0 {
		s.Redis.Timeout = 100 * time.Millisecond
	}
	switch s.OnFailure {
	case "":
		s.OnFailure = "local"
	case "local", "fail":
	default:
		v.errorf("state.on_failure", "unknown value %q (want local or fail)", s.OnFailure)
	}
}

func (v *validator) review() {
	r := &v.f.Review
	switch r.Store {
	case "":
		r.Store = "sqlite"
	case "sqlite":
	case "postgres":
		switch {
		case r.Postgres.URL == "":
			v.errorAt("review.postgres.url", v.line("review.store"), "required with review.store postgres")
		case !strings.Contains(r.Postgres.URL, Placeholder): // an offline check's unset variable
			if err := review.CheckPostgresURL(r.Postgres.URL); err != nil {
				v.errorf("review.postgres.url", "%v", err)
			}
		}
	default:
		v.errorf("review.store", "unknown store %q (want sqlite or postgres)", r.Store)
	}
	if r.Postgres.MaxPending < 0 {
		v.errorf("review.postgres.max_pending", "must not be negative, not %d", r.Postgres.MaxPending)
	}
	if r.SQLite.Path == "" {
		if v.written("review.sqlite.path") {
			v.errorf("review.sqlite.path", "is empty")
		}
		r.SQLite.Path = defaultSQLitePath
	}
	r.SQLite.Path = v.resolvePath(r.SQLite.Path)
	if !v.written("review.claim_ttl") {
		// An operator who walks away must not hold an item forever; a written 0 means that.
		r.ClaimTTL = defaultClaimTTL
	}
	v.nonNegative("review.claim_ttl", r.ClaimTTL)
	v.nonNegative("review.retention", r.Retention)
	if r.Webhook.Secret != "" && r.Webhook.URL == "" {
		v.errorf("review.webhook.url", "required when review.webhook.secret is set")
	}
	if r.Webhook.URL != "" && r.Webhook.Secret == "" {
		// An unsigned answer could be forged by anyone who finds the receiver.
		v.errorAt("review.webhook.secret", v.line("review.webhook"), "required with review.webhook.url: the receiver checks each POST's signature with it")
	}
	v.httpURL("review.webhook.url", r.Webhook.URL)
}

func (v *validator) operators() {
	for _, o := range v.f.Operators {
		if o.Name == "admin" {
			v.errorf("operators.admin", "the name admin is the admin token's own: name the operator otherwise")
		}
		if o.Token == "" {
			v.errorf("operators."+o.Name+".token", "required")
		}
	}
}

func (v *validator) defaults() {
	d := &v.f.Defaults
	v.inherit(reflect.ValueOf(d).Elem(), reflect.ValueOf(builtinDefaults()), "defaults")
	v.breaker("defaults.breaker", d.Breaker)
	v.timeouts("defaults.timeouts", d.Timeouts)
	v.retry("defaults.retry", d.Retry)
	v.reask("defaults.reask", d.Reask)
	v.inFlight("defaults.max_in_flight", d.MaxInFlight)
	v.nonNegative("defaults.queue_wait", d.QueueWait)
}

// The checks of the guards look only at the keys written under path: a value inherited from
// the defaults block was checked there.

func (v *validator) breaker(path string, b Breaker) {
	v.atLeast(path+".consecutive_failures", b.ConsecutiveFailures, 1)
	if p := path + ".failure_rate"; v.written(p) && !(b.FailureRate > 0 && b.FailureRate <= 1) {
		v.errorf(p, "%v is outside (0, 1]", b.FailureRate)
	}
	v.positive(path+".window", b.Window)
	v.atLeast(path+".min_calls", b.MinCalls, 1)
	v.positive(path+".recovery", b.Recovery)
	if p := path + ".growth"; v.written(p) && !(b.Growth >= 1 && !math.IsInf(b.Growth, 1)) {
		v.errorf(p, "%v is below 1", b.Growth)
	}
	if p := path + ".jitter"; v.written(p) && !(b.Jitter >= 0 && b.Jitter < 1) {
		v.errorf(p, "%v is outside [0, 1)", b.Jitter)
	}
	v.positive(path+".max_recovery", b.MaxRecovery)
	v.positive(path+".unusable_cooldown", b.UnusableCooldown)
	v.nonNegative(path+".ramp_up", b.RampUp)
}

func (v *validator) timeouts(path string, t Timeouts) {
	v.positive(path+".connect", t.Connect)
	v.positive(path+".write", t.Write)
	v.positive(path+".pool", t.Pool)
	if p := path + ".percentile"; v.written(p) && !(t.Percentile > 0 && t.Percentile < 1) {
		v.errorf(p, "%v is outside (0, 1)", t.Percentile)
	}
	if p := path + ".multiplier"; v.written(p) && !(t.Multiplier >= 1) {
		v.errorf(p, "%v is below 1", t.Multiplier)
	}
	v.positive(path+".min", t.Min)
	v.positive(path+".max", t.Max)
	v.positive(path+".initial", t.Initial)
	v.atLeast(path+".min_samples", t.MinSamples, 1)
	v.positive(path+".stream_idle", t.StreamIdle)
}

func (v *validator) retry(path string, r Retry) {
	v.atLeast(path+".max", r.Max, 0)
	if p := path + ".budget_ratio"; v.written(p) && !(r.BudgetRatio >= 0 && r.BudgetRatio <= 1) {
		v.errorf(p, "%v is outside [0, 1]", r.BudgetRatio)
	}
	v.atLeast(path+".budget_floor", r.BudgetFloor, 0)
	v.positive(path+".window", r.Window)
	v.positive(path+".max_wait", r.MaxWait)
}

func (v *validator) onRefusal(path, s string) {
	if _, err := cascade.ParseRefusalPolicy(s); err != nil {
		v.errorf(path+".on_refusal", "unknown value %q (want stop or next_tier)", s)
	}
}

func (v *validator) reask(path string, r Reask) { v.atLeast(path+".max", r.Max, 0) }

func (v *validator) inFlight(path string, n int) { v.atLeast(path, n, 1) }

func (v *validator) positive(path string, d time.Duration) {
	if v.written(path) && d <= 0 {
		v.errorf(path, "must be positive, not %v", d)
	}
}

func (v *validator) nonNegative(path string, d time.Duration) {
	if v.written(path) && d < 0 {
		v.errorf(path, "must not be negative, not %v", d)
	}
}

func (v *validator) atLeast(path string, n, low int) {
	if v.written(path) && n < low {
		v.errorf(path, "must be at least %d, not %d", low, n)
	}
}

func (v *validator) httpURL(path, s string) {
	if s == "" {
		return
	}
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The value is left out: a webhook's url is often its secret.
		v.errorf(path, "invalid url (want an absolute http or https url)")
	}
}

// validName reports whether s can name a provider, task or route: it appears in URLs, metric
// labels and key paths.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case (r == '-' || r == '_' || r == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

func (v *validator) name(path, kind, name string) {
	if !validName(name) {
		v.errorf(path, "invalid %s name %q (want letters, digits, '-', '_' or '.', starting with a letter or digit)", kind, name)
	}
}

// distinctPaths refuses a name that is another's, a dot and one of the object's keys
// ("a.breaker" beside provider a): key paths join names and keys with dots, so the one's
// keys would be read as the other's (provider a would take "a.breaker.enabled: ..."'s
// object for its own breaker.enabled written). A dot that begins no key ("gpt-4.1" beside
// "gpt-4") is fine.
func distinctPaths[T any](v *validator, section, kind string, object reflect.Type, items []T, name func(T) string) {
	_, keys := fieldsOf(object)
	names := map[string]bool{}
	for _, it := range items {
		names[name(it)] = true
	}
	for _, it := range items {
		n := name(it)
		for i := range len(n) {
			if n[i] != '.' || !names[n[:i]] {
				continue
			}
			key, _, _ := strings.Cut(n[i+1:], ".")
			if slices.Contains(keys, key) {
				v.errorf(section+"."+n, "%s name %q reads as %s %s's key %s in key paths: rename one of them", kind, n, kind, n[:i], key)
				break
			}
		}
	}
}

func (v *validator) provider(p *Provider) {
	path := "providers." + p.Name
	v.name(path, "provider", p.Name)
	own, known := typeKeys(p.Type)
	switch {
	case p.Type == "":
		v.errorf(path+".type", "required (openai, anthropic, gigachat, yandex or sim)")
	case !known:
		v.errorf(path+".type", "unknown provider type %q (want openai, anthropic, gigachat, yandex or sim)", p.Type)
	default:
		_, keys := fieldsOf(reflect.TypeFor[Provider]())
		for _, k := range keys {
			if v.written(join(path, k)) && !slices.Contains(own, k) && !commonProviderKey(k) {
				v.errorf(join(path, k), "key %s does not apply to provider type %s", k, p.Type)
			}
		}
	}
	switch p.Type {
	case TypeOpenAI, TypeAnthropic, TypeGigaChat:
		if p.Model == "" {
			v.errorf(path+".model", "required for provider type %s", p.Type)
		}
	}
	switch p.Type {
	case TypeAnthropic:
		if p.APIKey == "" {
			v.errorf(path+".api_key", "required for provider type anthropic")
		}
	case TypeGigaChat:
		if p.AuthKey == "" {
			v.errorf(path+".auth_key", "required for provider type gigachat")
		}
	case TypeOpenAI:
		switch p.Dialect {
		case "", "openai", "vllm", "llamacpp", "ollama", "yandex":
		default:
			v.errorf(path+".dialect", "unknown dialect %q (want openai, vllm, llamacpp, ollama or yandex)", p.Dialect)
		}
	case TypeYandex:
		if p.ModelURI == "" {
			v.errorf(path+".model_uri", "required for provider type yandex")
		}
		if p.APIKey == "" && (p.IAMToken == "" || p.FolderID == "") {
			v.errorf(path+".api_key", "provider type yandex needs api_key, or iam_token with folder_id")
		}
	}
	v.httpURL(path+".base_url", p.BaseURL)
	v.httpURL(path+".auth_url", p.AuthURL)
	p.CAFile = v.resolvePath(p.CAFile)
	if p.Price.InputPer1M < 0 || p.Price.OutputPer1M < 0 {
		v.errorf(path+".price", "prices must not be negative")
	}

	d := v.f.Defaults
	v.inherit(reflect.ValueOf(&p.Breaker).Elem(), reflect.ValueOf(d.Breaker), path+".breaker")
	v.inherit(reflect.ValueOf(&p.Timeouts).Elem(), reflect.ValueOf(d.Timeouts), path+".timeouts")
	v.inherit(reflect.ValueOf(&p.Retry).Elem(), reflect.ValueOf(d.Retry), path+".retry")
	if !v.written(path + ".max_in_flight") {
		p.MaxInFlight = d.MaxInFlight
	}
	if !v.written(path + ".queue_wait") {
		p.QueueWait = d.QueueWait
	}
	v.nonNegative(path+".queue_wait", p.QueueWait)
	v.breaker(path+".breaker", p.Breaker)
	v.timeouts(path+".timeouts", p.Timeouts)
	v.retry(path+".retry", p.Retry)
	switch p.Continuation {
	case "", "prefill", "restart", "none":
	default:
		v.errorf(path+".continuation", "unknown continuation %q (want prefill, restart or none)", p.Continuation)
	}
	switch p.Probe {
	case "", "models", "completion", "off":
	default:
		v.errorf(path+".probe", "unknown probe %q (want models, completion or off)", p.Probe)
	}
	v.inFlight(path+".max_in_flight", p.MaxInFlight)
}

// criticality checks that a task or route states its class.
func (v *validator) criticality(path string, c afloat.Criticality) {
	if c == 0 && !v.written(path+".criticality") {
		v.errorf(path+".criticality", "required: whether this fails open, silent or closed must be an explicit decision (enrichment, assistance or critical)")
	}
}

func (v *validator) knownProvider(path, name string) {
	if name == "" {
		v.errorf(path, "required")
		return
	}
	if v.f.Provider(name) != nil {
		return
	}
	names := make([]string, len(v.f.Providers))
	for i, p := range v.f.Providers {
		names[i] = p.Name
	}
	v.errorf(path, "unknown provider %q (want one of %s)", name, strings.Join(names, ", "))
}

func (v *validator) rollout(path string, pct *int) {
	if !v.written(path) {
		*pct = 100
		return
	}
	if *pct < 0 || *pct > 100 {
		v.errorf(path, "%d is outside 0–100", *pct)
	}
}

// hedge checks a task's or route's hedge over tiers tiers within budget: one that could never
// go out, or more hedges than the cascade has tiers to hedge to, is refused rather than kept
// to do nothing.
func (v *validator) hedge(path string, h *Hedge, tiers int, budget time.Duration) {
	if err := h.check(path); err != nil {
		v.errorf(err.Path, "%s", err.Msg)
		return
	}
	if h == nil {
		return
	}
	if tiers < 2 {
		v.errorf(path, "a hedge asks the next tier: the cascade has only one")
		return
	}
	if h.Max != nil && *h.Max > tiers-1 {
		v.errorf(path+".max", "%d: each hedge asks the next tier, and a cascade of %d tiers has %d below its first", *h.Max, tiers, tiers-1)
	}
	if d, err := time.ParseDuration(h.After); err == nil && budget > 0 && d >= budget {
		v.errorf(path+".after", "%s is not under the budget %s: the hedge would never go out", h.After, budget)
	}
}

func (v *validator) task(t *Task) {
	path := "tasks." + t.Name
	v.name(path, "task", t.Name)
	v.criticality(path, t.Criticality)
	v.onRefusal(path, t.OnRefusal)
	if t.Criticality == afloat.Critical {
		switch t.OnExhausted {
		case cascade.PolicyHeuristic, cascade.PolicyUnavailable:
			v.errorf(path+".on_exhausted", "a critical task must fail closed, but %s answers without a judgement when every tier is down: publishing by default when the moderator is down is a security bypass, not resilience (use human or block)", t.OnExhausted)
		}
	}
	if !v.written(path + ".budget") {
		t.Budget = defaultTaskBudget
	}
	v.positive(path+".budget", t.Budget)
	if !v.written(path + ".review_sla") {
		t.ReviewSLA = defaultReviewSLA
	}
	v.positive(path+".review_sla", t.ReviewSLA)
	if t.Schema == "" {
		v.errorf(path+".schema", "required: the JSON Schema file of the answer")
	}
	t.Schema = v.resolvePath(t.Schema)
	if len(t.Cascade) == 0 {
		v.errorf(path+".cascade", "at least one tier is required")
	}
	for i := range t.Cascade {
		tr := &t.Cascade[i]
		p := fmt.Sprintf("%s.cascade[%d]", path, i)
		v.knownProvider(p+".provider", tr.Provider)
		if tr.Prompt == "" {
			v.errorf(p+".prompt", "required: the template file of this provider's prompt")
		}
		tr.Prompt = v.resolvePath(tr.Prompt)
		if tr.ReaskPrompt != "" {
			tr.ReaskPrompt = v.resolvePath(tr.ReaskPrompt)
		}
		v.atLeast(p+".max_tokens", tr.MaxTokens, 0)
		if tr.Temperature != nil && *tr.Temperature < 0 {
			v.errorf(p+".temperature", "must not be negative")
		}
	}
	v.heuristic(path+".heuristic", t.Heuristic)
	for field, words := range t.Synonyms {
		for i, w := range words {
			if strings.TrimSpace(w) == "" {
				v.errorf(fmt.Sprintf("%s.synonyms.%s[%d]", path, field, i), "synonym is empty")
			}
		}
	}
	v.inherit(reflect.ValueOf(&t.Reask).Elem(), reflect.ValueOf(v.f.Defaults.Reask), path+".reask")
	v.reask(path+".reask", t.Reask)
	v.rollout(path+".rollout_pct", &t.RolloutPct)
	v.hedge(path+".hedge", t.Hedge, len(t.Cascade), t.Budget)
	v.cache(path+".cache", t.Cache, t.Criticality)
	v.canary(t)
}

func (v *validator) heuristic(path string, rules []Rule) {
	defaults := 0
	for i, r := range rules {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case r.Default != nil && (r.WhenAny != nil || r.Set != nil):
			v.errorf(p, "a rule is either a default or when_any with set, not both")
		case r.Default != nil:
			if defaults++; defaults == 2 {
				v.errorf(p+".default", "only one default rule is allowed")
			}
		case len(r.WhenAny) == 0:
			v.errorf(p+".when_any", "a rule needs at least one word (or a default)")
		case len(r.Set) == 0:
			v.errorf(p+".set", "a rule needs the fields it sets")
		}
		for j, w := range r.WhenAny {
			if strings.TrimSpace(w) == "" {
				v.errorf(fmt.Sprintf("%s.when_any[%d]", p, j), "word is empty")
			}
		}
	}
}

func (v *validator) route(r *Route) {
	path := "routes." + r.Name
	v.name(path, "route", r.Name)
	v.taskOnly(r)
	v.cache(path+".cache", r.Cache, r.Criticality)
	v.criticality(path, r.Criticality)
	v.onRefusal(path, r.OnRefusal)
	if !v.written(path + ".budget") {
		r.Budget = defaultRouteBudget
	}
	v.positive(path+".budget", r.Budget)
	if len(r.Cascade) == 0 {
		v.errorf(path+".cascade", "at least one tier is required")
	}
	for i := range r.Cascade {
		tr := &r.Cascade[i]
		p := fmt.Sprintf("%s.cascade[%d]", path, i)
		v.knownProvider(p+".provider", tr.Provider)
		if tr.ReaskPrompt != "" {
			tr.ReaskPrompt = v.resolvePath(tr.ReaskPrompt)
		}
		v.atLeast(p+".max_tokens", tr.MaxTokens, 0)
		if tr.Temperature != nil && *tr.Temperature < 0 {
			v.errorf(p+".temperature", "must not be negative")
		}
	}
	v.inherit(reflect.ValueOf(&r.Reask).Elem(), reflect.ValueOf(v.f.Defaults.Reask), path+".reask")
	v.reask(path+".reask", r.Reask)
	v.rollout(path+".rollout_pct", &r.RolloutPct)
	v.hedge(path+".hedge", r.Hedge, len(r.Cascade), r.Budget)
}

// models checks the routes' aliases (routes.<name>.models) and server.default_route: a model
// name a client sends must lead to one route, so an alias may not be a route's name, nor be
// listed twice, and the default route must exist.
func (v *validator) models() {
	routes := map[string]bool{}
	for _, r := range v.f.Routes {
		routes[r.Name] = true
	}
	owner := map[string]string{} // alias → the path that listed it first
	for _, r := range v.f.Routes {
		for i, m := range r.Models {
			p := fmt.Sprintf("routes.%s.models[%d]", r.Name, i)
			switch {
			case m == "" || strings.IndexFunc(m, func(c rune) bool { return c <= ' ' || c == 0x7f }) >= 0:
				v.errorf(p, "invalid model name %q (want a name without spaces or control characters)", m)
			case m == r.Name:
				v.errorf(p, "%q is the route's own name, which it answers to already", m)
			case routes[m]:
				v.errorf(p, "%q is the name of route %q (line %d): an alias may not hide a route", m, m, v.line("routes."+m))
			case owner[m] != "":
				first := owner[m]
				v.errorf(p, "%q is already listed at %s (line %d): a model name leads to one route", m, first, v.line(first))
			default:
				owner[m] = p
			}
		}
	}
	if d := v.f.Server.DefaultRoute; d != "" || v.written("server.default_route") {
		if !routes[d] {
			names := make([]string, 0, len(routes))
			for _, r := range v.f.Routes {
				names = append(names, r.Name)
			}
			known := "the file has no routes"
			if len(names) > 0 {
				known = "routes: " + strings.Join(names, ", ")
			}
			v.errorf("server.default_route", "names no route %q (%s)", d, known)
		}
	}
}
