package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// opsConfig is a gateway over one sim provider, with serverKeys under server:.
func opsConfig(t *testing.T, serverKeys string) string {
	t.Helper()
	return writeConfig(t, "server:\n"+serverKeys+`
providers:
  a: {type: sim}
  b: {type: sim}
tasks:
  moderation:
    criticality: critical
    schema: schemas/mod.json
    cascade: [{provider: a, prompt: prompts/mod/a.v1.tmpl}, {provider: b, prompt: prompts/mod/b.v1.tmpl}]
`, testFiles)
}

// opsServe is a running `afloat serve`.
type opsServe struct {
	base   string
	stderr *syncWriter
	stop   func() int // ends serve and returns its exit code
}

// startOpsServe runs `afloat serve` with args until the test ends or stop is called.
func startOpsServe(t *testing.T, args ...string) *opsServe {
	t.Helper()
	pr, pw := io.Pipe()
	s := &opsServe{stderr: &syncWriter{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code := run(ctx, append([]string{"serve", "-listen", "127.0.0.1:0", "-grace", "5s"}, args...), &syncWriter{w: pw}, s.stderr)
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("serve printed nothing: %v; exit %d; stderr %s", err, <-done, s.stderr.String())
	}
	go io.Copy(io.Discard, pr)
	s.base = strings.TrimSpace(strings.TrimPrefix(line, "afloat listening on "))
	stopped, code := false, 0
	s.stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			select {
			case code = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not stop")
			}
		}
		return code
	}
	t.Cleanup(func() { s.stop() })
	return s
}

// logLines returns the messages of serve's JSON log lines and the attributes by message.
func logLines(t *testing.T, stderr string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil {
			out[fmt.Sprint(rec["msg"])] = rec
		}
	}
	return out
}

func getURL(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeMetricsRuntime: /metrics exports the Go runtime's and the process's collectors
// beside afloat's metrics.
func TestServeMetricsRuntime(t *testing.T) {
	s := startOpsServe(t, "-c", opsConfig(t, "  max_body: 1MiB"))
	status, body := getURL(t, s.base+"/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{"\ngo_goroutines ", "\ngo_memstats_heap_alloc_bytes ", "\nprocess_start_time_seconds ", "\nafloat_attempts_total{"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}

// TestServeDebugListener: server.debug_listen serves the profiler on its own listener, and
// the gateway's listener does not; a non-loopback address is refused before serving.
func TestServeDebugListener(t *testing.T) {
	s := startOpsServe(t, "-c", opsConfig(t, "  debug_listen: 127.0.0.1:0"))
	rec := logLines(t, s.stderr.String())["profiler listening"]
	if rec == nil {
		t.Fatalf("no profiler line in the log:\n%s", s.stderr.String())
	}
	debug := fmt.Sprintf("http://%s", rec["addr"])
	if status, body := getURL(t, debug+"/debug/pprof/"); status != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("profiler index: %d %.200s", status, body)
	}
	if status, body := getURL(t, debug+"/debug/pprof/goroutine?debug=1"); status != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile: %d %.200s", status, body)
	}
	if status, _ := getURL(t, s.base+"/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("the gateway's listener serves the profiler: %d", status)
	}
	if status, _ := getURL(t, debug+"/v1/tasks/moderation"); status != http.StatusNotFound {
		t.Errorf("the debug listener serves the gateway: %d", status)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.stderr.String())
	}

	path := opsConfig(t, "  debug_listen: 0.0.0.0:0")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "-c", path, "-listen", "127.0.0.1:0"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "not a loopback address") {
		t.Fatalf("serve with a public debug listener: exit %d: %s", code, errOut.String())
	}
}

// TestServeLogLevel: server.log_level sets the least severe level logged, and -log-level
// replaces it.
func TestServeLogLevel(t *testing.T) {
	tests := []struct {
		name     string
		level    string // server.log_level; "" leaves it out
		flag     string
		wantInfo bool
	}{
		{"default is info", "", "", true},
		{"warn from the file", "warn", "", false},
		{"the flag replaces the file", "error", "info", true},
		{"the flag silences", "debug", "warn", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := "  max_body: 1MiB"
			if tc.level != "" {
				keys += "\n  log_level: " + tc.level
			}
			args := []string{"-c", opsConfig(t, keys)}
			if tc.flag != "" {
				args = append(args, "-log-level", tc.flag)
			}
			s := startOpsServe(t, args...)
			if code := s.stop(); code != 0 {
				t.Fatalf("serve exited %d: %s", code, s.stderr.String())
			}
			lines := logLines(t, s.stderr.String())
			if got := lines["afloat listening"] != nil; got != tc.wantInfo {
				t.Errorf("info line logged: %v, want %v; log:\n%s", got, tc.wantInfo, s.stderr.String())
			}
		})
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "-c", opsConfig(t, "  max_body: 1MiB"), "-log-level", "loud"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown log level "loud"`) {
		t.Errorf("bad -log-level: exit %d: %s", code, errOut.String())
	}
}

// TestServeRefusesWeakCredentials: serve and check refuse a short admin token and a tenant
// key that is the admin token, without printing either.
func TestServeRefusesWeakCredentials(t *testing.T) {
	for _, tc := range []struct{ keys, secret, msg string }{
		{"  admin_token: x", "admin_token: x\n", "too short"},
		{"  admin_token: adm-0123456789abcdef\ntenants:\n  acme: {keys: [adm-0123456789abcdef]}", "", "is also the admin token"},
	} {
		path := opsConfig(t, tc.keys)
		for _, cmd := range []string{"serve", "check"} {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), []string{cmd, "-c", path}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.msg) {
				t.Errorf("%s with %q: exit %d: %s", cmd, tc.keys, code, errOut.String())
			}
			if strings.Contains(errOut.String(), "adm-0123456789abcdef") {
				t.Errorf("%s prints the token: %s", cmd, errOut.String())
			}
		}
	}
}
