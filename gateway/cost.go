package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// The cost of a chat answer, from its provider's price: CostHeader holds the amount as a
// decimal number ("0.00014"; "0" when the provider has no price), CurrencyHeader the price's
// currency ("USD"; absent when the price names none). A streamed answer sends them as HTTP
// trailers, since its headers leave before its usage is known.
const (
	CostHeader     = "X-Afloat-Cost"
	CurrencyHeader = "X-Afloat-Currency"
)

// setCost sets the cost headers of an answer whose usage is u.
func setCost(h http.Header, u afloat.Usage) {
	h.Set(CostHeader, formatCost(u.Cost))
	if u.Currency != "" {
		h.Set(CurrencyHeader, u.Currency)
	}
}

// formatCost writes a cost in plain decimals, rounded as the envelope's (afloat.RoundCost).
func formatCost(c float64) string {
	return strconv.FormatFloat(afloat.RoundCost(c), 'f', -1, 64)
}

// costTrailers declares the cost headers as trailers of a streamed answer; setCost after
// the body fills them in.
func costTrailers(h http.Header) { h.Set("Trailer", CostHeader+", "+CurrencyHeader) }

// costStatus is a task's or route's cost in /admin/status: over the last window, what every
// attempt that got an answer cost (total), the part of it that bought answers not used
// (wasted: contract violations, cut streams, hedges' losing attempts), and the calls a model answered.
type costStatus struct {
	Window   string  `json:"window"`
	Total    float64 `json:"total"`
	Wasted   float64 `json:"wasted"`
	Answers  int     `json:"answers"`
	Currency *string `json:"currency"`
}

func costOf(s cascade.Spend) costStatus {
	cs := costStatus{Window: shortDuration(s.Window), Total: s.Total, Wasted: s.Wasted, Answers: s.Answers}
	if s.Currency != "" {
		cs.Currency = &s.Currency
	}
	return cs
}

// shortDuration writes whole hours and minutes as "1h" and "5m", as a config would.
func shortDuration(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
