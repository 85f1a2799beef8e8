package gateway

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestIdempotencyKeyReusedAfterARestartIs422: after a restart the gateway's memory of keys is
// gone; a key reused with another body is still refused, by the store, with the 422 the
// gateway's own cache answers — never the first item's review id.
func TestIdempotencyKeyReusedAfterARestartIs422(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afloat.db")
	e := newReviewEnv(t, sqliteAt(t, path))
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

// TestIdempotencyKeyReplaysTheQueuedItemAfterARestart: after a restart, with the provider
// back, a retry of a call that was queued for review gets the first item's 202 again, with
// Idempotent-Replayed, and no model is asked: its caller cannot get a verdict while an
// operator judges the first call.
func TestIdempotencyKeyReplaysTheQueuedItemAfterARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afloat.db")
	e := newReviewEnv(t, sqliteAt(t, path))
	first := e.queue(clientKey, "Idempotency-Key", "order-42")
	e.srv = e.newGW() // a restart: a new gateway over the same store
	e.upstream.set("ok")
	calls := e.upstream.calls.Load()
	status, hdr, body := e.do("POST", "/v1/tasks/moderation", clientKey, modBody, "Idempotency-Key", "order-42")
	res := decode[envelope](t, body)
	if status != http.StatusAccepted || res.ReviewID != first || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after a restart: %d %s (Idempotent-Replayed %q); want 202 with review %s, replayed",
			status, body, hdr.Get("Idempotent-Replayed"), first)
	}
	if n := e.upstream.calls.Load() - calls; n != 0 {
		t.Errorf("the retry asked the provider %d times; want none", n)
	}
}
