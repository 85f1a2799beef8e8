package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// A config reload (POST /admin/reload, SIGHUP to afloat serve) goes through Gateway.Reload:
// it calls the host's Reloader, which re-reads the config, builds it and puts it in force
// with Swap, and records the outcome for /admin/status and the log. Reloads run one at a
// time. A handler reads the table once, so a call in flight finishes on the config it
// started with.

// Reloader re-reads the config and puts it in force with Gateway.Swap, or changes nothing
// and returns why. An error that wraps several (errors.Join, config.Errors) is answered one
// problem per entry.
type Reloader func(ctx context.Context) (*Reload, error)

// Reload is what a reload put in force, as POST /admin/reload answers it.
type Reload struct {
	// Version names the config now in force; Previous the one it replaced.
	Version  string `json:"version"`
	Previous string `json:"previous"`
	// Changes are what the new config changed, key by key.
	Changes []ReloadChange `json:"changes"`
}

// ReloadChange is one key a reload changed.
type ReloadChange struct {
	// Path is the key path ("tasks.triage.cascade[1]", "providers.backup").
	Path string `json:"path"`
	// Kind is "added", "removed" or "changed".
	Kind string `json:"kind"`
	// Detail says what changed when it can be told without a secret ("version v3 → v4").
	Detail string `json:"detail,omitempty"`
}

// Swap puts in force what cfg serves by name: its Engine, Tasks, Routes, Faults, Models,
// DefaultRoute and FlagDefaults, and the tenants' keys (Tenants, checked against the
// AdminToken and Operators the gateway was built with). The calls in flight finish on what
// they started with; the next call reads cfg's. The other fields of cfg are not read: they
// take a new Gateway. An invalid cfg is an error and changes nothing.
func (g *Gateway) Swap(cfg Config) error {
	cfg.AdminToken, cfg.Operators = g.cfg.AdminToken, g.cfg.Operators
	if cfg.Flags == nil {
		cfg.Flags = g.cfg.Flags
	}
	table, err := newServed(cfg)
	if err != nil {
		return err
	}
	g.table.Store(table)
	return nil
}

// Reload re-reads the config through Config.Reload and puts it in force, as POST
// /admin/reload does: one reload at a time, each logged and recorded for /admin/status. An
// invalid config changes nothing; the error says why.
func (g *Gateway) Reload(ctx context.Context) (*Reload, error) {
	if g.cfg.Reload == nil {
		return nil, errReloadOff
	}
	g.reloads.run.Lock()
	defer g.reloads.run.Unlock()
	res, err := g.cfg.Reload(ctx)
	now := g.clock.Now()
	if err != nil {
		problems := reloadProblems(err)
		g.reloads.failed(now, problems)
		g.log.ErrorContext(ctx, "config reload refused: nothing changed", "errors", problems)
		return nil, err
	}
	g.reloads.done(now, res.Version)
	g.log.InfoContext(ctx, "config reloaded", "version", res.Version, "previous", res.Previous, "changes", len(res.Changes))
	for _, c := range res.Changes {
		g.log.InfoContext(ctx, "config reload change", "path", c.Path, "kind", c.Kind, "detail", c.Detail)
	}
	return res, nil
}

var errReloadOff = errors.New("this gateway has no config to reload")

// postReload is POST /admin/reload: 200 with what changed, 422 with every problem of a
// config that was not put in force.
func (g *Gateway) postReload(w http.ResponseWriter, r *http.Request) {
	res, err := g.Reload(r.Context())
	switch {
	case errors.Is(err, errReloadOff):
		writeError(w, http.StatusNotFound, "reload_disabled", err.Error())
	case err != nil:
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": map[string]any{
			"code": "invalid_config", "message": "the config was not reloaded; nothing changed: " + err.Error(),
			"errors": reloadProblems(err),
		}})
	default:
		if res.Changes == nil {
			res.Changes = []ReloadChange{}
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// reloadProblems lists the problems err holds, one per wrapped error.
func reloadProblems(err error) []string {
	var many interface{ Unwrap() []error }
	if errors.As(err, &many) {
		var out []string
		for _, e := range many.Unwrap() {
			out = append(out, e.Error())
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{err.Error()}
}

// reloads is the config in force and the last reload, for /admin/status. Its zero value is
// ready; it is safe for concurrent use.
type reloads struct {
	run sync.Mutex // held through a reload: one at a time

	mu       sync.Mutex
	version  string
	loadedAt time.Time
	last     *lastReload
}

// lastReload is the outcome of the last reload.
type lastReload struct {
	At     time.Time `json:"at"`
	OK     bool      `json:"ok"`
	Errors []string  `json:"errors"` // [] after a reload that worked
}

// configStatus is "config" in /admin/status.
type configStatus struct {
	Version    string      `json:"version,omitempty"`
	LoadedAt   time.Time   `json:"loaded_at"`
	LastReload *lastReload `json:"last_reload"`
}

func (r *reloads) start(version string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.version, r.loadedAt = version, at.UTC()
}

func (r *reloads) done(at time.Time, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.version, r.loadedAt = version, at.UTC()
	r.last = &lastReload{At: at.UTC(), OK: true, Errors: []string{}}
}

func (r *reloads) failed(at time.Time, problems []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = &lastReload{At: at.UTC(), Errors: problems}
}

func (r *reloads) status() *configStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &configStatus{Version: r.version, LoadedAt: r.loadedAt, LastReload: r.last}
}
