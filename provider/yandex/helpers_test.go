package yandex

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

// testKey and testToken are the credentials of the tests; no error may ever hold them.
const (
	testKey   = "AQVNtest0123456789abcdef-SECRET-key"
	testToken = "t1.9euelZqtest-iam-token-SECRET"
	modelURI  = "gpt://b1gexamplefolder/yandexgpt/latest"
)

var hello = &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hello"}}}

var weatherParams = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)

var callID = regexp.MustCompile(`^call_[0-9a-f]{16}$`)

func read(t testing.TB, name string) fixture.Response {
	t.Helper()
	return fixture.Read(t, filepath.Join("testdata", name))
}

func replay(t testing.TB, name string) *fixture.Server {
	t.Helper()
	srv := fixture.NewServer(t)
	srv.Handle(completionPath, read(t, name))
	return srv
}

func newClient(t testing.TB, baseURL string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{Name: "yandexgpt", BaseURL: baseURL, ModelURI: modelURI, APIKey: testKey}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// streamOf reads a JSON-lines body as the stream of a 200.
func streamOf(body string) *stream {
	c, err := New(Config{APIKey: testKey, ModelURI: modelURI})
	if err != nil {
		panic(err)
	}
	return newStream(c, &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))})
}

// clearIDs checks that every call has a synthetic id and blanks it for comparison.
func clearIDs(t *testing.T, calls []afloat.ToolCall) {
	t.Helper()
	seen := map[string]bool{}
	for i := range calls {
		if !callID.MatchString(calls[i].ID) || seen[calls[i].ID] {
			t.Errorf("call id %q is not a fresh synthetic id", calls[i].ID)
		}
		seen[calls[i].ID] = true
		calls[i].ID = ""
	}
}
