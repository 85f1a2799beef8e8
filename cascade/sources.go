package cascade

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/telemetry"
)

// shareSource is where an answer came from as afloat_source_share tells it: the envelope's
// source, with a model's answer split by whether it is degraded (telemetry.ShareSources, in
// the same order).
type shareSource int

const (
	shareModel         shareSource = iota // tier 0's whole answer
	shareModelDegraded                    // a lower tier's answer, or a stream cut part way
	shareCache
	shareHeuristic
	shareUnavailable
	shareHuman
	numShareSources
)

// sourceOf classifies an answer. A source this build does not know reads as unavailable.
func sourceOf(src afloat.Source, degraded bool) shareSource {
	switch src {
	case afloat.SourceModel:
		if degraded {
			return shareModelDegraded
		}
		return shareModel
	case afloat.SourceCache:
		return shareCache
	case afloat.SourceHeuristic:
		return shareHeuristic
	case afloat.SourceHuman:
		return shareHuman
	}
	return shareUnavailable
}

// sourceGauges are the afloat_source_share series of one task or route, by shareSource.
type sourceGauges [numShareSources]prometheus.Gauge

func (e *Engine) sourceGauges(scope string) sourceGauges {
	var g sourceGauges
	for i, name := range telemetry.ShareSources() {
		g[i] = e.metrics.SourceShare.WithLabelValues(scope, name)
	}
	return g
}

// set sets each source's share.
func (g *sourceGauges) set(shares [numShareSources]float64) {
	for i, s := range shares {
		g[i].Set(s)
	}
}

// sourcesLocked returns each source's share of the answers in the window, 0 each when there
// were none. s.mu must be held.
func (s *shareWindow) sourcesLocked() [numShareSources]float64 {
	var n [numShareSources]int
	t := 0
	for i := range s.total {
		t += s.total[i]
		for src, c := range s.sources[i] {
			n[src] += c
		}
	}
	var out [numShareSources]float64
	if t == 0 {
		return out
	}
	for src, c := range n {
		out[src] = float64(c) / float64(t)
	}
	return out
}
