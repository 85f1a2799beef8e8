package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
	"github.com/afloat-dev/afloat/review"
)

// reloader re-reads serve's config file and puts it in force without a restart: the
// gateway's Reloader (POST /admin/reload), also run on SIGHUP. It is safe for concurrent use.
type reloader struct {
	path string // the config file
	addr string // the address served, which open access must stay off unless it is loopback
	gw   *gateway.Gateway

	mu sync.Mutex
	rt *config.Runtime // in force
}

// reload builds the file over the runtime in force and swaps it into the gateway.
func (r *reloader) reload(context.Context) (*gateway.Reload, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, diff, err := r.rt.Reload(r.path, func(next *config.Runtime) error {
		if len(next.File.Tenants) == 0 && !loopback(r.addr) {
			return fmt.Errorf("tenants: the file has none, and the gateway listens on %s: open access is served on loopback only", r.addr)
		}
		return r.gw.Swap(servedConfig(next))
	})
	if err != nil {
		return nil, err
	}
	r.rt = next
	res := &gateway.Reload{Version: diff.To, Previous: diff.From, Changes: []gateway.ReloadChange{}}
	for _, c := range diff.Changes {
		res.Changes = append(res.Changes, gateway.ReloadChange{Path: c.Path, Kind: string(c.Kind), Detail: c.Detail})
	}
	return res, nil
}

// close closes the runtime in force, once the gateway serves no more calls.
func (r *reloader) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rt.Close()
}

// servedConfig is what the gateway serves by name from rt, and to whom: New starts with it,
// and a reload swaps it in (gateway.Swap).
func servedConfig(rt *config.Runtime) gateway.Config {
	tenants := map[string][]string{}
	for _, t := range rt.File.Tenants {
		tenants[t.Name] = t.Keys
	}
	return gateway.Config{
		Engine: rt.Engine, Tasks: rt.Tasks, Routes: rt.Routes, Models: rt.Models, DefaultRoute: rt.File.Server.DefaultRoute,
		Faults: rt.Faults, FlagDefaults: rt.FlagDefaults, Tenants: tenants, Version: rt.File.Version(),
	}
}

// gatewayConfig is the gateway's whole config over rt: servedConfig, and what takes a
// restart to change.
func gatewayConfig(rt *config.Runtime, log *slog.Logger, reload gateway.Reloader) gateway.Config {
	f := rt.File
	operators := map[string]string{}
	for _, o := range f.Operators {
		operators[o.Name] = o.Token
	}
	webhook := rt.Webhook // every runtime a reload builds shares it
	cfg := servedConfig(rt)
	cfg.Flags, cfg.State, cfg.StateRequired = rt.State, rt.State, f.State.OnFailure == "fail"
	cfg.DrillMaxAge, cfg.Alerts = f.Drill.MaxAge, rt.Alerts
	cfg.Review, cfg.ReviewAnswered = rt.Review, func(*review.Item) { webhook.Wake() }
	cfg.Operators, cfg.AdminToken, cfg.MaxBody = operators, f.Server.AdminToken, int64(f.Server.MaxBody)
	cfg.Gatherer, cfg.Logger, cfg.AccessLog, cfg.Reload = rt.Registry, log, f.Server.AccessLog, reload
	return cfg
}

// watchHangup reloads the config on every SIGHUP until the returned stop is called (more
// than once is fine). A reload's outcome is logged and shown in /admin/status, as POST
// /admin/reload's is.
func watchHangup(gw *gateway.Gateway, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-hup:
				log.Info("SIGHUP: reloading the config")
				_, _ = gw.Reload(context.Background()) // logged by the gateway
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(hup)
			close(done)
			<-finished
		})
	}
}
