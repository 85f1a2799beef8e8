package gigachat

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// TestTokenReusedAndRefreshedBeforeExpiry drives the token's life on a fake clock.
func TestTokenReusedAndRefreshedBeforeExpiry(t *testing.T) {
	srv := fixture.NewServer(t)
	srv.Handle(authPath, read(t, "oauth_ok.http"), read(t, "oauth_ok_second.http"))
	srv.Handle(chatPath, read(t, "chat_ok.http"))
	c := newClient(t, srv, nil)
	steps := []struct {
		name      string
		advance   time.Duration // from the previous step
		calls     int
		wantFetch int // token exchanges so far
		wantToken string
	}{
		{"first call fetches", 0, 1, 1, tokenOne},
		{"later calls reuse it", 10 * time.Minute, 5, 1, tokenOne},
		{"just outside the margin still reuses it", 18*time.Minute + 59*time.Second, 1, 1, tokenOne},
		{"inside the margin refreshes", 2 * time.Second, 1, 2, tokenTwo},
		{"the new token is reused", time.Minute, 3, 2, tokenTwo},
	}
	for _, st := range steps {
		c.clock.Advance(st.advance)
		for range st.calls {
			if _, err := c.Complete(t.Context(), hello); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		if n := len(srv.Requests(authPath)); n != st.wantFetch {
			t.Errorf("%s: %d token exchanges, want %d", st.name, n, st.wantFetch)
		}
		if got := srv.Last(t, chatPath).Header.Get("Authorization"); got != "Bearer "+st.wantToken {
			t.Errorf("%s: chat sent %.30q…, want the token %.30q…", st.name, got, st.wantToken)
		}
	}
	noSecrets(t, "log", c.logs.String())
	if !strings.Contains(c.logs.String(), "gigachat token refreshed") {
		t.Errorf("refreshes not logged: %s", c.logs.String())
	}
}

// TestConcurrentCallsShareOneExchange: callers that find no token wait for one exchange.
func TestConcurrentCallsShareOneExchange(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{}, 1)
	srv := fixture.NewServer(t)
	ok := read(t, "oauth_ok.http")
	srv.HandleFunc(authPath, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		ok.ServeHTTP(w, r)
	})
	srv.Handle(chatPath, read(t, "chat_ok.http"))
	c := newClient(t, srv, nil)
	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := c.Complete(t.Context(), hello)
			errs <- err
		})
	}
	// Wait until the one exchange is in flight, then let it answer.
	<-arrived
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.Requests(authPath)); n != 1 {
		t.Errorf("%d token exchanges for %d concurrent calls, want 1", n, callers)
	}
	if n := len(srv.Requests(chatPath)); n != callers {
		t.Errorf("%d chats, want %d", n, callers)
	}
}

// TestRefreshOnceOn401: a refused token is replaced once and the call repeated once.
func TestRefreshOnceOn401(t *testing.T) {
	tests := []struct {
		name       string
		chat       []string
		stream     bool
		wantErr    bool
		wantChats  int
		wantTokens int
	}{
		{name: "401 then ok", chat: []string{"err_401_unauthorized.http", "chat_ok.http"}, wantChats: 2, wantTokens: 2},
		{name: "401 then ok, streaming", chat: []string{"err_401_unauthorized.http", "stream_ok.http"}, stream: true, wantChats: 2, wantTokens: 2},
		{name: "401 twice is unusable", chat: []string{"err_401_unauthorized.http"}, wantErr: true, wantChats: 2, wantTokens: 2},
		{name: "401 twice is unusable, streaming", chat: []string{"err_401_unauthorized.http"}, stream: true, wantErr: true, wantChats: 2, wantTokens: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fixture.NewServer(t)
			srv.Handle(authPath, read(t, "oauth_ok.http"), read(t, "oauth_ok_second.http"))
			for _, f := range tt.chat {
				srv.Handle(chatPath, read(t, f))
			}
			c := newClient(t, srv, nil)
			var err error
			if tt.stream {
				var s afloat.Stream
				if s, err = c.Stream(t.Context(), hello); err == nil {
					_, err = fixture.Drain(t, s)
					if errors.Is(err, io.EOF) {
						err = nil
					}
				}
			} else {
				_, err = c.Complete(t.Context(), hello)
			}
			var pe *afloat.ProviderError
			switch {
			case tt.wantErr && (!errors.As(err, &pe) || pe.Kind != afloat.Unusable || pe.Status != 401):
				t.Fatalf("err = %v, want an unusable 401", err)
			case !tt.wantErr && err != nil:
				t.Fatal(err)
			}
			if n := len(srv.Requests(chatPath)); n != tt.wantChats {
				t.Errorf("%d chats, want %d", n, tt.wantChats)
			}
			if n := len(srv.Requests(authPath)); n != tt.wantTokens {
				t.Errorf("%d token exchanges, want %d (one refresh)", n, tt.wantTokens)
			}
			chats := srv.Requests(chatPath)
			if chats[0].Header.Get("Authorization") != "Bearer "+tokenOne || chats[1].Header.Get("Authorization") != "Bearer "+tokenTwo {
				t.Error("the repeated call did not use the refreshed token")
			}
			if err != nil {
				noSecrets(t, "error", err.Error())
			}
			noSecrets(t, "log", c.logs.String())
		})
	}
}

// TestTokenEndpointFailures: the token endpoint's own failures, classified as its own; the
// chat is never called.
func TestTokenEndpointFailures(t *testing.T) {
	tests := []struct {
		fixture    string
		kind       afloat.Kind
		status     int
		code       string
		retryAfter time.Duration
		transient  bool
		errHas     string
	}{
		{"oauth_400_scope_empty.http", afloat.Unusable, 400, "oauth_5", 0, false, "token endpoint: scope is empty"},
		{"oauth_400_scope_mismatch.http", afloat.Unusable, 400, "oauth_7", 0, false, "scope from db"},
		{"oauth_401_bad_key.http", afloat.Unusable, 401, "oauth_4", 0, false, "Authorization"},
		{"oauth_429.http", afloat.Throttled, 429, "oauth_429", time.Second, true, "Too many requests"},
		{"oauth_503.http", afloat.Unavailable, 503, "", 0, true, "token endpoint: unexpected body"},
		{"chat_ok.http", afloat.Unavailable, 200, "", 0, false, "token endpoint: response holds no usable token"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := fixture.NewServer(t)
			srv.Handle(authPath, read(t, tt.fixture))
			srv.Handle(chatPath, read(t, "chat_ok.http"))
			c := newClient(t, srv, nil)
			for _, call := range []func() error{
				func() error { _, err := c.Complete(t.Context(), hello); return err },
				func() error { _, err := c.Stream(t.Context(), hello); return err },
			} {
				err := call()
				var pe *afloat.ProviderError
				if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != tt.status || pe.Code != tt.code ||
					pe.RetryAfter != tt.retryAfter || pe.Transient() != tt.transient || pe.Provider != "gigachat-pro" {
					t.Fatalf("err = %#v, want %s, status %d, code %q, retry after %v", err, tt.kind, tt.status, tt.code, tt.retryAfter)
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("error %q does not say %q", err, tt.errHas)
				}
				noSecrets(t, "error", err.Error())
			}
			if n := len(srv.Requests(chatPath)); n != 0 {
				t.Errorf("%d chats sent without a token", n)
			}
			noSecrets(t, "log", c.logs.String())
		})
	}
	t.Run("refused", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		srv := server(t, "chat_ok.http")
		c := newClient(t, srv, func(c *Config) { c.AuthURL = dead.URL + authPath })
		_, err := c.Complete(t.Context(), hello)
		var pe *afloat.ProviderError
		if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || pe.Status != 0 || !strings.Contains(err.Error(), "token endpoint") {
			t.Fatalf("err = %v, want an unavailable token endpoint", err)
		}
	})
}

// TestSecretsEchoedAreRedacted: servers that echo the key or the token in an error body
// never get them into an error or a log line.
func TestSecretsEchoedAreRedacted(t *testing.T) {
	srv := fixture.NewServer(t)
	srv.HandleFunc(authPath, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		w.Write([]byte(`{"code":6,"message":"bad key ` + r.Header.Get("Authorization") + `"}`))
	})
	c := newClient(t, srv, nil)
	_, err := c.Complete(t.Context(), hello)
	if err == nil || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("err = %v, want the echoed key redacted", err)
	}
	noSecrets(t, "error", err.Error())
	noSecrets(t, "log", c.logs.String())

	srv = server(t)
	srv.HandleFunc(chatPath, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(403)
		w.Write([]byte(`{"status":403,"message":"token ` + r.Header.Get("Authorization") + ` denied"}`))
	})
	c = newClient(t, srv, nil)
	_, err = c.Complete(t.Context(), hello)
	if afloat.KindOf(err) != afloat.Unusable || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("err = %v, want an unusable 403 with the token redacted", err)
	}
	noSecrets(t, "error", err.Error())
}

func TestExpiry(t *testing.T) {
	now := time.Date(2025, 3, 10, 1, 20, 0, 0, time.UTC)
	tests := []struct {
		name string
		v    int64
		want time.Time
	}{
		{"milliseconds", 1741571400000, time.Date(2025, 3, 10, 1, 50, 0, 0, time.UTC)},
		{"seconds", 1741571400, time.Date(2025, 3, 10, 1, 50, 0, 0, time.UTC)},
		{"absent", 0, now.Add(30 * time.Minute)},
		{"negative", -5, now.Add(30 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expiry(tt.v, now); !got.Equal(tt.want) {
				t.Errorf("expiry(%d) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}

func TestTokVariant(t *testing.T) {
	srv := fixture.NewServer(t)
	srv.Handle(authPath, read(t, "oauth_tok_exp.http"))
	srv.Handle(chatPath, read(t, "chat_ok.http"))
	c := newClient(t, srv, nil)
	if _, err := c.Complete(t.Context(), hello); err != nil {
		t.Fatal(err)
	}
	if got := srv.Last(t, chatPath).Header.Get("Authorization"); got != "Bearer eyJjdHkiOiJqd3QifQ.token-tok-variant" {
		t.Errorf("Authorization = %q, want the tok variant's token", got)
	}
}
