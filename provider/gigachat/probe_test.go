package gigachat

import (
	"errors"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

const modelsPath = "/api/v1/models"

func TestProbe(t *testing.T) {
	tests := []struct {
		name       string
		models     []string // the models list's answers in turn
		oauth      string   // the token endpoint's answer; "" means oauth_ok.http
		kind       afloat.Kind
		status     int
		errHas     string // "" means the probe passes
		wantTokens int
		wantCalls  int
	}{
		{name: "ok", models: []string{"models_ok.http"}, wantTokens: 1, wantCalls: 1},
		{name: "401 refreshes once", models: []string{"err_401_unauthorized.http", "models_ok.http"}, wantTokens: 2, wantCalls: 2},
		{name: "401 twice is unusable", models: []string{"err_401_unauthorized.http"}, kind: afloat.Unusable, status: 401,
			errHas: "Unauthorized", wantTokens: 2, wantCalls: 2},
		{name: "402", models: []string{"err_402_payment_required.http"}, kind: afloat.Unusable, status: 402, errHas: "Payment Required",
			wantTokens: 1, wantCalls: 1},
		{name: "503", models: []string{"err_503_unavailable.http"}, kind: afloat.Unavailable, status: 503, errHas: "Service Unavailable",
			wantTokens: 1, wantCalls: 1},
		{name: "token endpoint down", models: []string{"models_ok.http"}, oauth: "oauth_503.http", kind: afloat.Unavailable, status: 503,
			errHas: "token endpoint", wantTokens: 1, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fixture.NewServer(t)
			oauth := tt.oauth
			if oauth == "" {
				oauth = "oauth_ok.http"
			}
			srv.Handle(authPath, read(t, oauth), read(t, "oauth_ok_second.http"))
			for _, m := range tt.models {
				srv.Handle(modelsPath, read(t, m))
			}
			c := newClient(t, srv, nil)
			err := c.Probe(t.Context())
			if n := len(srv.Requests(authPath)); n != tt.wantTokens {
				t.Errorf("%d token exchanges, want %d", n, tt.wantTokens)
			}
			calls := srv.Requests(modelsPath)
			if len(calls) != tt.wantCalls {
				t.Fatalf("%d probes sent, want %d", len(calls), tt.wantCalls)
			}
			if len(calls) > 0 && (calls[0].Method != "GET" || calls[0].Header.Get("Authorization") != "Bearer "+tokenOne) {
				t.Errorf("probe sent %s with headers %v", calls[0].Method, calls[0].Header)
			}
			if len(srv.Requests(chatPath)) != 0 {
				t.Error("probe sent a chat")
			}
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("Probe = %v, want nil", err)
				}
				return
			}
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != tt.status || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Probe = %v, want a %s error of status %d saying %q", err, tt.kind, tt.status, tt.errHas)
			}
			noSecrets(t, "probe error", err.Error())
		})
	}
}

func TestContinueRefusedUnsent(t *testing.T) {
	srv := server(t, "chat_ok.http")
	c := newClient(t, srv, nil)
	if got := c.Continuation(); got != "none" {
		t.Errorf("Continuation() = %q, want none", got)
	}
	req := &afloat.Request{Continue: true, Messages: []afloat.Message{hello.Messages[0], {Role: afloat.RoleAssistant, Content: "Прив"}}}
	for _, call := range fixture.Calls(t.Context(), c, req) {
		err := call.Do()
		var pe *afloat.ProviderError
		if !errors.As(err, &pe) || pe.Kind != afloat.Contract || pe.Status != 0 || !strings.Contains(err.Error(), "cannot continue") {
			t.Errorf("%s: err = %v, want an unsent contract error", call.Name, err)
		}
	}
	if n := len(srv.Requests(chatPath)) + len(srv.Requests(authPath)); n != 0 {
		t.Errorf("sent %d requests, want none", n)
	}
}
