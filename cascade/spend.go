package cascade

import (
	"sync"
	"time"

	"github.com/afloat-dev/afloat"
)

// SpendWindow is how far back Task.Spend and Route.Spend look.
const SpendWindow = time.Hour

// spendBuckets cut SpendWindow into five-minute buckets: the memory of a task's spend is
// fixed, whatever its traffic.
const spendBuckets = 12

// Spend is what the calls of a task or route cost over the last Window, from the price of
// each provider (ProviderConfig.Price) and the tokens it reported.
type Spend struct {
	Window time.Duration
	// Total is the cost of every attempt that got an answer, used or not, and of a hedge's
	// ask cancelled because the other ended the call first (its prompt, estimated): the sum of
	// afloat_cost_total over the task's providers.
	Total float64
	// Wasted is the part of Total that bought answers that were not used (a contract
	// violation, a stream cut before its end, a hedge's loser): afloat_wasted_cost_total.
	Wasted float64
	// Answers counts the calls a model answered.
	Answers int
	// Currency is the tiers' price currency: "" when none is priced, afloat.MixedCurrency
	// when they differ (Total then means little: read the per-provider metrics).
	Currency string
}

// spendWindow sums one task's or route's spend over SpendWindow. Safe for concurrent use.
type spendWindow struct {
	mu       sync.Mutex
	start    time.Time // the start of the head bucket; zero before the first record
	head     int
	total    [spendBuckets]float64
	wasted   [spendBuckets]float64
	answers  [spendBuckets]int
	currency string
}

const spendBucket = SpendWindow / spendBuckets

func (s *spendWindow) advance(now time.Time) {
	if s.start.IsZero() {
		s.start = now
		return
	}
	steps := int(now.Sub(s.start) / spendBucket)
	if steps <= 0 {
		return
	}
	if steps > spendBuckets {
		steps, s.start = spendBuckets, now
	} else {
		s.start = s.start.Add(time.Duration(steps) * spendBucket)
	}
	for range steps {
		s.head = (s.head + 1) % spendBuckets
		s.total[s.head], s.wasted[s.head], s.answers[s.head] = 0, 0, 0
	}
}

// record counts one attempt: what its answer cost, and whether the answer was used.
func (s *spendWindow) record(now time.Time, cost float64, used bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now)
	s.total[s.head] += cost
	if used {
		s.answers[s.head]++
	} else {
		s.wasted[s.head] += cost
	}
}

// unused counts the cost of an answer recorded as used that was not, after all (a hedge's
// loser that answered too), as wasted, as afloat_wasted_cost_total counts it. The answer
// still counts: a model did answer.
func (s *spendWindow) unused(now time.Time, cost float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now)
	s.wasted[s.head] += cost
}

func (s *spendWindow) snapshot(now time.Time) Spend {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now)
	sp := Spend{Window: SpendWindow, Currency: s.currency}
	for i := range spendBuckets {
		sp.Total += s.total[i]
		sp.Wasted += s.wasted[i]
		sp.Answers += s.answers[i]
	}
	return sp
}

// spendBook holds the spend windows of an engine's tasks and routes, by name. The zero
// value is ready; it is safe for concurrent use.
type spendBook struct {
	mu      sync.Mutex
	windows map[string]*spendWindow
}

// of returns scope's window, made on first use, and folds currency (a tier's price
// currency) into the window's as afloat.Usage.Add does.
func (b *spendBook) of(scope, currency string) *spendWindow {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.windows == nil {
		b.windows = map[string]*spendWindow{}
	}
	w := b.windows[scope]
	if w == nil {
		w = &spendWindow{}
		b.windows[scope] = w
	}
	w.mu.Lock()
	w.currency = afloat.Usage{Currency: w.currency}.Add(afloat.Usage{Currency: currency}).Currency
	w.mu.Unlock()
	return w
}

// adopt takes from's window of scope when b has none yet: a reloaded task keeps its spend.
func (b *spendBook) adopt(scope string, from *spendBook) {
	from.mu.Lock()
	w := from.windows[scope]
	from.mu.Unlock()
	if w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.windows == nil {
		b.windows = map[string]*spendWindow{}
	}
	if b.windows[scope] == nil {
		b.windows[scope] = w
	}
}

func (b *spendBook) snapshot(scope string, now time.Time) Spend {
	b.mu.Lock()
	w := b.windows[scope]
	b.mu.Unlock()
	if w == nil {
		return Spend{Window: SpendWindow}
	}
	return w.snapshot(now)
}

// Spend returns what the task's calls cost over the last SpendWindow.
func (t *Task) Spend() Spend { return t.e.spends.snapshot(t.name, t.e.clock.Now()) }

// Spend returns what the route's calls cost over the last SpendWindow.
func (r *Route) Spend() Spend { return r.e.spends.snapshot(r.name, r.e.clock.Now()) }

// charsPerToken is the rule of thumb that estimates the tokens of a text whose count the
// provider never sent.
const charsPerToken = 4

// estimateUsage guesses the tokens of an answer cut before the provider reported its usage
// (a stream cut after its first chunk, or a hedge's ask cancelled with nothing yet, resp
// nil): the provider bills them all the same. It counts charsPerToken characters a token in
// the request's messages and in what arrived.
func estimateUsage(req *afloat.Request, resp *afloat.Response) afloat.Usage {
	in := 0
	for _, m := range req.Messages {
		in += len([]rune(m.Content))
	}
	out := 0
	if resp != nil {
		out = len([]rune(resp.Content))
		for _, c := range resp.ToolCalls {
			out += len([]rune(c.Name)) + len([]rune(string(c.Arguments)))
		}
	}
	return afloat.Usage{InputTokens: (in + charsPerToken - 1) / charsPerToken, OutputTokens: (out + charsPerToken - 1) / charsPerToken}
}
