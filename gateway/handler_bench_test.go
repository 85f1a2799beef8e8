package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkChatHandler is the gateway's own work on one non-streamed chat completion:
// decode, route, the OpenAI adapter's encode and decode against a loopback upstream,
// encode. The upstream round trip is included; compare with BenchmarkAddedLatency.
func BenchmarkChatHandler(b *testing.B) {
	up := benchUpstream(b)
	gwSrv := benchGateway(b, up.URL)
	h := gwSrv.Config.Handler
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(benchBody))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}
