package gateway

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/state"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// FlagStore is where the kill switches live: read on every call, replaced by PUT
// /admin/flags (PATCH merges into it). *flags.Memory implements it.
type FlagStore interface {
	flags.Source
	// Set replaces the whole document; an invalid one is an error and changes nothing.
	Set(ctx context.Context, doc *flags.Document) error
}

// State is the state backend as the gateway sees it.
type State interface {
	// Kind names it in /admin/status: "local" or "redis".
	Kind() string
	// Health returns nil while it answers, or why it does not.
	Health() error
	// SetFault injects f into the provider (the zero Fault clears it), everywhere the state
	// is shared.
	SetFault(ctx context.Context, provider string, f fault.Fault) error
	// SaveDrill records a drill (POST /admin/drills); Drills returns them by scope.
	SaveDrill(ctx context.Context, d state.Drill) error
	Drills() map[string]state.Drills
}

// Config configures a Gateway.
type Config struct {
	// Engine runs the tasks and routes; required.
	Engine *cascade.Engine
	// Tasks and Routes are served by name; nil serves none.
	Tasks  map[string]*cascade.Task
	Routes map[string]*cascade.Route
	// Models maps an alias, a model name a client may send instead of a route's name
	// ("gpt-4o-mini"), to the route that answers it; each names a route of Routes and is no
	// route's name itself. nil means no aliases.
	Models map[string]string
	// DefaultRoute names the route of Routes that answers a chat or messages call whose
	// model is neither a route nor an alias; "" answers those 404.
	DefaultRoute string
	// Faults are the fault injectors of the providers, by name; nil disables
	// /admin/faults.
	Faults map[string]*fault.Provider
	// Flags is the flag store the engine reads; nil disables /admin/flags.
	Flags FlagStore
	// Review is the review store behind GET /v1/reviews/{id} and the operators' review API
	// (/admin/reviews); its health counts in /readyz and /admin/status. nil answers 404
	// there.
	Review review.Store
	// ReviewAnswered is called with each item an operator resolved or rejected through the
	// review API, once committed (the review webhook's Wake: its delivery goes out at once).
	// nil calls nothing.
	ReviewAnswered func(*review.Item)
	// Operators maps an operator's name to their bearer token (operators.<name>.token). An
	// operator's token opens the review API only, acting as that name; the admin token opens
	// it too, acting for the operator named in the X-Afloat-Operator header, or as
	// AdminOperator ("admin") without one. Names are 1-64 letters, digits, '.', '_', '@' or
	// '-', and not "admin"; tokens are distinct from each other, from the admin token and
	// from every client key. nil means no operator tokens.
	Operators map[string]string
	// Tenants maps a tenant id to its client keys. Empty means open access: no key is
	// asked for, and every call has the empty tenant (serve on loopback only). No key may
	// be the admin token, whose bearer would be taken for the admin.
	Tenants map[string][]string
	// AdminToken guards the admin API; "" turns the admin API off (404).
	AdminToken string
	// MaxBody caps request bodies. 0 means 1 MiB.
	MaxBody int64
	// Gatherer serves /metrics; nil serves an empty registry (never the global one).
	Gatherer prometheus.Gatherer
	// State is the state backend that keeps the flags and faults (*state.State): faults are
	// set through it, so that with the redis backend every replica sees them, and its health
	// shows in /admin/status and /readyz. nil means "local", always healthy, faults set on
	// the Faults' wrappers only.
	State State
	// StateRequired answers 503 to calls and to /readyz while State is unhealthy
	// (state.on_failure: fail). Otherwise a replica keeps serving on its own state, still
	// ready, and says so in /readyz and /admin/status.
	StateRequired bool
	// DrillMaxAge is how old a task's last passing drill may be before /admin/status flags
	// it (drill.max_age). 0 means 90 days.
	DrillMaxAge time.Duration
	// Alerts lists the alerts firing now in /admin/status ("alerts"); nil lists none.
	Alerts Alerts
	// Ready reports whether the gateway can take calls (beyond the state backend and the
	// review store, which it checks itself); nil means always ready.
	Ready func(ctx context.Context) error
	// Clock drives budgets and the idempotency cache; nil means real time.
	Clock clockwork.Clock
	// Logger receives one line per request and the errors; nil discards. Credentials
	// never reach it.
	Logger *slog.Logger
	// AccessLog is what the access log writes: "" and "on" a line per request, "errors"
	// only the requests answered 4xx or 5xx, "off" none. Failed attempts of degraded answers
	// are logged whatever it says.
	AccessLog string
	// FlagDefaults is the config's flag document: a task that PUT /admin/flags omits takes
	// its entry (a staged rollout stays staged). nil takes the document Flags holds at New.
	FlagDefaults *flags.Document
	// Version names the config in force in /admin/status (config.File.Version); "" leaves
	// it out.
	Version string
	// Reload re-reads the config and puts it in force with Swap (POST /admin/reload and
	// Gateway.Reload, which serve calls on SIGHUP), or changes nothing and returns why. nil
	// answers 404 at /admin/reload.
	Reload Reloader
}

// Gateway is the HTTP face of afloat. It is safe for concurrent use.
type Gateway struct {
	cfg     Config
	clock   clockwork.Clock
	log     *slog.Logger
	idem    *idempotency
	handler http.Handler
	// readyz is the last readiness probe, which /readyz answers from.
	readyz readyCache
	// table holds what is served by name (served.go).
	table atomic.Pointer[served]
	// reloads is the config in force and the last reload (reload.go).
	reloads reloads
}

type tenantKey struct {
	tenant string
	key    []byte
}

// New builds a Gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Engine == nil {
		return nil, errors.New("gateway: engine is required")
	}
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("gateway: max_body %d is negative", cfg.MaxBody)
	}
	switch cfg.AccessLog {
	case "", "on", "errors", "off":
	default:
		return nil, fmt.Errorf("gateway: unknown access log %q (want on, errors or off)", cfg.AccessLog)
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.DrillMaxAge == 0 {
		cfg.DrillMaxAge = 90 * 24 * time.Hour
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	g := &Gateway{cfg: cfg, clock: cfg.Clock, log: cfg.Logger}
	table, err := newServed(cfg)
	if err != nil {
		return nil, err
	}
	g.table.Store(table)
	if g.clock == nil {
		g.clock = clockwork.NewRealClock()
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.log = slog.New(telemetry.LogHandler(g.log.Handler())) // request_id, trace_id on every line
	g.idem = newIdempotency(g.clock, 24*time.Hour, 10000)
	g.reloads.start(cfg.Version, g.clock.Now())

	mux := http.NewServeMux()
	mux.Handle("POST /v1/tasks/{task}", g.client(http.HandlerFunc(g.task)))
	mux.Handle("POST /v1/chat/completions", g.client(http.HandlerFunc(g.chat)))
	mux.Handle("POST /v1/messages", anthropicRequestID(g.client(http.HandlerFunc(g.messages))))
	mux.Handle("GET /v1/models", g.client(http.HandlerFunc(g.models)))
	mux.Handle("GET /v1/models/{model}", g.client(http.HandlerFunc(g.model)))
	mux.Handle("GET /v1/reviews/{id}", g.client(http.HandlerFunc(g.reviewStatus)))
	mux.Handle("GET /admin/status", g.admin(http.HandlerFunc(g.status)))
	mux.Handle("GET /admin/flags", g.admin(http.HandlerFunc(g.getFlags)))
	mux.Handle("PUT /admin/flags", g.admin(http.HandlerFunc(g.putFlags)))
	mux.Handle("PATCH /admin/flags", g.admin(http.HandlerFunc(g.patchFlags)))
	mux.Handle("PUT /admin/breakers/{provider}", g.admin(http.HandlerFunc(g.putBreaker)))
	mux.Handle("PUT /admin/faults/{provider}", g.admin(http.HandlerFunc(g.putFault)))
	mux.Handle("DELETE /admin/faults/{provider}", g.admin(http.HandlerFunc(g.deleteFault)))
	mux.Handle("POST /admin/drills", g.admin(http.HandlerFunc(g.postDrill)))
	mux.Handle("POST /admin/reload", g.admin(http.HandlerFunc(g.postReload)))
	mux.Handle("GET /admin/canaries", g.admin(http.HandlerFunc(g.getCanaries)))
	mux.Handle("PUT /admin/canaries/{task}", g.admin(http.HandlerFunc(g.putCanary)))
	g.routeReviews(mux)
	g.routeConsole(mux) // GET /ui/ (console.go) and GET /admin/audit
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", g.ready)
	// A known path with another method is 405 with Allow, in the JSON error shape.
	for path, allow := range map[string]string{
		"/v1/tasks/{task}": "POST", "/v1/chat/completions": "POST", "/v1/messages": "POST", "/v1/reviews/{id}": "GET",
		"/v1/models": "GET", "/v1/models/{model}": "GET",
		"/admin/status": "GET", "/admin/flags": "GET, PUT, PATCH", "/admin/breakers/{provider}": "PUT",
		"/admin/faults/{provider}": "PUT, DELETE", "/admin/drills": "POST", "/admin/reload": "POST", "/admin/canaries": "GET", "/admin/canaries/{task}": "PUT", "/metrics": "GET", "/healthz": "GET", "/readyz": "GET",
		"/admin/reviews": "GET", "/admin/reviews/{id}": "GET", "/admin/reviews/{id}/claim": "POST",
		"/admin/reviews/{id}/resolve": "POST", "/admin/reviews/{id}/reject": "POST", "/admin/reviews/{id}/release": "POST",
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			requestError(w, r, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+r.URL.Path+": allowed "+allow)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		requestError(w, r, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	g.handler = g.observe(g.accessLog(g.recover(oneAuthorization(mux))))
	return g, nil
}

// oneAuthorization refuses a request with more than one Authorization header with 400: which
// one names the caller would be a guess (net/http's Header.Get takes the first, a proxy in
// front may have checked the last), so none is taken.
func oneAuthorization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values("Authorization")) > 1 {
			requestError(w, r, http.StatusBadRequest, "invalid_authorization", "more than one Authorization header: send one")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handler returns the gateway's http.Handler.
func (g *Gateway) Handler() http.Handler { return g.handler }

type ctxKey int

const tenantCtx ctxKey = 0

// client authenticates a client call by its tenant key (when tenants are configured) and
// bounds its body.
func (g *Gateway) client(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := ""
		if keys := g.served().keys; len(keys) > 0 {
			key, ok, err := callerKey(r)
			if err != nil {
				requestError(w, r, http.StatusBadRequest, "invalid_authorization", err.Error())
				return
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="afloat"`)
				requestError(w, r, http.StatusUnauthorized, "unauthorized", "missing client key: "+keyHint(r))
				return
			}
			if tenant, ok = tenantOf(keys, key); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="afloat"`)
				requestError(w, r, http.StatusUnauthorized, "unauthorized", "unknown client key")
				return
			}
		}
		if g.cfg.StateRequired {
			if err := g.stateHealth(); err != nil {
				w.Header().Set("Retry-After", "1")
				requestError(w, r, http.StatusServiceUnavailable, "state_unavailable",
					"the shared state is unavailable and this gateway is configured to stop (state.on_failure: fail): "+err.Error())
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBody)
		ctx := context.WithValue(r.Context(), tenantCtx, tenant)
		ctx = cascade.WithTenant(ctx, tenant)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// tenantOf finds the tenant of key, comparing in constant time against every key so that
// the time taken says nothing about which key came close.
func tenantOf(keys []tenantKey, key string) (string, bool) {
	found, tenant := 0, ""
	kb := []byte(key)
	for _, k := range keys {
		if subtle.ConstantTimeCompare(kb, k.key) == 1 {
			found, tenant = 1, k.tenant
		}
	}
	return tenant, found == 1
}

func tenantFrom(r *http.Request) string {
	s, _ := r.Context().Value(tenantCtx).(string)
	return s
}

// admin guards the admin API with the admin token; without one the API does not exist.
func (g *Gateway) admin(next http.Handler) http.Handler {
	token := []byte(g.cfg.AdminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(token) == 0 {
			writeError(w, http.StatusNotFound, "admin_disabled", "the admin API is off: set server.admin_token to turn it on")
			return
		}
		got, ok := bearer(r)
		if !ok || subtle.ConstantTimeCompare([]byte(got), token) != 1 {
			if name, _, op := g.whoIs([]byte(got), nil); ok && op {
				// A known operator: who they are is not in doubt, what they may open is.
				writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("operator %s may use the review queue only: this endpoint takes the admin token", name))
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="afloat-admin"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong admin token")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBody)
		next.ServeHTTP(w, r)
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// jsonBody checks that a request carries JSON.
func jsonBody(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		requestError(w, r, http.StatusUnsupportedMediaType, "unsupported_media_type", fmt.Sprintf("content type %q: send application/json", ct))
		return false
	}
	return true
}

// statusWriter remembers the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK // a flush sends the headers
	}
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// accessLog writes one line per request: method, path, status, duration (took_ms), the
// request_id (from the context, by telemetry.LogHandler) and, for a task or route call,
// its task, source, degraded, reason, provider and the call's own latency_ms (see
// callAttrs). Headers and bodies are never logged, so no credential can reach the log.
func (g *Gateway) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		switch {
		case r.URL.Path == "/metrics" || r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
			return
		case g.cfg.AccessLog == "off", g.cfg.AccessLog == "errors" && sw.status < 400:
			return
		case !g.log.Enabled(r.Context(), slog.LevelInfo):
			return // the line's attributes are not worth building
		}
		g.log.LogAttrs(r.Context(), slog.LevelInfo, "request", append([]slog.Attr{
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Float64("took_ms", float64(time.Since(start).Microseconds())/1000)},
			callAttrs(r.Context())...)...)
	})
}

// recover turns a panic in a handler (a provider's, a heuristic's, a review store's) into a
// 500 and a log line with the stack, not a dead process; the handlers settle what they hold
// in deferred calls of their own. A response whose headers went out cannot change its status:
// an event stream ends with an error event and no [DONE], anything else is cut as
// http.ErrAbortHandler cuts it. http.ErrAbortHandler itself goes on up to net/http.
func (g *Gateway) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw, ok := w.(*statusWriter)
		if !ok {
			sw = &statusWriter{ResponseWriter: w}
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			g.log.LogAttrs(r.Context(), slog.LevelError, "handler panic",
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			switch {
			case sw.status == 0:
				writeInternal(sw, r)
			case strings.HasPrefix(sw.Header().Get("Content-Type"), "text/event-stream"):
				writePanicEvent(sw, r)
			default:
				panic(http.ErrAbortHandler)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	if err := g.readiness(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "reason": err.Error(), "state_backend": g.stateStatus()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "state_backend": g.stateStatus()})
}

// stateHealth returns the state backend's health; nil without one.
func (g *Gateway) stateHealth() error {
	if g.cfg.State == nil {
		return nil
	}
	return g.cfg.State.Health()
}

// stateStatus is the state backend in /readyz and /admin/status: its kind, whether it
// answers and, when it does not, why (the replica then serves from its own state).
func (g *Gateway) stateStatus() map[string]any {
	kind := "local"
	if g.cfg.State != nil {
		kind = g.cfg.State.Kind()
	}
	out := map[string]any{"kind": kind, "healthy": true}
	if err := g.stateHealth(); err != nil {
		out["healthy"] = false
		out["error"] = err.Error()
		if !g.cfg.StateRequired {
			out["fallback"] = "local"
		}
	}
	return out
}

const (
	// readyInterval is how long /readyz answers "ready" from a probe that found the gateway
	// ready. /readyz is unauthenticated and the review store's probe is a synced write: a
	// probe per call let a prober load the disk the critical calls commit on.
	readyInterval = time.Second
	// readyTimeout bounds a probe, which runs to its end even when the client that started
	// it leaves (others wait for its answer).
	readyTimeout = 10 * time.Second
)

// readyCache is the last readiness probe and the one in flight. Its zero value is usable;
// it is safe for concurrent use.
type readyCache struct {
	mu      sync.Mutex
	readyAt time.Time    // when a probe last found the gateway ready; zero after a failed one
	flight  *readyFlight // the probe running; nil when none runs
}

type readyFlight struct {
	done chan struct{} // closed when err is set
	err  error
}

// readiness probes the state backend and the review store at most once per readyInterval
// while they are healthy: within the interval, and while the next probe runs, it answers
// ready from the last probe. After a failed probe every call probes again, so that recovery
// shows at once, but never two at a time: calls that arrive while one runs share its answer.
func (g *Gateway) readiness(ctx context.Context) error {
	c := &g.readyz
	c.mu.Lock()
	if !c.readyAt.IsZero() && (c.flight != nil || g.clock.Since(c.readyAt) < readyInterval) {
		c.mu.Unlock()
		return nil
	}
	if f := c.flight; f != nil {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &readyFlight{done: make(chan struct{})}
	c.flight = f
	c.mu.Unlock()

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancel()
	// Until the probe returns, its answer is a failure; the deferred release runs also when a
	// store's probe panics, so that the calls waiting on it never hang.
	f.err = errors.New("the readiness probe panicked")
	defer func() {
		c.mu.Lock()
		c.flight = nil
		c.readyAt = time.Time{}
		if f.err == nil {
			c.readyAt = g.clock.Now()
		}
		c.mu.Unlock()
		close(f.done)
	}()
	f.err = g.probeReady(pctx)
	return f.err
}

// probeReady asks the state backend and the review store whether they answer now. A
// state backend that fails makes the gateway unready only when it is required.
func (g *Gateway) probeReady(ctx context.Context) error {
	if err := g.stateHealth(); err != nil && g.cfg.StateRequired {
		return err
	}
	if g.cfg.Ready != nil {
		if err := g.cfg.Ready(ctx); err != nil {
			return err
		}
	}
	return g.reviewHealth(ctx)
}
