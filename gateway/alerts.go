package gateway

import "github.com/afloat-dev/afloat/alerts"

// Alerts is what /admin/status reads of the alert evaluator; *alerts.Evaluator is one.
type Alerts interface {
	// Firing returns the alerts firing now, each with its webhook delivery, nil when none
	// fires. It must be cheap and safe to call from any goroutine.
	Firing() []alerts.State
}

// firingAlerts returns the alerts /admin/status lists: never nil, so that the document
// always holds a list.
func (g *Gateway) firingAlerts() []alerts.State {
	var out []alerts.State
	if g.cfg.Alerts != nil {
		out = g.cfg.Alerts.Firing()
	}
	if out == nil {
		out = []alerts.State{}
	}
	return out
}
