package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestCallerSeesTheRejectionReason: GET /v1/reviews/{id} of a rejected item carries the
// operator's reason; a pending or resolved one has none.
func TestCallerSeesTheRejectionReason(t *testing.T) {
	e := newReviewEnv(t, memoryStore)
	a, b := e.queue(clientKey), e.queue(clientKey)
	if code, _, body := e.do("POST", "/admin/reviews/"+a+"/reject", aliceToken, `{"reason": "not a moderation request"}`); code != http.StatusOK {
		t.Fatalf("reject: %d %s", code, body)
	}
	code, _, body := e.do("GET", "/v1/reviews/"+a, clientKey, "")
	v := decode[map[string]any](t, body)
	if code != http.StatusOK || v["status"] != "rejected" || v["reason"] != "not a moderation request" {
		t.Fatalf("rejected item: %d %s, want its reason", code, body)
	}
	if _, _, body := e.do("GET", "/v1/reviews/"+b, clientKey, ""); strings.Contains(string(body), `"reason"`) {
		t.Fatalf("pending item: %s, want no reason", body)
	}
}

// TestReleaseReview: the claiming operator or the admin gives a claim back and the item is
// pending again; another operator's release is 409, an unknown id 404.
func TestReleaseReview(t *testing.T) {
	e := newReviewEnv(t, memoryStore)
	id := e.queue(clientKey)
	release := func(token string, hdr ...string) (int, string) {
		code, _, body := e.do("POST", "/admin/reviews/"+id+"/release", token, "", hdr...)
		return code, string(body)
	}
	claim := func(token string) {
		t.Helper()
		if code, _, body := e.do("POST", "/admin/reviews/"+id+"/claim", token, ""); code != http.StatusOK {
			t.Fatalf("claim: %d %s", code, body)
		}
	}
	pending := func(body string) bool {
		v := decode[reviewItem](t, []byte(body))
		return v.Status == "pending" && v.Operator == nil && v.ClaimedAt == nil
	}

	claim(aliceToken)
	if code, body := release(bobToken); code != http.StatusConflict || !strings.Contains(body, "claimed by alice") {
		t.Fatalf("bob releases alice's claim: %d %s, want 409", code, body)
	}
	if code, body := release(adminToken, OperatorHeader, "bob"); code != http.StatusOK || !pending(body) {
		t.Fatalf("the admin (acting for bob) releases alice's claim: %d %s, want 200 pending", code, body)
	}
	claim(bobToken)
	if code, body := release(bobToken); code != http.StatusOK || !pending(body) {
		t.Fatalf("bob releases his claim: %d %s", code, body)
	}
	if code, body := release(aliceToken); code != http.StatusOK || !pending(body) {
		t.Fatalf("release of a pending item: %d %s, want 200 as it is", code, body)
	}
	claim(aliceToken) // anyone may claim it again
	if code, _, body := e.do("POST", "/admin/reviews/rv_nope/release", adminToken, ""); code != http.StatusNotFound {
		t.Fatalf("unknown id: %d %s, want 404", code, body)
	}
	if code, _, body := e.do("GET", "/admin/reviews/"+id+"/release", aliceToken, ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET release: %d %s, want 405", code, body)
	}
	if code, _ := release(""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
}
