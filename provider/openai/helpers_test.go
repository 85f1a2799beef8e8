package openai

import (
	"path/filepath"
	"testing"

	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// testKey is the API key of the tests; no error text may ever hold it.
const testKey = "sk-test-0123456789abcdef-secret"

const chatPath = "/v1/chat/completions"

func read(t testing.TB, name string) fixture.Response {
	t.Helper()
	return fixture.Read(t, filepath.Join("testdata", name))
}

// replay starts a server answering POST /v1/chat/completions with the fixture.
func replay(t testing.TB, name string) *fixture.Server {
	t.Helper()
	srv := fixture.NewServer(t)
	srv.Handle(chatPath, read(t, name))
	return srv
}

// newClient builds a client for srv's /v1 root.
func newClient(t testing.TB, baseURL string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{Name: "t-lite", BaseURL: baseURL + "/v1", APIKey: testKey, Model: "t-tech/T-lite-it-1.0"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bareClient is a client for the decoders' tests, which send nothing.
func bareClient() *Client {
	c, err := New(Config{Name: "t-lite", APIKey: testKey})
	if err != nil {
		panic(err)
	}
	return c
}
