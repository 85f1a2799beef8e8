package gigachat

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
)

// tokens holds the access token shared by a Client's calls. Concurrent callers that find no
// valid token wait for one exchange instead of each making their own (the token endpoint
// allows 10 requests per second). The lock is never held across the exchange.
type tokens struct {
	c      *Client
	url    string
	scope  string
	margin time.Duration

	mu       sync.Mutex
	token    string
	expires  time.Time
	inflight *exchange
}

// exchange is one token request in flight; done closes when it ends.
type exchange struct {
	done chan struct{}
	err  error
	// left is set when the exchange failed because its caller's context ended: a waiter
	// then makes its own exchange rather than take a failure that is not the provider's.
	left bool
}

// tokenLifetime is the documented life of a token, assumed when a response names none.
const tokenLifetime = 30 * time.Minute

// get returns a token valid for at least the margin, exchanging the key for a new one
// when needed.
func (t *tokens) get(ctx context.Context) (string, error) {
	for {
		t.mu.Lock()
		if t.token != "" && t.c.clock.Now().Before(t.expires.Add(-t.margin)) {
			tok := t.token
			t.mu.Unlock()
			return tok, nil
		}
		if ex := t.inflight; ex != nil {
			t.mu.Unlock()
			select {
			case <-ex.done:
				if ex.err != nil && !ex.left {
					return "", ex.err
				}
				continue
			case <-ctx.Done():
				return "", httpx.TransportError(t.c.name, ctx.Err())
			}
		}
		ex := &exchange{done: make(chan struct{})}
		t.inflight = ex
		t.mu.Unlock()

		tok, expires, err := t.fetch(ctx)
		t.mu.Lock()
		if err == nil {
			t.token, t.expires = tok, expires
		}
		ex.err, ex.left = err, err != nil && ctx.Err() != nil
		t.inflight = nil
		t.mu.Unlock()
		close(ex.done)
		if err != nil {
			t.c.log.Warn("gigachat token exchange failed", "provider", t.c.name, "err", err)
			return "", err
		}
		t.c.log.Info("gigachat token refreshed", "provider", t.c.name, "expires_at", expires.UTC())
		return tok, nil
	}
}

// invalidate forgets tok after the chat endpoint refused it, unless another caller already
// replaced it.
func (t *tokens) invalidate(tok string) {
	t.mu.Lock()
	if t.token == tok {
		t.token = ""
	}
	t.mu.Unlock()
}

// current returns the token in force, for redaction.
func (t *tokens) current() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.token
}

// tokenResponse is the token endpoint's answer: access_token and expires_at, or the
// tok and exp variant. Both times are Unix milliseconds.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	ExpiresAt   int64  `json:"expires_at"`
	Tok         string `json:"tok"`
	Exp         int64  `json:"exp"`
}

// fetch exchanges the authorization key for a token.
func (t *tokens) fetch(ctx context.Context) (string, time.Time, error) {
	c := t.c
	form := url.Values{"scope": {t.scope}}.Encode()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(form))
	if err != nil {
		return "", time.Time{}, httpx.ContractError(c.name, err)
	}
	hreq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("RqUID", newRqUID())
	hreq.Header.Set("Authorization", "Basic "+c.authKey.Reveal())
	resp, err := c.http.Do(hreq)
	if err != nil {
		pe := httpx.TransportError(c.name, err)
		pe.Err = fmt.Errorf("token endpoint: %w", err)
		return "", time.Time{}, pe
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, httpx.MaxErrorBody))
		return "", time.Time{}, c.tokenError(resp.StatusCode, resp.Header, body)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, httpx.MaxErrorBody))
	if err != nil {
		pe := httpx.TransportError(c.name, err)
		pe.Err = fmt.Errorf("token endpoint: %w", err)
		return "", time.Time{}, pe
	}
	var w tokenResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return "", time.Time{}, httpx.BodyError(c.name, resp.StatusCode, errors.New("token endpoint: response is not a token"))
	}
	tok, exp := w.AccessToken, w.ExpiresAt
	if tok == "" {
		tok, exp = w.Tok, w.Exp
	}
	if tok == "" || httpx.HasControl(tok) {
		return "", time.Time{}, httpx.BodyError(c.name, resp.StatusCode, errors.New("token endpoint: response holds no usable token"))
	}
	return tok, expiry(exp, c.clock.Now()), nil
}

// expiry reads expires_at: Unix milliseconds as documented; a value too small to be
// milliseconds of this century is taken as seconds, and none as the documented 30 minutes.
func expiry(v int64, now time.Time) time.Time {
	switch {
	case v <= 0:
		return now.Add(tokenLifetime)
	case v < 1e11:
		return time.Unix(v, 0)
	}
	return time.UnixMilli(v)
}

// newRqUID returns a random UUID (version 4), the request id the token endpoint requires.
func newRqUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// tokenError classifies a failed token exchange. The key or scope refused (400, 401, 403,
// and any other 4xx but 408 and 429) will fail every call alike until a person acts:
// Unusable. 429 is Throttled; 408 and 5xx are Unavailable.
func (c *Client) tokenError(status int, h http.Header, body []byte) *afloat.ProviderError {
	pe := &afloat.ProviderError{Provider: c.name, Status: status, RetryAfter: httpx.RetryAfter(h, c.clock.Now())}
	switch {
	case status == http.StatusTooManyRequests:
		pe.Kind = afloat.Throttled
	case status == http.StatusRequestTimeout, status >= 500:
		pe.Kind = afloat.Unavailable
	case status >= 400:
		pe.Kind = afloat.Unusable
	default:
		pe.Kind = afloat.Unavailable
	}
	var w struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	switch {
	case json.Unmarshal(body, &w) == nil && w.Message != "":
		if w.Code != nil {
			pe.Code = fmt.Sprintf("oauth_%d", *w.Code)
		}
		pe.Err = errors.New("token endpoint: " + c.quote(w.Message))
	case len(strings.TrimSpace(string(body))) > 0:
		pe.Err = errors.New("token endpoint: unexpected body: " + c.quote(string(body)))
	default:
		pe.Err = errors.New("token endpoint")
	}
	return pe
}
