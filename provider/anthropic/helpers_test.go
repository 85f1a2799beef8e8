package anthropic

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// testKey is the API key of the tests; no error text may ever hold it.
const testKey = "sk-ant-test-0123456789abcdef-secret"

const messagesPath = "/v1/messages"

var hello = &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hello"}}}

var weatherParams = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)

func read(t testing.TB, name string) fixture.Response {
	t.Helper()
	return fixture.Read(t, filepath.Join("testdata", name))
}

// replay starts a server answering POST /v1/messages with the fixture.
func replay(t testing.TB, name string) *fixture.Server {
	t.Helper()
	srv := fixture.NewServer(t)
	srv.Handle(messagesPath, read(t, name))
	return srv
}

// newClient builds a client for srv's /v1 root.
func newClient(t testing.TB, baseURL string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{Name: "claude", BaseURL: baseURL + "/v1", APIKey: testKey, Model: "claude-sonnet-4-5"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// streamOf reads an SSE body as the stream of a 200.
func streamOf(body, answerTool string) *stream {
	c, err := New(Config{Name: "claude", APIKey: testKey})
	if err != nil {
		panic(err)
	}
	return newStream(c, &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, answerTool)
}
