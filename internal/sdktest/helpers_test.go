package sdktest

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
	fs "github.com/afloat-dev/afloat/internal/faultserver"
)

// route is the route the SDKs call: cascade [primary, backup].
const route = "chat"

// The rescued answer: the primary streams 40 of its 60 tokens and is cut; the backup
// continues from them.
var (
	primaryTokens = fs.Tokens("p", 1, 60)
	contTokens    = fs.Tokens("c", 41, 60)
	// want is the one completion a client must read.
	want = fs.Text(primaryTokens[:40]) + fs.Text(contTokens)
)

// rescued starts the two upstreams of a cut stream and a gateway over them, and returns the
// gateway's base URL (without /v1) and the backup, whose requests the test may check.
func rescued(t *testing.T) (string, *fs.Server) {
	t.Helper()
	primary := fs.New(t, fs.Config{Model: "primary-model-7b", Tokens: primaryTokens,
		Script: fs.Always(fs.Fault{Mode: fs.Cut, After: 40})})
	backup := fs.New(t, fs.Config{Model: "backup-model-70b", Tokens: fs.Tokens("b", 1, 60),
		Script: func(r *fs.Request) fs.Fault {
			if r.Continues() {
				return fs.Fault{Tokens: contTokens}
			}
			return fs.Fault{}
		}})
	yaml := fmt.Sprintf(`defaults:
  breaker: {recovery: 5m}
providers:
  primary: {type: openai, base_url: %q, model: primary-model-7b}
  backup: {type: openai, base_url: %q, model: backup-model-70b, dialect: vllm, continuation: prefill}
routes:
  %s:
    criticality: assistance
    budget: 10s
    cascade: [primary, backup]
`, primary.URL+"/v1", backup.URL+"/v1", route)
	return serve(t, yaml), backup
}

// serve builds the config as `afloat serve` does and serves its gateway on a loopback
// listener, in process; both stop when the test ends. opts change the gateway's config.
func serve(t *testing.T, yaml string, opts ...func(*gateway.Config)) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "afloat.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatalf("the test's config does not load (it needs providers.backup.continuation):\n%v\n%s", err, yaml)
	}
	rt, err := f.Build(config.BuildOptions{})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	cfg := gateway.Config{Engine: rt.Engine, Tasks: rt.Tasks, Routes: rt.Routes, Models: rt.Models, DefaultRoute: f.Server.DefaultRoute, Faults: rt.Faults,
		Flags: rt.Flags, Review: rt.Review, Gatherer: rt.Registry}
	for _, o := range opts {
		o(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// The routes of tenanted, by name, and the key of its one tenant.
var tenantedRoutes = []string{"assist", route}

const tenantKey = "sdk-test-key"

// tenanted serves routes "chat" and "assist" over one healthy upstream to a tenant whose
// key is tenantKey, and returns the gateway's base URL (without /v1).
func tenanted(t *testing.T) string {
	t.Helper()
	up := fs.New(t, fs.Config{Model: "primary-model-7b"})
	yaml := fmt.Sprintf(`providers:
  primary: {type: openai, base_url: %q, model: primary-model-7b}
routes:
  %s:
    criticality: assistance
    cascade: [primary]
  assist:
    criticality: assistance
    cascade: [primary]
`, up.URL+"/v1", route)
	return serve(t, yaml, func(c *gateway.Config) { c.Tenants = map[string][]string{"acme": {tenantKey}} })
}

// wantContinuation checks that the backup was asked to continue the primary's 40 tokens, so
// that a passing SDK test is about a rescued stream and not a lucky one.
func wantContinuation(t *testing.T, backup *fs.Server, calls int) {
	t.Helper()
	log := backup.Settle(t, 10*time.Second).Chat()
	if len(log) != calls || len(log.Continuations()) != calls {
		t.Errorf("the backup received %d requests (%d continuations), want %d continuations of the primary's 40 tokens:%v",
			len(log), len(log.Continuations()), calls, log)
	}
	for _, r := range log.Continuations() {
		if r.Prefill() != fs.Text(primaryTokens[:40]) {
			t.Errorf("the backup was asked to continue %q, want the primary's 40 tokens", r.Prefill())
		}
	}
}
