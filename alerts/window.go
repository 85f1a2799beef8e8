package alerts

import "time"

// history keeps the totals read at each evaluation for as long as the longest window, so
// that their increase over any window up to that can be taken. It is not safe for concurrent
// use: the evaluator holds its evaluation lock around it.
type history[K comparable] struct {
	samples []sample[K]
}

type sample[K comparable] struct {
	at     time.Time
	counts map[K]Count
}

// add records the totals read at, and forgets the samples older than keep before at.
func (h *history[K]) add(at time.Time, counts map[K]Count, keep time.Duration) {
	h.samples = append(h.samples, sample[K]{at: at, counts: counts})
	cut := 0
	for cut < len(h.samples)-1 && h.samples[cut].at.Before(at.Add(-keep)) {
		cut++
	}
	if cut > 0 {
		h.samples = append(h.samples[:0], h.samples[cut:]...)
	}
}

// increase returns, by key, how much each total grew between the oldest sample within window
// before the newest one and the newest: what happened in the last window (less, while the
// samples do not reach that far back). A key the base sample lacks counts from 0.
func (h *history[K]) increase(window time.Duration) map[K]Count {
	if len(h.samples) == 0 {
		return nil
	}
	last := h.samples[len(h.samples)-1]
	base := last
	for _, s := range h.samples {
		if !s.at.Before(last.at.Add(-window)) {
			base = s
			break
		}
	}
	out := make(map[K]Count, len(last.counts))
	for k, c := range last.counts {
		b := base.counts[k]
		// Totals only grow; one that fell (a series recreated) counts from its new start.
		if c.All < b.All || c.Hits < b.Hits {
			b = Count{}
		}
		out[k] = Count{All: c.All - b.All, Hits: c.Hits - b.Hits}
	}
	return out
}
