package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/jonboulle/clockwork"
)

// TestFaultTTL: PUT /admin/faults takes an optional ttl (default 15m), refuses one of 0 or
// less and a bad duration, shows the time left in /admin/status, and the fault clears
// itself once the TTL has passed at the fault's clock.
func TestFaultTTL(t *testing.T) {
	clk := clockwork.NewFakeClock()
	e := newEnv(t, func(c *Config) {
		// The faults the status reads, on a fake clock.
		fs := map[string]*fault.Provider{}
		for name, f := range c.Faults {
			fs[name] = fault.Wrap(name, f.Inner(), clk)
		}
		c.Faults = fs
	})
	type statusFault struct {
		Providers map[string]struct {
			Fault *struct {
				Mode        string     `json:"mode"`
				TTL         string     `json:"ttl"`
				ExpiresAt   *time.Time `json:"expires_at"`
				RemainingMS *int64     `json:"remaining_ms"`
			} `json:"fault"`
		} `json:"providers"`
	}
	status := func() statusFault {
		t.Helper()
		code, _, b := e.do("GET", "/admin/status", adminToken, "")
		if code != http.StatusOK {
			t.Fatalf("status %d %s", code, b)
		}
		return decode[statusFault](t, b)
	}

	// Well-formed JSON that is not a valid fault is invalid_fault; JSON that is not, invalid_request.
	for _, body := range []string{`{"mode":"timeout","ttl":"0s"}`, `{"mode":"timeout","ttl":"-1m"}`, `{"mode":"timeout","ttl":"later"}`, `{"mode":"timeout","ttl":5}`,
		`{"mode":"timeout","delay":"5s"}`} {
		code, _, b := e.do("PUT", "/admin/faults/primary", adminToken, body)
		if code != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_fault"`) || strings.Contains(string(b), "invalid JSON") {
			t.Errorf("PUT %s: %d %s, want 400 invalid_fault", body, code, b)
		}
	}
	if code, _, b := e.do("PUT", "/admin/faults/primary", adminToken, `{"mode":`); code != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_request"`) {
		t.Errorf("PUT of broken JSON: %d %s, want 400 invalid_request", code, b)
	}
	if st := status(); st.Providers["primary"].Fault != nil {
		t.Fatalf("a refused fault was set: %+v", st.Providers["primary"].Fault)
	}

	// No ttl: 15 minutes.
	if code, _, b := e.do("PUT", "/admin/faults/primary", adminToken, `{"mode":"unavailable"}`); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, b)
	}
	clk.Advance(5 * time.Minute)
	f := status().Providers["primary"].Fault
	if f == nil || f.Mode != "unavailable" || f.TTL != "15m0s" || f.RemainingMS == nil || *f.RemainingMS != (10*time.Minute).Milliseconds() ||
		f.ExpiresAt == nil || !f.ExpiresAt.Equal(clk.Now().Add(10*time.Minute)) {
		t.Fatalf("fault in status %+v, want 10m left", f)
	}
	clk.Advance(10 * time.Minute)
	if f := status().Providers["primary"].Fault; f != nil {
		t.Fatalf("the fault outlived its default ttl: %+v", f)
	}

	// A ttl of its own.
	if code, _, b := e.do("PUT", "/admin/faults/backup", adminToken, `{"mode":"slow","delay":"2s","ttl":"90s"}`); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, b)
	}
	if f := status().Providers["backup"].Fault; f == nil || f.RemainingMS == nil || *f.RemainingMS != 90000 {
		t.Fatalf("fault %+v, want 90000 ms left", f)
	}
	clk.Advance(90 * time.Second)
	if f := status().Providers["backup"].Fault; f != nil || e.gw.cfg.Faults["backup"].Fault().Mode != fault.ModeNone {
		t.Fatalf("the fault outlived its ttl: %+v", f)
	}
}
