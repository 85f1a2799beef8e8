package gateway

import (
	"strings"
	"testing"
)

// TestAccessLogModes: on writes a line per request, errors only for 4xx and 5xx answers, off
// none; the failed attempts of a degraded answer are logged in every mode.
func TestAccessLogModes(t *testing.T) {
	for _, tt := range []struct {
		mode          string
		okLine, error bool
	}{{"", true, true}, {"on", true, true}, {"errors", false, true}, {"off", false, false}} {
		t.Run(tt.mode, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.AccessLog = tt.mode })
			if status, _, body := e.do("POST", "/v1/tasks/triage", clientKey, ticketBody); status != 200 {
				t.Fatalf("task: %d %s", status, body)
			}
			okLogged := strings.Contains(e.logs.String(), `"msg":"request"`)
			e.do("GET", "/v1/no-such-endpoint", clientKey, "")
			errLogged := strings.Count(e.logs.String(), `"msg":"request"`) > map[bool]int{true: 1, false: 0}[okLogged]
			if okLogged != tt.okLine || errLogged != tt.error {
				t.Errorf("access log %q: 200 logged %v, 404 logged %v; want %v, %v", tt.mode, okLogged, errLogged, tt.okLine, tt.error)
			}
			e.primary.set("fail")
			e.do("POST", "/v1/tasks/triage", clientKey, ticketBody)
			if !strings.Contains(e.logs.String(), `"msg":"attempt failed"`) {
				t.Errorf("access log %q: a degraded answer's failed attempt was not logged", tt.mode)
			}
		})
	}
}
