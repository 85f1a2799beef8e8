package gateway

import (
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/provider/fault"
)

// served is what the gateway serves by name: the engine, its tasks and routes, and the
// providers' fault injectors. A handler reads it once (Gateway.served) and uses that copy to
// the end, so that a config reload, which replaces it whole, never shows a call half of one
// config and half of another.
type served struct {
	engine *cascade.Engine
	tasks  map[string]*cascade.Task
	routes map[string]*cascade.Route
	faults map[string]*fault.Provider
}

// served returns the tasks and routes in force.
func (g *Gateway) served() *served { return g.table.Load() }

// known reports whether name is a task or a route.
func (s *served) known(name string) bool {
	_, task := s.tasks[name]
	_, route := s.routes[name]
	return task || route
}
