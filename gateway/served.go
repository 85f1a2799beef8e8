package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
)

// served is what the gateway serves by name: the engine, its tasks and routes, and the
// providers' fault injectors, and to whom: the tenants' keys. A handler reads it once
// (Gateway.served) and uses that copy to the end, so that a config reload, which replaces it
// whole (Gateway.Swap), never shows a call half of one config and half of another.
type served struct {
	engine *cascade.Engine
	tasks  map[string]*cascade.Task
	routes map[string]*cascade.Route
	faults map[string]*fault.Provider
	// models maps a route's alias, a model name a client may send, to the route's name.
	models map[string]string
	// defaultRoute answers a model that is neither a route nor an alias; "" for none.
	defaultRoute string
	// keys are the tenants' client keys; none means open access.
	keys []tenantKey
	// flagDefaults is the config's flag document: PUT /admin/flags fills what a document
	// omits from it.
	flagDefaults *flags.Document
}

// newServed builds the table of cfg, as New starts with it and Swap puts it in force: every
// field of Config that is served by name goes through here. flagDefaults nil takes the
// document cfg.Flags holds now.
func newServed(cfg Config) (*served, error) {
	s := &served{engine: cfg.Engine, tasks: cfg.Tasks, routes: cfg.Routes, faults: cfg.Faults,
		models: cfg.Models, defaultRoute: cfg.DefaultRoute, flagDefaults: cfg.FlagDefaults}
	if s.engine == nil {
		return nil, errors.New("gateway: engine is required")
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	for tenant, keys := range cfg.Tenants {
		for _, k := range keys {
			if k == "" {
				return nil, fmt.Errorf("gateway: tenant %q has an empty key", tenant)
			}
			if k == cfg.AdminToken {
				return nil, fmt.Errorf("gateway: a key of tenant %q is the admin token", tenant)
			}
			s.keys = append(s.keys, tenantKey{tenant: tenant, key: []byte(k)})
		}
	}
	if err := checkOperators(cfg); err != nil {
		return nil, err
	}
	if s.flagDefaults == nil && cfg.Flags != nil {
		if d, err := cfg.Flags.Flags(context.Background()); err == nil {
			s.flagDefaults = d
		}
	}
	return s, nil
}

// served returns the tasks and routes in force.
func (g *Gateway) served() *served { return g.table.Load() }

// known reports whether name is a task or a route.
func (s *served) known(name string) bool {
	_, task := s.tasks[name]
	_, route := s.routes[name]
	return task || route
}

// route resolves the model a client sent (chat's and messages' "model"): a route's name, else
// an alias of a route, else the default route. name is the route's name.
func (s *served) route(model string) (name string, r *cascade.Route, ok bool) {
	if r, ok := s.routes[model]; ok {
		return model, r, true
	}
	name, ok = s.models[model]
	if !ok {
		name = s.defaultRoute
	}
	r, ok = s.routes[name]
	return name, r, ok
}

// routeOf returns the name of the route that id, a route's name or an alias, names; "" when
// it names none (the default route aside).
func (s *served) routeOf(id string) string {
	if _, ok := s.routes[id]; ok {
		return id
	}
	return s.models[id]
}

// check reports an alias or default route that leads nowhere, and an alias that hides a
// route.
func (s *served) check() error {
	for alias, name := range s.models {
		if _, ok := s.routes[alias]; ok {
			return fmt.Errorf("model alias %q is a route's name", alias)
		}
		if _, ok := s.routes[name]; !ok {
			return fmt.Errorf("model alias %q names no route %q", alias, name)
		}
	}
	if _, ok := s.routes[s.defaultRoute]; s.defaultRoute != "" && !ok {
		return fmt.Errorf("default route %q is not a route", s.defaultRoute)
	}
	return nil
}
