package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/provider/fault"
)

type providerStatus struct {
	Breaker  string                  `json:"breaker"`
	Since    *time.Time              `json:"since"`
	Until    *time.Time              `json:"until,omitempty"`
	InFlight int                     `json:"in_flight"`
	Fault    *fault.Fault            `json:"fault"`
	Tasks    map[string]latencyState `json:"tasks"`
}

type latencyState struct {
	P95MS         *int64 `json:"p95_ms"`
	ReadTimeoutMS int64  `json:"read_timeout_ms"`
}

type taskStatus struct {
	Inputs        []string   `json:"inputs"`
	Criticality   string     `json:"criticality"`
	Policy        string     `json:"on_exhausted"`
	FallbackShare float64    `json:"fallback_share"`
	LastDrill     *time.Time `json:"last_drill"`
}

type routeStatus struct {
	Criticality   string  `json:"criticality"`
	FallbackShare float64 `json:"fallback_share"`
}

type statusDoc struct {
	Providers    map[string]providerStatus `json:"providers"`
	Tasks        map[string]taskStatus     `json:"tasks"`
	Routes       map[string]routeStatus    `json:"routes"`
	Flags        *flags.Document           `json:"flags"`
	StateBackend map[string]any            `json:"state_backend"`
	ReviewStore  map[string]any            `json:"review_store"`
	Alerts       []any                     `json:"alerts"`
}

func (g *Gateway) status(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	e := g.cfg.Engine
	doc := statusDoc{Providers: map[string]providerStatus{}, Tasks: map[string]taskStatus{}, Routes: map[string]routeStatus{}, Alerts: []any{}}
	for _, name := range e.Providers() {
		snap := e.Breaker(name).Snapshot(ctx)
		ps := providerStatus{Breaker: snap.State.String(), InFlight: e.InFlight(name), Tasks: map[string]latencyState{}}
		if !snap.Since.IsZero() {
			s := snap.Since.UTC()
			ps.Since = &s
		}
		if snap.State != breaker.StateClosed && !snap.Until.IsZero() {
			u := snap.Until.UTC()
			ps.Until = &u
		}
		if f, ok := g.cfg.Faults[name]; ok && f.Fault().Mode != fault.ModeNone {
			cur := f.Fault()
			ps.Fault = &cur
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
		ps.Tasks[task] = ls
	})
	for name, t := range g.cfg.Tasks {
		doc.Tasks[name] = taskStatus{Inputs: t.Inputs(), Criticality: t.Criticality().String(), Policy: string(t.Policy()), FallbackShare: t.FallbackShare()}
	}
	for name, rt := range g.cfg.Routes {
		doc.Routes[name] = routeStatus{Criticality: rt.Criticality().String(), FallbackShare: rt.FallbackShare()}
	}
	if g.cfg.Flags != nil {
		d, err := g.cfg.Flags.Flags(ctx)
		if err == nil {
			doc.Flags = g.fullFlags(d)
		}
	}
	healthy := true
	if g.cfg.Ready != nil {
		healthy = g.cfg.Ready(ctx) == nil
	}
	doc.StateBackend = map[string]any{"kind": g.cfg.StateBackend, "healthy": healthy}
	doc.ReviewStore = g.reviewStoreStatus(ctx)
	writeJSON(w, http.StatusOK, doc)
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
	for name := range g.cfg.Tasks {
		fill(name)
	}
	for name := range g.cfg.Routes {
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
	for name := range doc.Tasks {
		_, task := g.cfg.Tasks[name]
		_, route := g.cfg.Routes[name]
		if !task && !route {
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
	if g.flagDefaults != nil {
		for name, tf := range g.flagDefaults.Tasks {
			if _, ok := doc.Tasks[name]; !ok {
				doc.Tasks[name] = tf
			}
		}
	}
	if err := g.cfg.Flags.Set(r.Context(), &doc); err != nil {
		writeError(w, http.StatusServiceUnavailable, "flags_unavailable", "the flags cannot be written: "+err.Error())
		return
	}
	g.log.Info("flags replaced", "kill", doc.Kill)
	d, err := g.cfg.Flags.Flags(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "flags_unavailable", "the flags cannot be read: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, g.fullFlags(d))
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
	br := g.cfg.Engine.Breaker(name)
	if br == nil {
		writeError(w, http.StatusNotFound, "unknown_provider", fmt.Sprintf("no provider %q", name))
		return
	}
	if !jsonBody(w, r) {
		return
	}
	var body struct {
		State string `json:"state"`
	}
	if !decodeStrict(w, r, &body) {
		return
	}
	if body.State != "open" && body.State != "closed" {
		writeError(w, http.StatusBadRequest, "invalid_state", fmt.Sprintf("state %q: want \"open\" or \"closed\"", body.State))
		return
	}
	st, _ := breaker.ParseState(body.State)
	if err := br.Force(r.Context(), st); err != nil {
		writeError(w, http.StatusConflict, "breaker_not_forced", err.Error())
		return
	}
	g.log.Info("breaker forced", "provider", name, "state", body.State)
	snap := br.Snapshot(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"provider": name, "breaker": snap.State.String(), "since": snap.Since.UTC()})
}

func (g *Gateway) putFault(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	f, ok := g.cfg.Faults[name]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_provider", fmt.Sprintf("no provider %q", name))
		return
	}
	if !jsonBody(w, r) {
		return
	}
	var flt fault.Fault
	if !decodeStrict(w, r, &flt) {
		return
	}
	if flt.Mode == fault.ModeNone {
		writeError(w, http.StatusBadRequest, "invalid_fault", `"mode" is required: unavailable, timeout, slow or malformed (DELETE clears a fault)`)
		return
	}
	if err := f.Set(flt); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_fault", err.Error())
		return
	}
	g.log.Warn("fault injected", "provider", name, "mode", string(flt.Mode))
	writeJSON(w, http.StatusOK, map[string]any{"provider": name, "fault": f.Fault()})
}

func (g *Gateway) deleteFault(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	f, ok := g.cfg.Faults[name]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_provider", fmt.Sprintf("no provider %q", name))
		return
	}
	_ = f.Set(fault.Fault{})
	g.log.Info("fault cleared", "provider", name)
	writeJSON(w, http.StatusOK, map[string]any{"provider": name, "fault": nil})
}
