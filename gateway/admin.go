package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/state"
)

type providerStatus struct {
	Breaker string     `json:"breaker"`
	Since   *time.Time `json:"since"`
	Until   *time.Time `json:"until,omitempty"`
	// RampUntil is when a provider whose breaker a good probe closed takes its full share
	// of calls again (breaker.ramp_up); absent when it is not ramping up.
	RampUntil *time.Time `json:"ramp_until,omitempty"`
	InFlight  int        `json:"in_flight"`
	// ConcurrencyLimit is the provider's adaptive concurrency limit now, and Queued the
	// calls waiting for a slot under it.
	ConcurrencyLimit int                     `json:"concurrency_limit"`
	Queued           int                     `json:"queued"`
	Fault            *faultView              `json:"fault"`
	Tasks            map[string]latencyState `json:"tasks"`
}

// faultView is a fault in force as /admin/status and PUT /admin/faults show it: the fault
// as it was set, when it clears itself and the time left until then.
type faultView struct {
	Mode        fault.Mode `json:"mode"`
	Status      int        `json:"status,omitempty"`
	Delay       string     `json:"delay,omitempty"`
	RetryAfter  string     `json:"retry_after,omitempty"`
	AfterChunks int        `json:"after_chunks,omitempty"`
	Down        string     `json:"down,omitempty"`
	Up          string     `json:"up,omitempty"`
	Rate        float64    `json:"rate,omitempty"`
	TTL         string     `json:"ttl,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RemainingMS *int64     `json:"remaining_ms"`
}

// viewFault returns the fault in force at f, nil when there is none.
func viewFault(f *fault.Provider) *faultView {
	st := f.State()
	if st.Fault.Mode == fault.ModeNone {
		return nil
	}
	ft := st.Fault.Effective()
	v := &faultView{Mode: ft.Mode, Status: ft.Status, AfterChunks: ft.AfterChunks, Rate: ft.Rate, ExpiresAt: timePtr(st.ExpiresAt)}
	for _, d := range []struct {
		d   time.Duration
		out *string
	}{{ft.Delay, &v.Delay}, {ft.RetryAfter, &v.RetryAfter}, {ft.Down, &v.Down}, {ft.Up, &v.Up}, {ft.TTL, &v.TTL}} {
		if d.d > 0 {
			*d.out = d.d.String()
		}
	}
	if !st.ExpiresAt.IsZero() {
		ms := st.Remaining.Milliseconds()
		v.RemainingMS = &ms
	}
	return v
}

type latencyState struct {
	P95MS         *int64 `json:"p95_ms"`
	ReadTimeoutMS int64  `json:"read_timeout_ms"`
	// FirstToken is a route's streamed calls' estimate, of the time to the first chunk;
	// absent on a task, which does not stream, and on a route before a stream was made.
	FirstToken *latencyState `json:"first_token,omitempty"`
}

type taskStatus struct {
	Inputs        []string `json:"inputs"`
	Criticality   string   `json:"criticality"`
	Policy        string   `json:"on_exhausted"`
	FallbackShare float64  `json:"fallback_share"`
	// Cost is what the task's calls cost over the last hour (cost.go).
	Cost costStatus `json:"cost"`
	// LastDrill is the task's last drill (afloat drill), null before one; DrillStale is set
	// when its last passing drill is older than drill.max_age, or it was drilled and never
	// passed.
	LastDrill  *state.Drill `json:"last_drill"`
	DrillStale bool         `json:"drill_stale"`
	// Canary is the task's canary release (admin_canary.go), null without one.
	Canary *canaryView `json:"canary"`
	// Cache is the task's answer cache, null without one.
	Cache *cacheView `json:"cache"`
}

type routeStatus struct {
	Criticality   string       `json:"criticality"`
	FallbackShare float64      `json:"fallback_share"`
	Cost          costStatus   `json:"cost"`
	LastDrill     *state.Drill `json:"last_drill"`
	DrillStale    bool         `json:"drill_stale"`
	Cache         *cacheView   `json:"cache"`
}

// cacheView is an answer cache in /admin/status: {"ttl": "24h0m0s", "serve": "on_error",
// "entries": 1234}.
type cacheView struct {
	TTL     string `json:"ttl"`
	Serve   string `json:"serve"`
	Entries int    `json:"entries"`
}

// cacheOf is the view of a cache's status; nil without one.
func cacheOf(st cascade.CacheStatus, ok bool) *cacheView {
	if !ok {
		return nil
	}
	return &cacheView{TTL: st.TTL.String(), Serve: st.Serve, Entries: st.Entries}
}

// drillOf returns a scope's last drill and whether its drills are stale: drilled, and no
// passing drill within drill.max_age.
func (g *Gateway) drillOf(ds state.Drills) (*state.Drill, bool) {
	if ds.Last == nil {
		return nil, false
	}
	stale := ds.LastPassed == nil || g.clock.Since(ds.LastPassed.FinishedAt) > g.cfg.DrillMaxAge
	return ds.Last, stale
}

// postDrill records a drill that afloat drill ran: {"scope": "task:triage", "provider",
// "mode", "passed", "failed": [...], "started_at", "finished_at"}.
func (g *Gateway) postDrill(w http.ResponseWriter, r *http.Request) {
	if g.cfg.State == nil {
		writeError(w, http.StatusNotFound, "drills_disabled", "no state backend keeps drills")
		return
	}
	if !jsonBody(w, r) {
		return
	}
	var d state.Drill
	if !decodeStrict(w, r, &d) {
		return
	}
	kind, name, _ := strings.Cut(d.Scope, ":")
	tab := g.served()
	_, task := tab.tasks[name]
	_, route := tab.routes[name]
	switch {
	case kind == "task" && task, kind == "route" && route:
	default:
		writeError(w, http.StatusBadRequest, "unknown_scope", fmt.Sprintf("scope %q: want task:NAME or route:NAME of this gateway's config", d.Scope))
		return
	}
	if _, ok := tab.faults[d.Provider]; !ok {
		writeError(w, http.StatusBadRequest, "unknown_provider", fmt.Sprintf("no provider %q", d.Provider))
		return
	}
	if d.FinishedAt.IsZero() || d.StartedAt.After(d.FinishedAt) {
		writeError(w, http.StatusBadRequest, "invalid_drill", "started_at and finished_at are required, in order")
		return
	}
	if err := g.cfg.State.SaveDrill(r.Context(), d); err != nil {
		writeError(w, http.StatusServiceUnavailable, "state_unavailable", "the drill was not recorded: "+err.Error())
		return
	}
	g.log.InfoContext(r.Context(), "drill recorded", "scope", d.Scope, "provider", d.Provider, "mode", d.Mode, "passed", d.Passed, "failed", d.Failed)
	writeJSON(w, http.StatusOK, d)
}

type statusDoc struct {
	Providers    map[string]providerStatus `json:"providers"`
	Tasks        map[string]taskStatus     `json:"tasks"`
	Routes       map[string]routeStatus    `json:"routes"`
	Flags        *flags.Document           `json:"flags"`
	StateBackend map[string]any            `json:"state_backend"`
	ReviewStore  map[string]any            `json:"review_store"`
	Alerts       []alerts.State            `json:"alerts"`
	// Config is the config in force and the last reload (reload.go).
	Config *configStatus `json:"config"`
}

func (g *Gateway) status(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, g.statusOf(r.Context()))
}

// statusOf builds the /admin/status document, which the console's overview shows too.
func (g *Gateway) statusOf(ctx context.Context) statusDoc {
	tab := g.served()
	e := tab.engine
	doc := statusDoc{Providers: map[string]providerStatus{}, Tasks: map[string]taskStatus{}, Routes: map[string]routeStatus{}, Alerts: g.firingAlerts()}
	for _, name := range e.Providers() {
		snap := e.Breaker(name).Snapshot(ctx)
		ps := providerStatus{Breaker: snap.State.String(), InFlight: e.InFlight(name), Tasks: map[string]latencyState{}}
		ps.ConcurrencyLimit, ps.Queued = e.Concurrency(name)
		if !snap.Since.IsZero() {
			s := snap.Since.UTC()
			ps.Since = &s
		}
		if snap.State != breaker.StateClosed && !snap.Until.IsZero() {
			u := snap.Until.UTC()
			ps.Until = &u
		}
		if !snap.RampUntil.IsZero() {
			u := snap.RampUntil.UTC()
			ps.RampUntil = &u
		}
		if f, ok := tab.faults[name]; ok {
			ps.Fault = viewFault(f)
		}
		doc.Providers[name] = ps
	}
	e.Latency().Each(func(provider, task string, est *latency.Estimator) {
		ps, ok := doc.Providers[provider]
		if !ok {
			return
		}
		ls := latencyState{ReadTimeoutMS: est.ReadTimeout().Milliseconds()}
		if p, ok := est.Percentile(); ok {
			ms := p.Milliseconds()
			ls.P95MS = &ms
		}
		// A route's first-token estimate (scope "ROUTE/stream") goes under the route's own,
		// so that every key of "tasks" names a task or route.
		if route, ok := strings.CutSuffix(task, "/stream"); ok {
			own := ps.Tasks[route]
			own.FirstToken = &ls
			ps.Tasks[route] = own
			return
		}
		if prev, ok := ps.Tasks[task]; ok {
			ls.FirstToken = prev.FirstToken // the stream's came first
		}
		ps.Tasks[task] = ls
	})
	var drills map[string]state.Drills
	if g.cfg.State != nil {
		drills = g.cfg.State.Drills()
	}
	for name, t := range tab.tasks {
		ts := taskStatus{Inputs: t.Inputs(), Criticality: t.Criticality().String(), Policy: string(t.Policy()), FallbackShare: t.FallbackShare(), Cost: costOf(t.Spend()), Canary: canaryOf(t), Cache: cacheOf(t.Cache())}
		ts.LastDrill, ts.DrillStale = g.drillOf(drills["task:"+name])
		doc.Tasks[name] = ts
	}
	for name, rt := range tab.routes {
		rs := routeStatus{Criticality: rt.Criticality().String(), FallbackShare: rt.FallbackShare(), Cost: costOf(rt.Spend()), Cache: cacheOf(rt.Cache())}
		rs.LastDrill, rs.DrillStale = g.drillOf(drills["route:"+name])
		doc.Routes[name] = rs
	}
	if g.cfg.Flags != nil {
		d, err := g.cfg.Flags.Flags(ctx)
		if err == nil {
			doc.Flags = g.fullFlags(d)
		}
	}
	doc.StateBackend = g.stateStatus()
	doc.ReviewStore = g.reviewStoreStatus(ctx)
	doc.Config = g.reloads.status()
	return doc
}

// fullFlags returns the document with every known task and route present and every
// default spelled out, as GET and PUT answer it.
func (g *Gateway) fullFlags(d *flags.Document) *flags.Document {
	out := &flags.Document{Kill: d.Kill, Tasks: map[string]flags.TaskFlags{}}
	fill := func(name string) {
		tf := d.Tasks[name]
		if tf.Blocklist == nil {
			tf.Blocklist = []string{}
		}
		p := tf.Rollout()
		tf.RolloutPct = &p
		out.Tasks[name] = tf
	}
	tab := g.served()
	for name := range tab.tasks {
		fill(name)
	}
	for name := range tab.routes {
		fill(name)
	}
	return out
}

func (g *Gateway) getFlags(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Flags == nil {
		writeError(w, http.StatusNotFound, "flags_disabled", "no flag store")
		return
	}
	d, err := g.cfg.Flags.Flags(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "flags_unavailable", "the flags cannot be read: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, g.fullFlags(d))
}

func (g *Gateway) putFlags(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Flags == nil {
		writeError(w, http.StatusNotFound, "flags_disabled", "no flag store")
		return
	}
	if !jsonBody(w, r) {
		return
	}
	var doc flags.Document
	if !decodeStrict(w, r, &doc) {
		return
	}
	tab := g.served()
	for name := range doc.Tasks {
		if !tab.known(name) {
			writeError(w, http.StatusBadRequest, "unknown_task", fmt.Sprintf("tasks.%s: the config has no task or route %q", name, name))
			return
		}
	}
	if err := doc.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_flags", err.Error())
		return
	}
	// A task the document omits takes its default: the flags the config gave it (a staged
	// rollout stays staged), not "on for everyone".
	if doc.Tasks == nil {
		doc.Tasks = map[string]flags.TaskFlags{}
	}
	if defaults := tab.flagDefaults; defaults != nil {
		for name, tf := range defaults.Tasks {
			if _, ok := doc.Tasks[name]; !ok {
				doc.Tasks[name] = tf
			}
		}
	}
	if err := g.cfg.Flags.Set(r.Context(), &doc); err != nil {
		writeError(w, http.StatusServiceUnavailable, "flags_unavailable", "the flags cannot be written: "+err.Error())
		return
	}
	g.log.InfoContext(r.Context(), "flags replaced", "kill", doc.Kill)
	d, err := g.cfg.Flags.Flags(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "flags_unavailable", "the flags cannot be read: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, g.fullFlags(d))
}

// flagUpdater is a FlagStore that changes its document atomically (*flags.Memory does), so
// that two PATCHes at once both land. Without it PATCH reads, merges and writes back: the
// later of two concurrent PATCHes wins whole.
type flagUpdater interface {
	Update(ctx context.Context, fn func(cur *flags.Document) (*flags.Document, error)) (*flags.Document, error)
}

// badPatch is a merge patch that cannot apply: 400.
type badPatch struct {
	code string
	err  error
}

func (e *badPatch) Error() string { return e.err.Error() }

// patchFlags merges a JSON Merge Patch (RFC 7386) into the document in force: an object
// merges key by key, null removes a key, which then takes its default (the config's flag
// document), any other value replaces. A task the config does not know is a 400.
func (g *Gateway) patchFlags(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Flags == nil {
		writeError(w, http.StatusNotFound, "flags_disabled", "no flag store")
		return
	}
	patch, ok := readJSON(w, r)
	if !ok {
		return
	}
	if err := g.checkFlagPatch(patch); err != nil {
		writeError(w, http.StatusBadRequest, err.code, err.Error())
		return
	}
	merge := func(cur *flags.Document) (*flags.Document, error) { return g.mergeFlags(cur, patch) }
	ctx := r.Context()
	var err error
	if u, ok := g.cfg.Flags.(flagUpdater); ok {
		_, err = u.Update(ctx, merge)
	} else {
		var cur, next *flags.Document
		if cur, err = g.cfg.Flags.Flags(ctx); err == nil {
			if next, err = merge(cur); err == nil {
				err = g.cfg.Flags.Set(ctx, next)
			}
		}
	}
	var bp *badPatch
	switch {
	case errors.As(err, &bp):
		writeError(w, http.StatusBadRequest, bp.code, bp.Error())
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "flags_unavailable", "the flags cannot be written: "+err.Error())
		return
	}
	g.log.InfoContext(r.Context(), "flags patched", "patch", string(bytes.TrimSpace(patch)))
	d, err := g.cfg.Flags.Flags(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "flags_unavailable", "the flags cannot be read: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, g.fullFlags(d))
}

// checkFlagPatch refuses a patch that is no JSON object, or names a task the config does
// not know.
func (g *Gateway) checkFlagPatch(patch []byte) *badPatch {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil || p == nil {
		return &badPatch{"invalid_request", fmt.Errorf("a merge patch is a JSON object: %v", errOr(err, "got null"))}
	}
	raw, ok := p["tasks"]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	var tasks map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tasks); err != nil {
		return &badPatch{"invalid_flags", fmt.Errorf("tasks: want an object of tasks: %v", err)}
	}
	tab := g.served()
	for name := range tasks {
		if !tab.known(name) {
			return &badPatch{"unknown_task", fmt.Errorf("tasks.%s: the config has no task or route %q", name, name)}
		}
	}
	return nil
}

func errOr(err error, msg string) string {
	if err != nil {
		return err.Error()
	}
	return msg
}

// mergeFlags applies patch to cur, both spelled out in full, and fills what the result
// lacks from the config's flag document.
func (g *Gateway) mergeFlags(cur *flags.Document, patch []byte) (*flags.Document, error) {
	base, err := json.Marshal(g.fullFlags(cur))
	if err != nil {
		return nil, err
	}
	merged, err := flags.MergePatch(base, patch)
	if err != nil {
		return nil, &badPatch{"invalid_request", err}
	}
	defaults := g.served().flagDefaults
	if defaults == nil {
		defaults = &flags.Document{}
	}
	def, err := json.Marshal(g.fullFlags(defaults))
	if err != nil {
		return nil, err
	}
	var m, d map[string]any
	if err := json.Unmarshal(merged, &m); err != nil {
		return nil, &badPatch{"invalid_request", err}
	}
	if err := json.Unmarshal(def, &d); err != nil {
		return nil, err
	}
	if _, ok := m["kill"]; !ok {
		m["kill"] = d["kill"]
	}
	if _, ok := m["tasks"]; !ok {
		m["tasks"] = map[string]any{}
	}
	if mt, ok := m["tasks"].(map[string]any); ok {
		for name, dt := range d["tasks"].(map[string]any) {
			t, ok := mt[name].(map[string]any)
			if _, present := mt[name]; !present {
				mt[name] = dt
				continue
			} else if !ok {
				continue // not an object: decoding says so
			}
			for k, v := range dt.(map[string]any) {
				if _, ok := t[k]; !ok {
					t[k] = v
				}
			}
		}
	}
	filled, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var next flags.Document
	dec := json.NewDecoder(bytes.NewReader(filled))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&next); err != nil {
		return nil, &badPatch{"invalid_flags", err}
	}
	if err := next.Validate(); err != nil {
		return nil, &badPatch{"invalid_flags", err}
	}
	return &next, nil
}

// decodeStrict reads one JSON value with no unknown fields, answering 400 or 413 itself.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one value in the body")
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over %d bytes", mbe.Limit))
		return false
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "invalid_request", "empty body")
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request", "invalid JSON: "+err.Error())
		return false
	}
	return true
}

func (g *Gateway) putBreaker(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	br := g.served().engine.Breaker(name)
	if br == nil {
		writeError(w, http.StatusNotFound, "unknown_provider", fmt.Sprintf("no provider %q", name))
		return
	}
	if !jsonBody(w, r) {
		return
	}
	var body struct {
		State string `json:"state"`
		// For is how long a forced opening holds ("2h"); absent means breaker.recovery.
		For string `json:"for"`
	}
	if !decodeStrict(w, r, &body) {
		return
	}
	if body.State != "open" && body.State != "closed" {
		writeError(w, http.StatusBadRequest, "invalid_state", fmt.Sprintf("state %q: want \"open\" or \"closed\"", body.State))
		return
	}
	st, _ := breaker.ParseState(body.State)
	var err error
	switch {
	case body.For == "":
		err = br.Force(r.Context(), st)
	case st != breaker.StateOpen:
		writeError(w, http.StatusBadRequest, "invalid_state", `"for" goes with "state": "open" only`)
		return
	default:
		d, perr := time.ParseDuration(body.For)
		if perr != nil || d <= 0 || d > maxForcedOpen {
			writeError(w, http.StatusBadRequest, "invalid_state", fmt.Sprintf("for %q: want a duration above 0 and at most %v (\"2h\")", body.For, maxForcedOpen))
			return
		}
		err = br.ForceOpen(r.Context(), d)
	}
	if err != nil {
		writeError(w, http.StatusConflict, "breaker_not_forced", err.Error())
		return
	}
	g.log.InfoContext(r.Context(), "breaker forced", "provider", name, "state", body.State, "for", body.For)
	snap := br.Snapshot(r.Context())
	out := map[string]any{"provider": name, "breaker": snap.State.String(), "since": snap.Since.UTC()}
	if snap.State == breaker.StateOpen && !snap.Until.IsZero() {
		out["until"] = snap.Until.UTC() // then it probes, as after any opening
	}
	writeJSON(w, http.StatusOK, out)
}

// maxForcedOpen bounds a forced opening's "for": a provider left out for longer is a config
// change (take it out of the cascades), not a breaker's state.
const maxForcedOpen = 7 * 24 * time.Hour

func (g *Gateway) putFault(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	f, ok := g.served().faults[name]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_provider", fmt.Sprintf("no provider %q", name))
		return
	}
	if !jsonBody(w, r) {
		return
	}
	var raw json.RawMessage // well-formed JSON first; what it says is the fault's to judge
	if !decodeStrict(w, r, &raw) {
		return
	}
	var flt fault.Fault
	if err := json.Unmarshal(raw, &flt); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_fault", strings.TrimPrefix(err.Error(), "json: "))
		return
	}
	if flt.Mode == fault.ModeNone {
		writeError(w, http.StatusBadRequest, "invalid_fault", `"mode" is required: unavailable, timeout, slow, malformed, reset, rate_limited, stream_cut, stream_stall, first_token_slow, flap or error_rate (DELETE clears a fault)`)
		return
	}
	if flt.TTL == 0 {
		// A drill nobody ends must not keep a provider down: every fault clears itself.
		flt.TTL = fault.DefaultTTL
	}
	if err := flt.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_fault", err.Error())
		return
	}
	if !g.setFault(w, r, name, f, flt) {
		return
	}
	g.log.WarnContext(r.Context(), "fault injected", "provider", name, "mode", string(flt.Mode), "ttl", flt.TTL.String())
	writeJSON(w, http.StatusOK, map[string]any{"provider": name, "fault": viewFault(f)})
}

// setFault sets flt (valid; the zero Fault clears) through the state backend, so that every
// replica sharing it applies it, or on the local wrapper without one. It answers 503 and
// reports false when the backend cannot take it.
func (g *Gateway) setFault(w http.ResponseWriter, r *http.Request, name string, p *fault.Provider, flt fault.Fault) bool {
	var err error
	if g.cfg.State != nil {
		err = g.cfg.State.SetFault(r.Context(), name, flt)
	} else {
		err = p.Set(flt)
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "state_unavailable", "the fault was not set: the state backend cannot take it: "+err.Error())
		return false
	}
	return true
}

func (g *Gateway) deleteFault(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	f, ok := g.served().faults[name]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_provider", fmt.Sprintf("no provider %q", name))
		return
	}
	if !g.setFault(w, r, name, f, fault.Fault{}) {
		return
	}
	g.log.InfoContext(r.Context(), "fault cleared", "provider", name)
	writeJSON(w, http.StatusOK, map[string]any{"provider": name, "fault": nil})
}
