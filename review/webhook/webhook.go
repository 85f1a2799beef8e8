package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/review"
)

// Defaults of Config.
const (
	DefaultInterval   = time.Second
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 5 * time.Minute
	DefaultAttempts   = 10
	DefaultTimeout    = 10 * time.Second
)

// batch is how many due deliveries one poll reads at a time.
const batch = 100

// recordTimeout bounds the commit of an attempt's outcome, which is made even while Close
// waits: the POST was made.
const recordTimeout = 5 * time.Second

// Config configures a Sender. The zero values of the optional fields are the defaults above.
type Config struct {
	// Store is the review store whose outbox the Sender works; required. It must keep an
	// outbox (review.Options.Outbox), or nothing is ever due.
	Store review.Store
	// URL receives the POSTs; required, http or https. It never reaches a log line (it
	// often holds a token).
	URL string
	// Secret signs each body (X-Afloat-Signature); "" sends it unsigned.
	Secret afloat.Secret
	// HTTPClient makes the POSTs. nil means a client that follows no redirect, each attempt
	// cut after Timeout.
	HTTPClient *http.Client
	// Timeout bounds each attempt. 0 means 10s.
	Timeout time.Duration
	// Interval is how often the store is polled for due deliveries. 0 means 1s.
	Interval time.Duration
	// Backoff is the wait after a first failed attempt, doubled after each next one up to
	// MaxBackoff, each wait jittered to [0.5, 1.5) of itself. 0 means 1s; MaxBackoff 0 means
	// 5m.
	Backoff, MaxBackoff time.Duration
	// Attempts is the most POSTs of one delivery: after as many failures it is failed. 0
	// means 10.
	Attempts int
	// Rand returns the random numbers in [0, 1) of the jitter. nil means math/rand/v2's.
	Rand func() float64
	// Clock drives the polls, the attempts' times and the backoff. nil means real time.
	Clock clockwork.Clock
	// Logger receives the failed deliveries (warn) and the store's errors. nil discards.
	Logger *slog.Logger
}

// Sender delivers the review answers of a store's outbox to a URL. Start runs its worker,
// Close stops it. It is safe for concurrent use.
type Sender struct {
	cfg    Config
	client *http.Client
	wake   chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup
}

// New checks cfg and returns a Sender that does nothing until Start.
func New(cfg Config) (*Sender, error) {
	if cfg.Store == nil {
		return nil, errors.New("webhook: a store is required")
	}
	if u, err := url.Parse(cfg.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("webhook: the url is not an absolute http or https url")
	}
	if cfg.Timeout < 0 || cfg.Interval < 0 || cfg.Backoff < 0 || cfg.MaxBackoff < 0 || cfg.Attempts < 0 {
		return nil, errors.New("webhook: negative timeout, interval, backoff or attempts")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sender{cfg: cfg, client: cfg.HTTPClient, wake: make(chan struct{}, 1)}
	if s.client == nil {
		s.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Start runs the worker: it delivers what is due at once, then polls every Interval, or
// sooner when woken. A second Start does nothing.
func (s *Sender) Start() {
	if s == nil {
		return
	}
	s.once.Do(func() { s.wg.Go(s.run) })
}

// Wake makes the worker poll now rather than at the end of its Interval: an answer just
// committed is delivered at once. It never blocks; a nil Sender does nothing.
func (s *Sender) Wake() {
	if s == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops the worker and waits for it: an attempt in flight is cut, and made again
// after a restart (delivery is at least once). It is safe to call on a nil Sender, before
// Start, and more than once.
func (s *Sender) Close() {
	if s == nil {
		return
	}
	s.once.Do(func() {}) // a Start after Close runs nothing
	s.cancel()
	s.wg.Wait()
}

func (s *Sender) run() {
	for {
		s.poll()
		t := s.cfg.Clock.NewTimer(s.cfg.Interval)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.Chan():
		}
		t.Stop()
	}
}

// poll delivers the deliveries due now, a batch at a time, until none is left or an
// outcome could not be recorded (the store fails: the next poll tries again).
func (s *Sender) poll() {
	for s.ctx.Err() == nil {
		due, err := s.cfg.Store.DueDeliveries(s.ctx, s.cfg.Clock.Now(), batch)
		if err != nil {
			if s.ctx.Err() == nil {
				s.cfg.Logger.Warn("review webhook: reading the due deliveries", "err", err)
			}
			return
		}
		for _, it := range due {
			if !s.deliver(it) {
				return
			}
		}
		if len(due) < batch {
			return
		}
	}
}

// deliver makes one attempt of it's delivery and records its outcome; it reports whether
// the outcome was recorded.
func (s *Sender) deliver(it *review.Item) bool {
	n := it.Delivery.Attempts + 1
	body, err := payloadOf(it, n)
	if err != nil { // a stored result that is not JSON: no attempt can succeed
		return s.record(it, review.Delivery{State: review.DeliveryFailed, Attempts: it.Delivery.Attempts,
			LastAttempt: it.Delivery.LastAttempt, LastStatus: it.Delivery.LastStatus, LastError: "encoding: " + err.Error()})
	}
	at := s.cfg.Clock.Now()
	status, err := s.post(it.ID, body, at)
	if err != nil && s.ctx.Err() != nil {
		return false // cut by Close: no outcome to record
	}
	d := review.Delivery{State: review.DeliveryPending, Attempts: n, LastAttempt: at, LastStatus: status}
	switch {
	case err != nil:
		d.LastError = err.Error()
	case status/100 != 2:
		d.LastError = http.StatusText(status)
		if d.LastError == "" {
			d.LastError = fmt.Sprintf("status %d", status)
		}
	}
	retry := err != nil || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
	switch {
	case err == nil && status/100 == 2:
		d.State = review.DeliveryDelivered
	case retry && n < s.cfg.Attempts:
		d.NextAt = at.Add(s.wait(n))
	default:
		d.State = review.DeliveryFailed
		s.cfg.Logger.Warn("review webhook failed", "review", it.ID, "task", it.Task, "attempts", n, "status", status, "err", d.LastError)
	}
	return s.record(it, d)
}

func (s *Sender) record(it *review.Item, d review.Delivery) bool {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	err := s.cfg.Store.RecordDelivery(ctx, it.ID, d)
	switch {
	case errors.Is(err, review.ErrNotFound): // purged meanwhile: nothing left to deliver
		return true
	case err != nil:
		s.cfg.Logger.Warn("review webhook: recording a delivery attempt", "review", it.ID, "err", err)
		return false
	}
	return true
}

// wait is the backoff after the n-th failed attempt: Backoff doubled for each attempt
// before it, capped at MaxBackoff, jittered to [0.5, 1.5) of itself.
func (s *Sender) wait(n int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxBackoff)
	return time.Duration(float64(d) * (0.5 + s.cfg.Rand()))
}

// post makes one attempt, signed at at, and returns the answer's status. Its error never
// holds the URL.
func (s *Sender) post(id string, body []byte, at time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("invalid webhook request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "afloat-review")
	req.Header.Set(alerts.DeliveryHeader, id)
	if s.cfg.Secret != "" {
		req.Header.Set(alerts.SignatureHeader, alerts.Sign(s.cfg.Secret.Reveal(), at, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL often holds the receiver's token
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
