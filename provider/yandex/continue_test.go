package yandex

import (
	"errors"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestContinueRefusedUnsent(t *testing.T) {
	srv := replay(t, "completion_ok.http")
	c := newClient(t, srv.URL, nil)
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
	if n := len(srv.Requests(completionPath)); n != 0 {
		t.Errorf("sent %d requests, want none", n)
	}
}

// TestNoProbe: Foundation Models have no call that bills nothing, so the client offers no
// probe rather than a billed one under the name.
func TestNoProbe(t *testing.T) {
	if _, ok := any(newClient(t, "http://127.0.0.1", nil)).(afloat.Prober); ok {
		t.Error("the client is an afloat.Prober")
	}
}
