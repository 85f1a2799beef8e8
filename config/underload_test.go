package config

import (
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/cascade"
)

// TestHedgeAndShedKeys: hedge (tasks and routes), queue_wait and server.shed_latency are
// read into what the engine takes, and each wrong value is refused at its path.
func TestHedgeAndShedKeys(t *testing.T) {
	text := `server: {shed_latency: 50ms}
defaults: {queue_wait: 250ms}
providers:
  primary: {type: sim, queue_wait: 0s}
  backup: {type: sim}
  spare: {type: sim}
routes:
  chat: {criticality: assistance, cascade: [primary, backup], hedge: {after: p95}}
  fixed: {criticality: assistance, cascade: [primary, backup, spare], hedge: {after: 800ms, max: 2}}
`
	f := mustParse(t, text)
	if got := f.Route("chat").Hedge.cascade(); got != (cascade.Hedge{P95: true, Max: 1}) {
		t.Errorf("chat's hedge %+v; want after p95, max 1", got)
	}
	if got := f.Route("fixed").Hedge.cascade(); got != (cascade.Hedge{After: 800 * time.Millisecond, Max: 2}) {
		t.Errorf("fixed's hedge %+v; want after 800ms, max 2", got)
	}
	if f.Server.ShedThreshold() != 50*time.Millisecond {
		t.Errorf("shed threshold %v; want 50ms", f.Server.ShedThreshold())
	}
	if p, b := f.Provider("primary").QueueWait, f.Provider("backup").QueueWait; p != 0 || b != 250*time.Millisecond {
		t.Errorf("queue_wait primary %v, backup %v; want 0s (its own) and 250ms (the defaults')", p, b)
	}
	if d := mustParse(t, "providers:\n  p: {type: sim}\nroutes:\n  r: {criticality: assistance, cascade: [p]}\n"); d.Server.ShedThreshold() != 200*time.Millisecond ||
		d.Provider("p").QueueWait != time.Second {
		t.Errorf("defaults: shed %v, queue_wait %v; want 200ms and 1s", d.Server.ShedThreshold(), d.Provider("p").QueueWait)
	}

	for _, c := range []struct{ yaml, path, msg string }{
		{"hedge: {after: p99}", "routes.chat.hedge.after", "want p95 or a positive duration"},
		{"hedge: {after: -1s}", "routes.chat.hedge.after", "want p95 or a positive duration"},
		{"hedge: {after: p95, max: 0}", "routes.chat.hedge.max", "at least 1"},
		{"hedge: {after: p95, max: 2}", "routes.chat.hedge.max", "a cascade of 2 tiers has 1 below its first"},
		{"hedge: {after: 30s}", "routes.chat.hedge.after", "is not under the budget 30s"},
		{"budget: 1500ms, hedge: {after: 10s}", "routes.chat.hedge.after", "is not under the budget 1.5s"},
	} {
		bad := strings.Replace(text, "hedge: {after: p95}", c.yaml, 1)
		_, err := Parse([]byte(bad), "/cfg", noEnv)
		if err == nil || findError(asErrors(t, err), c.path, c.msg) == nil {
			t.Errorf("%s: error %v; want %s: %s", c.yaml, err, c.path, c.msg)
		}
	}
	single := strings.Replace(text, "cascade: [primary, backup], hedge: {after: p95}", "cascade: [primary], hedge: {after: p95}", 1)
	if _, err := Parse([]byte(single), "/cfg", noEnv); err == nil || findError(asErrors(t, err), "routes.chat.hedge", "only one") == nil {
		t.Errorf("a hedge over one tier: %v; want it refused", err)
	}
	for _, v := range []string{"fast", "-5ms", "1ns", "999us"} {
		bad := strings.Replace(text, "shed_latency: 50ms", "shed_latency: "+v, 1)
		if _, err := Parse([]byte(bad), "/cfg", noEnv); err == nil || findError(asErrors(t, err), "server.shed_latency", "want off") == nil {
			t.Errorf("shed_latency %s: %v; want it refused", v, err)
		}
	}
	if f := mustParse(t, strings.Replace(text, "shed_latency: 50ms", "shed_latency: 1ms", 1)); f.Server.ShedThreshold() != time.Millisecond {
		t.Errorf("shed_latency 1ms: threshold %v; want 1ms, the least accepted", f.Server.ShedThreshold())
	}
	off := strings.Replace(text, "shed_latency: 50ms", "shed_latency: off", 1)
	if f := mustParse(t, off); f.Server.ShedThreshold() != 0 {
		t.Errorf("shed_latency off: threshold %v; want 0", f.Server.ShedThreshold())
	}
}
