package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
)

// Webhook headers.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>", the HMAC keyed with
	// the rule's secret over "<t>.<body>": a receiver recomputes it, compares in constant
	// time, and refuses a t too far from its own clock (a replay). Each attempt is signed
	// anew, at its own time.
	SignatureHeader = "X-Afloat-Signature"
	// DeliveryHeader identifies the notification, the same on each of its attempts, so that
	// a receiver that saw one attempt succeed can drop a retry of it.
	DeliveryHeader = "X-Afloat-Delivery"
)

const (
	webhookTimeout    = 10 * time.Second
	webhookMaxBackoff = time.Minute
	webhookQueue      = 64
)

// Payload is the JSON body of a webhook: the alert's state at the moment it fired or
// resolved, and Text, the same in one line for people (Slack's incoming webhooks show it).
type Payload struct {
	Alert     Name      `json:"alert"`
	Scope     Scope     `json:"scope"`
	State     Status    `json:"state"`
	Since     time.Time `json:"since"`
	Value     float64   `json:"value"`
	Threshold float64   `json:"threshold"`
	Text      string    `json:"text"`
}

// Sign returns the SignatureHeader value of body signed with secret at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// notification is one webhook POST to make, with its retries.
type notification struct {
	key    key
	seq    uint64
	url    string
	secret afloat.Secret
	state  Status
	id     string
	body   []byte
}

// notifier posts the notifications, one worker per webhook URL so that each receiver gets
// an alert's firing before its resolution, and a slow receiver holds up no other.
type notifier struct {
	client   *http.Client
	clock    clockwork.Clock
	log      *slog.Logger
	rand     func() float64
	attempts int
	backoff  time.Duration
	report   func(key, uint64, Delivery)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	queues map[string]chan notification
	closed bool
}

func newNotifier(cfg Config, clock clockwork.Clock, log *slog.Logger, report func(key, uint64, Delivery)) *notifier {
	n := &notifier{client: cfg.HTTPClient, clock: clock, log: log, rand: cfg.Rand, attempts: cfg.WebhookAttempts,
		backoff: cfg.WebhookBackoff, report: report, queues: map[string]chan notification{}}
	if n.client == nil {
		n.client = &http.Client{Timeout: webhookTimeout}
	}
	if n.rand == nil {
		n.rand = rand.Float64
	}
	if n.attempts == 0 {
		n.attempts = DefaultWebhookAttempts
	}
	if n.backoff == 0 {
		n.backoff = DefaultWebhookBackoff
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

// send queues the notification of s to r's webhook; its worker starts with its first
// notification.
func (n *notifier) send(r Rule, k key, seq uint64, s State) {
	body, err := json.Marshal(Payload{Alert: s.Alert, Scope: s.Scope, State: s.State, Since: s.Since.UTC(),
		Value: s.Value, Threshold: s.Threshold, Text: s.text()})
	if err != nil { // a NaN value: nothing sends it
		n.fail(k, seq, s.State, "encoding: "+err.Error())
		return
	}
	id := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%s|%s|%d", s.Alert, s.Scope.Task, s.Scope.Provider, s.State, s.Since.UnixNano()))
	note := notification{key: k, seq: seq, url: r.Webhook, secret: r.Secret, state: s.State, id: hex.EncodeToString(id[:8]), body: body}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	q := n.queues[r.Webhook]
	if q == nil {
		q = make(chan notification, webhookQueue)
		n.queues[r.Webhook] = q
		n.wg.Go(func() { n.work(q) })
	}
	select {
	case q <- note:
	default:
		n.fail(k, seq, s.State, "webhook queue full: notification dropped")
	}
}

func (n *notifier) fail(k key, seq uint64, s Status, msg string) {
	n.log.Warn("alert webhook not sent", "alert", string(k.alert), "state", string(s), "err", msg)
	n.report(k, seq, Delivery{State: s, Result: resultFailed, Error: msg})
}

// close stops the workers and waits for them: an attempt in flight finishes, a wait before
// a retry and the notifications still queued are dropped.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

func (n *notifier) work(q chan notification) {
	for n.ctx.Err() == nil {
		select {
		case <-n.ctx.Done():
			return
		case note := <-q:
			n.deliver(note)
		}
	}
}

// deliver posts one notification until it is delivered, refused, out of attempts, or the
// notifier closes. A 2xx answer delivers it; a transport error, 408, 429 and 5xx are tried
// again after a backoff; any other status refuses it.
func (n *notifier) deliver(note notification) {
	d := Delivery{State: note.state, Result: resultPending}
	for attempt := 1; ; attempt++ {
		at := n.clock.Now()
		d.Attempts, d.LastAttempt = attempt, &at
		status, err := n.post(note, at)
		d.Status, d.Error = status, ""
		if err != nil {
			d.Error = err.Error()
		} else if status/100 != 2 {
			d.Error = http.StatusText(status)
		}
		again := err != nil || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
		switch {
		case err == nil && status/100 == 2:
			d.Result = resultDelivered
		case !again || attempt >= n.attempts:
			d.Result = resultFailed
		}
		n.report(note.key, note.seq, d)
		if d.Result != resultPending {
			if d.Result == resultFailed {
				n.log.Warn("alert webhook failed", "alert", string(note.key.alert), "state", string(note.state),
					"attempts", attempt, "status", status, "err", d.Error)
			}
			return
		}
		if !sleep(n.ctx, n.clock, n.wait(attempt)) {
			return
		}
	}
}

// wait is the backoff after the attempt-th attempt: WebhookBackoff doubled for each attempt
// before it, capped, jittered to [0.5, 1.5) of itself.
func (n *notifier) wait(attempt int) time.Duration {
	d := n.backoff
	for i := 1; i < attempt && d < webhookMaxBackoff; i++ {
		d *= 2
	}
	d = min(d, webhookMaxBackoff)
	return time.Duration(float64(d) * (0.5 + n.rand()))
}

// post makes one attempt and returns the answer's status. Its error never holds the URL.
// Closing the notifier does not cut it: an attempt in flight ends by itself, within
// webhookTimeout, so that a notification sent just before shutdown still arrives.
func (n *notifier) post(note notification, at time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, note.url, bytes.NewReader(note.body))
	if err != nil {
		return 0, errors.New("invalid webhook request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "afloat-alerts")
	req.Header.Set(DeliveryHeader, note.id)
	if note.secret != "" {
		req.Header.Set(SignatureHeader, Sign(note.secret.Reveal(), at, note.body))
	}
	resp, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL often holds the webhook's token
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// sleep waits d on clk, or until ctx is done; it reports whether the wait completed.
func sleep(ctx context.Context, clk clockwork.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}
