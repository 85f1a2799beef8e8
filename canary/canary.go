package canary

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// ErrDecided is returned by Promote, Rollback, Pin and Unpin once the canary is promoted or
// rolled back: a decision is final.
var ErrDecided = errors.New("canary: already decided")

// auto is the By of a decision the canary made by itself.
const auto = "auto"

// Decision is what a canary decided: when, by whom ("auto" for the canary itself, or the
// operator's name passed to Promote or Rollback), the figures it was decided on and the
// reasons, one per figure compared (see the package comment).
type Decision struct {
	State     State // Promoted or RolledBack
	At        time.Time
	By        string
	Reasons   []string
	Incumbent Figures
	Candidate Figures
}

// clone returns a copy of d that shares no memory with it.
func (d Decision) clone() Decision {
	d.Reasons = slices.Clone(d.Reasons)
	return d
}

// Status is a canary's state and figures at one moment.
type Status struct {
	State     State
	Share     float64   // the candidate's share now: Config.Share, then 1 or 0 once decided
	Started   time.Time // when New was called
	DecideAt  time.Time // Started + Window: the earliest an automatic decision may come
	PinnedBy  string    // who pinned the canary, while Pinned; "" otherwise
	Incumbent Figures
	Candidate Figures
	Decision  *Decision // nil until decided
	// Waiting says what holds a decision back once DecideAt has passed: "incumbent has 12
	// of 100 calls", "pinned by alice", or both joined by "; ". It is "" before DecideAt,
	// after the decision, and when the canary is due: a Running canary past DecideAt with
	// Waiting "" is decided by the next Observe or Check.
	Waiting string
}

// Canary decides a canary release on one tier of a task: it picks the arm of each call,
// counts each arm's observations, and promotes the candidate or rolls it back once the
// window has passed and both arms have enough calls (see the package comment for the rule).
//
// A Canary is safe for concurrent use. Pick takes no lock; the other methods share one
// mutex, which is never held while the OnDecision callback runs.
type Canary struct {
	points   atomic.Int64 // the candidate's share in buckets: Pick sends it the keys below
	decided  atomic.Bool  // promoted or rolled back: Decided reads it without the lock
	seed     uint64       // the hash state after the salt
	clock    clockwork.Clock
	window   time.Duration
	minCalls int
	limits   Thresholds
	started  time.Time

	mu         sync.Mutex
	state      State
	share      float64
	pinnedBy   string
	arms       [2]tally // by Arm
	decision   *Decision
	onDecision func(Decision)
}

// New returns a Running canary whose window starts now, or an error naming every invalid
// field of cfg.
func New(cfg Config) (*Canary, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	c := &Canary{
		seed:     seed(s.salt),
		clock:    s.clock,
		window:   s.window,
		minCalls: s.minCalls,
		limits:   s.limits,
		started:  s.clock.Now(),
		state:    Running,
		share:    cfg.Share,
	}
	for i := range c.arms {
		if c.arms[i], err = newTally(); err != nil {
			return nil, err
		}
	}
	c.points.Store(s.points)
	return c, nil
}

// Pick returns the arm of a call whose stable key is key: the tenant's id, so that a tenant
// sees one arm throughout, or the request's id. The key is hashed into one of 10,000
// buckets and goes to the candidate when its bucket is below Share × 10,000: so a key always
// gets the same arm at a given share, and a larger share keeps every key a smaller one sent
// to the candidate. A promoted canary always picks the Candidate, a rolled-back one the
// Incumbent. Pick takes no lock and does not allocate.
func (c *Canary) Pick(key string) Arm {
	if bucket(c.seed, key) < uint64(c.points.Load()) {
		return Candidate
	}
	return Incumbent
}

// RolledBack reports whether the canary was rolled back: its candidate takes no call any
// more, and what it answered is not to be served again. It takes no lock.
func (c *Canary) RolledBack() bool { return c.points.Load() == 0 }

// Observe records o as an observation of arm (any other value than Incumbent or Candidate is
// ignored), and then, if the canary is Running, its window has passed and both arms have
// MinCalls observations, decides by the rule of the package comment, with By "auto", and
// calls the OnDecision callback. Observations after the decision still count in Status's
// figures, but decide nothing.
func (c *Canary) Observe(arm Arm, o Observation) {
	if arm != Incumbent && arm != Candidate {
		return
	}
	d, fn := c.observe(arm, o)
	if d != nil && fn != nil {
		fn(d.clone())
	}
}

func (c *Canary) observe(arm Arm, o Observation) (*Decision, func(Decision)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arms[arm].add(o)
	return c.decideIfDueLocked(), c.onDecision
}

// Check decides now if the canary is due, by the same rule as Observe, so that a ticker or
// a status request decides a canary whose traffic stopped. It returns the decision made now
// (after the OnDecision callback returned), or nil when there was none.
func (c *Canary) Check() *Decision {
	d, fn := c.check()
	if d == nil {
		return nil
	}
	if fn != nil {
		fn(d.clone())
	}
	out := d.clone()
	return &out
}

func (c *Canary) check() (*Decision, func(Decision)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decideIfDueLocked(), c.onDecision
}

// decideIfDueLocked makes the automatic decision if the canary is due, and returns it, or
// nil. c.mu must be held.
func (c *Canary) decideIfDueLocked() *Decision {
	if c.state != Running || c.arms[Incumbent].calls < c.minCalls || c.arms[Candidate].calls < c.minCalls {
		return nil
	}
	now := c.clock.Now()
	if now.Before(c.started.Add(c.window)) {
		return nil
	}
	inc, cand := c.arms[Incumbent].figures(), c.arms[Candidate].figures()
	rollback, reasons := judge(inc, cand, c.limits)
	to := Promoted
	if rollback {
		to = RolledBack
	}
	return c.settleLocked(to, now, auto, reasons, inc, cand)
}

// settleLocked moves the canary to the final state to and records the decision. c.mu must
// be held.
func (c *Canary) settleLocked(to State, at time.Time, by string, reasons []string, inc, cand Figures) *Decision {
	c.state, c.pinnedBy = to, ""
	c.decided.Store(true)
	if to == Promoted {
		c.share = 1
		c.points.Store(buckets)
	} else {
		c.share = 0
		c.points.Store(0)
	}
	c.decision = &Decision{State: to, At: at, By: by, Reasons: reasons, Incumbent: inc, Candidate: cand}
	return c.decision
}

// Restore puts in force a decision taken before: by this process before it restarted, or by
// another replica of a fleet. The canary takes d's state (and so its share), at d's time,
// by d's decider, with d's reasons, as if it had decided so itself, but calls no OnDecision:
// the decision was announced where it was taken. A canary decided here otherwise takes d
// all the same (the decision a fleet kept first stands); one decided as d already returns
// ErrDecided. It returns an error for a d that is no decision.
func (c *Canary) Restore(d Decision) error {
	if !d.State.decided() {
		return fmt.Errorf("canary: %q is no decision to restore", d.State)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == d.State {
		return ErrDecided
	}
	inc, cand := d.Incumbent, d.Candidate
	if inc == (Figures{}) && cand == (Figures{}) {
		inc, cand = c.arms[Incumbent].figures(), c.arms[Candidate].figures()
	}
	c.settleLocked(d.State, d.At, d.By, slices.Clone(d.Reasons), inc, cand)
	return nil
}

// Decided reports whether the canary was promoted or rolled back. It takes no lock.
func (c *Canary) Decided() bool { return c.decided.Load() }

// Status returns the canary's state and figures now. It decides nothing: call Check first
// for a view in which a due canary is decided.
func (c *Canary) Status() Status {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{
		State:     c.state,
		Share:     c.share,
		Started:   c.started,
		DecideAt:  c.started.Add(c.window),
		PinnedBy:  c.pinnedBy,
		Incumbent: c.arms[Incumbent].figures(),
		Candidate: c.arms[Candidate].figures(),
	}
	if c.decision != nil {
		d := c.decision.clone()
		s.Decision = &d
		return s
	}
	if now.Before(s.DecideAt) {
		return s
	}
	var waits []string
	if c.state == Pinned {
		waits = append(waits, "pinned by "+c.pinnedBy)
	}
	for _, a := range []Arm{Incumbent, Candidate} {
		if n := c.arms[a].calls; n < c.minCalls {
			waits = append(waits, a.String()+" has "+strconv.Itoa(n)+" of "+strconv.Itoa(c.minCalls)+" calls")
		}
	}
	s.Waiting = strings.Join(waits, "; ")
	return s
}

// Promote is an operator's decision, by the name given, to send every call to the
// candidate, whatever its figures; the Decision records them and the reasons the automatic
// rule would give. It is allowed while Running or Pinned, and returns ErrDecided after a
// decision. The OnDecision callback is called before Promote returns.
func (c *Canary) Promote(by string) (Decision, error) { return c.decideByHand(Promoted, by) }

// Rollback is an operator's decision, by the name given, to send every call to the
// incumbent, as Promote is to send them to the candidate.
func (c *Canary) Rollback(by string) (Decision, error) { return c.decideByHand(RolledBack, by) }

func (c *Canary) decideByHand(to State, by string) (Decision, error) {
	d, fn, err := c.settleByHand(to, by)
	if err != nil {
		return Decision{}, err
	}
	if fn != nil {
		fn(d.clone())
	}
	return d.clone(), nil
}

func (c *Canary) settleByHand(to State, by string) (*Decision, func(Decision), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.decided() {
		return nil, nil, ErrDecided
	}
	inc, cand := c.arms[Incumbent].figures(), c.arms[Candidate].figures()
	rollback, reasons := judge(inc, cand, c.limits)
	rule := Promoted
	if rollback {
		rule = RolledBack
	}
	verdict := fmt.Sprintf("by hand: the figures so far would have %s", verbOf(rule))
	if rule != to {
		verdict = fmt.Sprintf("by hand, overriding the figures so far, which would have %s", verbOf(rule))
	}
	reasons = append([]string{verdict}, reasons...)
	return c.settleLocked(to, c.clock.Now(), by, reasons, inc, cand), c.onDecision, nil
}

// verbOf is a decision as a reason's line says it was, or would have been, made.
func verbOf(s State) string {
	if s == RolledBack {
		return "rolled it back"
	}
	return "promoted it"
}

// Pin freezes a Running canary, by the name given: it keeps its share but decides nothing
// by itself until Unpin. Pinning a Pinned canary changes nothing. It returns ErrDecided
// after a decision.
func (c *Canary) Pin(by string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.state.decided():
		return ErrDecided
	case c.state == Running:
		c.state, c.pinnedBy = Pinned, by
	}
	return nil
}

// Unpin lets a Pinned canary decide by itself again, on the window counted from its start:
// if that has passed, the next Observe or Check may decide. by names who unpinned it, for
// the caller's own log; the canary keeps no record of it. Unpinning a Running canary changes
// nothing. It returns ErrDecided after a decision.
func (c *Canary) Unpin(by string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.state.decided():
		return ErrDecided
	case c.state == Pinned:
		c.state, c.pinnedBy = Running, ""
	}
	return nil
}

// OnDecision registers fn to be called once with the decision, automatic or by hand, after
// it is made, never while the canary's lock is held (fn may call the canary's methods), on
// the goroutine that made it. A decision calls the fn registered when it was made; nil
// removes it.
func (c *Canary) OnDecision(fn func(Decision)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onDecision = fn
}

// FNV-1a, 64 bits.
const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

// seed returns the FNV-1a state after salt and a separating zero byte, or the FNV offset
// for no salt.
func seed(salt string) uint64 {
	h := uint64(offset64)
	if salt == "" {
		return h
	}
	for i := 0; i < len(salt); i++ {
		h = (h ^ uint64(salt[i])) * prime64
	}
	return h * prime64 // the zero byte: h ^ 0 == h
}

// bucket hashes key from seed into [0, buckets). FNV-1a's low bits mix poorly for keys
// that differ in their last characters (tenant-1, tenant-2, …), so the hash is finalized
// by murmur3's fmix64 and reduced by its high bits.
func bucket(seed uint64, key string) uint64 {
	h := seed
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	hi, _ := bits.Mul64(h, buckets)
	return hi
}
