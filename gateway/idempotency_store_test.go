package gateway

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/telemetry"
)

// TestIdempotencyKeyReusedAfterARestartIs422: after a restart the gateway's memory of keys is
// gone; a key reused with another body is still refused, by the store, with the 422 the
// gateway's own cache answers — never the first item's review id.
func TestIdempotencyKeyReusedAfterARestartIs422(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afloat.db")
	e := newReviewEnv(t, func(m *telemetry.Metrics) review.Store {
		s, err := review.OpenSQLite(context.Background(), path, review.Options{Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	e.queue(clientKey, "Idempotency-Key", "order-42")
	e.srv = e.newGW() // a restart: a new gateway over the same store
	const other = `{"input": {"message": "another message"}}`
	status, _, body := e.do("POST", "/v1/tasks/moderation", clientKey, other, "Idempotency-Key", "order-42")
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "idempotency_key_reused") {
		t.Fatalf("reused key with another body: %d %s, want 422 idempotency_key_reused", status, body)
	}
	if strings.Contains(e.logs.String(), "review queue cannot commit") {
		t.Error("a reused key was logged as a store failure")
	}
}
