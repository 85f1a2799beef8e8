package gigachat

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
	"github.com/jonboulle/clockwork"
)

// testKey is the authorization key of the tests; tokenOne and tokenTwo are the tokens of
// oauth_ok.http and oauth_ok_second.http. None may ever reach an error or a log line.
const (
	testKey  = "MDE5YjFmYmEtdGVzdC1jbGllbnQ6c2VjcmV0LWtleS0xMjM0NQ=="
	tokenOne = "eyJjdHkiOiJqd3QiLCJlbmMiOiJBMjU2Q0JDLUhTNTEyIn0.token-one-0123456789"
	tokenTwo = "eyJjdHkiOiJqd3QiLCJlbmMiOiJBMjU2Q0JDLUhTNTEyIn0.token-two-9876543210"
)

const (
	authPath = "/api/v2/oauth"
	chatPath = "/api/v1/chat/completions"
)

// tokenOneExpires is oauth_ok.http's expires_at; the tests' clock starts 30 minutes before.
var (
	tokenOneExpires = time.UnixMilli(1741571400000)
	start           = tokenOneExpires.Add(-30 * time.Minute)
)

var hello = &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hello"}}}

var weatherParams = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)

func read(t testing.TB, name string) fixture.Response {
	t.Helper()
	return fixture.Read(t, filepath.Join("testdata", name))
}

// server starts a fixture server whose token endpoint answers oauth_ok.http and whose chat
// answers each of chat in turn.
func server(t testing.TB, chat ...string) *fixture.Server {
	t.Helper()
	srv := fixture.NewServer(t)
	srv.Handle(authPath, read(t, "oauth_ok.http"))
	for _, name := range chat {
		srv.Handle(chatPath, read(t, name))
	}
	return srv
}

// testClient is a client of srv on a fake clock at start, logging to its buffer.
type testClient struct {
	*Client
	clock *clockwork.FakeClock
	logs  *logBuffer
}

func newClient(t testing.TB, srv *fixture.Server, mod func(*Config)) *testClient {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	logs := &logBuffer{}
	cfg := Config{
		Name: "gigachat-pro", BaseURL: srv.URL + "/api/v1", AuthURL: srv.URL + authPath,
		AuthKey: testKey, Model: "GigaChat-Pro", Clock: clock,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testClient{Client: c, clock: clock, logs: logs}
}

// logBuffer keeps the log lines of concurrent calls.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// streamOf reads an SSE body as the stream of a 200.
func streamOf(body string) *stream {
	c, err := New(Config{Name: "gigachat-pro", AuthKey: testKey})
	if err != nil {
		panic(err)
	}
	return newStream(c, &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))})
}

// noSecrets fails t when s holds the key or a token.
func noSecrets(t testing.TB, what, s string) {
	t.Helper()
	for _, secret := range []string{testKey, tokenOne, tokenTwo, "token-one", "token-two"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s holds a secret (%.12s…): %s", what, secret, s)
		}
	}
}
