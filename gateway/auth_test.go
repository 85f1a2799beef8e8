package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTwoAuthorizationHeaders: a request with two Authorization headers is refused with 400
// whichever comes first, on client, admin and review endpoints alike, and no call runs.
func TestTwoAuthorizationHeaders(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name          string
		method, path  string
		first, second string
	}{
		{"task, valid key first", "POST", "/v1/tasks/triage", clientKey, "ck-wrong-0000000000"},
		{"task, valid key last", "POST", "/v1/tasks/triage", "ck-wrong-0000000000", clientKey},
		{"task, two tenants", "POST", "/v1/tasks/triage", clientKey, otherKey},
		{"chat", "POST", "/v1/chat/completions", clientKey, otherKey},
		{"admin, admin token first", "GET", "/admin/status", adminToken, clientKey},
		{"admin, admin token last", "GET", "/admin/status", clientKey, adminToken},
		{"review API", "GET", "/admin/reviews", adminToken, adminToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"input":{"message":"hi"}}`
			if tc.path == "/v1/chat/completions" {
				body = `{"model":"support-agent","messages":[{"role":"user","content":"hi"}]}`
			}
			req, err := http.NewRequest(tc.method, e.srv.URL+tc.path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Add("Authorization", "Bearer "+tc.first)
			req.Header.Add("Authorization", "Bearer "+tc.second)
			before := e.primary.calls.Load()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
			}
			if got := decode[map[string]apiError](t, b)["error"].Code; got != "invalid_authorization" {
				t.Errorf("code %q, want invalid_authorization", got)
			}
			if n := e.primary.calls.Load() - before; n != 0 {
				t.Errorf("%d upstream calls, want none", n)
			}
		})
	}
	// One header still works.
	if status, _, b := e.do("GET", "/admin/status", adminToken, ""); status != http.StatusOK {
		t.Fatalf("one admin token: %d %s", status, b)
	}
}

// TestTenantKeyIsAdminToken: a tenant key equal to the admin token is refused at start, since
// its bearer would be taken for the admin.
func TestTenantKeyIsAdminToken(t *testing.T) {
	e := newEnv(t)
	_, err := New(Config{Engine: e.engine, AdminToken: adminToken,
		Tenants: map[string][]string{"acme": {clientKey}, "globex": {otherKey, adminToken}}})
	if err == nil || !strings.Contains(err.Error(), `tenant "globex" is the admin token`) {
		t.Fatalf("err = %v, want the collision refused", err)
	}
	if strings.Contains(err.Error(), adminToken) {
		t.Errorf("the error quotes the token: %v", err)
	}
}
