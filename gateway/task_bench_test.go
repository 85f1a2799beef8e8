package gateway

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// longTicket is an 8 KiB ticket, the size of the bench tool's overload call.
var longTicket = []byte(fmt.Sprintf(`{"input": {"message": %q}}`, strings.Repeat("The site does not open since this morning. ", 195)))

// BenchmarkTaskCall is the gateway's own work on one task call with an 8 KiB ticket: asked
// of a loopback model (the critical path), and shed (its heuristic, no provider), so that
// what shedding saves is measured beside what it costs.
func BenchmarkTaskCall(b *testing.B) {
	for _, c := range []struct {
		name     string
		task     string
		pressure time.Duration
	}{{"model", "triage", 0}, {"shed", "triage", time.Second}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			e.pressure.Store(int64(c.pressure))
			h := e.srv.Config.Handler
			b.ReportAllocs()
			b.SetBytes(int64(len(longTicket)))
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/tasks/"+c.task, bytes.NewReader(longTicket))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+clientKey)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code, rec.Body.String())
				}
			}
		})
	}
}
