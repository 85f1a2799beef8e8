package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// testKey is the API key of the tests; no error text may ever hold it.
const testKey = "sk-test-0123456789abcdef-secret"

// recorded is one request the replay server received.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// replayServer answers every request with one recorded wire response from testdata/ and
// keeps the last request for the test to inspect.
type replayServer struct {
	*httptest.Server
	mu   sync.Mutex
	last *recorded
	n    int
}

// readFixture parses testdata/name: a raw HTTP/1.1 response, status line, headers, body.
func readFixture(t testing.TB, name string) (status int, header http.Header, body []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return resp.StatusCode, resp.Header, body
}

func replay(t testing.TB, fixture string) *replayServer {
	t.Helper()
	status, header, body := readFixture(t, fixture)
	rs := &replayServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rs.mu.Lock()
		rs.last = &recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: b}
		rs.n++
		rs.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *replayServer) request(t testing.TB) *recorded {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.last == nil {
		t.Fatal("the server received no request")
	}
	return rs.last
}

func (rs *replayServer) requests() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.n
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

// canonJSON re-encodes a JSON document so that two documents compare by value.
func canonJSON(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not json: %v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// bareClient is a client for the decoders' tests, which send nothing.
func bareClient() *Client {
	c, err := New(Config{Name: "t-lite", APIKey: testKey})
	if err != nil {
		panic(err)
	}
	return c
}
