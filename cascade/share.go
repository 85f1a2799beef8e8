package cascade

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// shareWindow is the share of degraded answers over the last minute, in twelve buckets of
// five seconds, and each source's share over the same buckets. Safe for concurrent use.
type shareWindow struct {
	clock    clockwork.Clock
	mu       sync.Mutex
	start    time.Time
	head     int
	total    [12]int
	degraded [12]int
	sources  [12][numShareSources]int
}

const shareBucket = 5 * time.Second

func newShareWindow(clock clockwork.Clock) *shareWindow {
	return &shareWindow{clock: clock, start: clock.Now()}
}

func (s *shareWindow) advance(now time.Time) {
	steps := int(now.Sub(s.start) / shareBucket)
	if steps <= 0 {
		return
	}
	if steps > len(s.total) {
		steps = len(s.total)
		s.start = now
	} else {
		s.start = s.start.Add(time.Duration(steps) * shareBucket)
	}
	for range steps {
		s.head = (s.head + 1) % len(s.total)
		s.total[s.head], s.degraded[s.head], s.sources[s.head] = 0, 0, [numShareSources]int{}
	}
}

// record counts one answer from src and returns the shares now: the degraded share and each
// source's.
func (s *shareWindow) record(degraded bool, src shareSource) (float64, [numShareSources]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.clock.Now())
	s.total[s.head]++
	if degraded {
		s.degraded[s.head]++
	}
	s.sources[s.head][src]++
	return s.shareLocked(), s.sourcesLocked()
}

// share returns the share of degraded answers in the window, 0 when there were none.
func (s *shareWindow) share() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.clock.Now())
	return s.shareLocked()
}

// history returns the degraded share of each bucket of the window, oldest first; -1 for a
// bucket without answers.
func (s *shareWindow) history() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.clock.Now())
	out := make([]float64, 0, len(s.total))
	for i := 1; i <= len(s.total); i++ {
		b := (s.head + i) % len(s.total)
		if s.total[b] == 0 {
			out = append(out, -1)
			continue
		}
		out = append(out, float64(s.degraded[b])/float64(s.total[b]))
	}
	return out
}

func (s *shareWindow) shareLocked() float64 {
	var t, d int
	for i := range s.total {
		t += s.total[i]
		d += s.degraded[i]
	}
	if t == 0 {
		return 0
	}
	return float64(d) / float64(t)
}
