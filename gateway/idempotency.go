package gateway

import (
	"container/list"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// idempotency remembers the answer to each (tenant, endpoint, Idempotency-Key), so that a
// retried call gets the first answer instead of running, or queueing, twice. A call that
// arrives while the first with its key is still running waits for it. Entries live for ttl,
// at most max of them (the oldest go first). Safe for concurrent use.
type idempotency struct {
	clock clockwork.Clock
	ttl   time.Duration
	max   int
	mu    sync.Mutex
	m     map[string]*list.Element
	order *list.List // of *idemEntry, oldest first
}

type idemEntry struct {
	key     string
	body    [32]byte // hash of the request body's canonical form: the same key with another body is refused
	at      time.Time
	done    chan struct{}
	status  int
	header  http.Header
	payload []byte
}

func newIdempotency(clock clockwork.Clock, ttl time.Duration, max int) *idempotency {
	return &idempotency{clock: clock, ttl: ttl, max: max, m: map[string]*list.Element{}, order: list.New()}
}

// begin looks key up. When it is new, begin reserves it and returns (entry, true): the caller
// runs the call and must finish the entry, in a deferred call (an entry never finished holds
// its key, and every retry with it waits until its own context ends). Otherwise it returns
// the existing entry, whose done channel closes once its answer is known. A nil entry with
// false means the key was used with another body: sum is the body's hash (taskRequest.sum).
func (c *idempotency) begin(key string, sum [32]byte) (*idemEntry, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.order.Len() > 0 {
		oldest := c.order.Front().Value.(*idemEntry)
		if now.Sub(oldest.at) < c.ttl && c.order.Len() < c.max {
			break
		}
		c.order.Remove(c.order.Front())
		delete(c.m, oldest.key)
	}
	if el, ok := c.m[key]; ok {
		e := el.Value.(*idemEntry)
		if e.body != sum {
			return nil, false
		}
		return e, false
	}
	e := &idemEntry{key: key, body: sum, at: now, done: make(chan struct{})}
	c.m[key] = c.order.PushBack(e)
	return e, true
}

// finish records the answer of a reserved entry. An answer that is not final (status 0 when
// the client left, any 5xx) drops the entry, so that a retry runs again; waiters then get
// that answer once.
func (c *idempotency) finish(e *idemEntry, status int, header http.Header, payload []byte) {
	c.mu.Lock()
	if status == 0 || status >= 500 {
		if el, ok := c.m[e.key]; ok && el.Value == e {
			c.order.Remove(el)
			delete(c.m, e.key)
		}
	}
	e.status, e.header, e.payload = status, header, payload
	c.mu.Unlock()
	close(e.done)
}

// recorder captures a response to store it.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, b...)
	return len(b), nil
}
