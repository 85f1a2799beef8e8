package gateway

import (
	"slices"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat/cascade"
)

// TestChatModelResolution: chat's model is a route's name, else an alias, else the default
// route, else 404; whichever, the answer's model is the upstream's and X-Afloat-Route names
// the route.
func TestChatModelResolution(t *testing.T) {
	tests := []struct {
		name   string
		opt    envOption
		model  string
		status int
	}{
		{"route", withAliases, "support-agent", 200},
		{"alias", withAliases, "gpt-4o-mini", 200},
		{"unknown", withAliases, "gpt-9", 404},
		{"default route", func(c *Config) { c.DefaultRoute = "support-agent" }, "gpt-9", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.opt)
			for _, stream := range []string{"false", "true"} {
				status, hdr, body := e.do("POST", "/v1/chat/completions", clientKey,
					`{"model": "`+tt.model+`", "stream": `+stream+`, "messages": [{"role": "user", "content": "hi"}]}`)
				if status != tt.status {
					t.Fatalf("stream %s: status %d, want %d: %s", stream, status, tt.status, body)
				}
				if status != 200 {
					if !strings.Contains(string(body), `"code":"model_not_found"`) {
						t.Errorf("body %s", body)
					}
					continue
				}
				if hdr.Get("X-Afloat-Route") != "support-agent" || !strings.Contains(string(body), `"model":"m"`) {
					t.Errorf("stream %s: route %q, body %s", stream, hdr.Get("X-Afloat-Route"), body)
				}
			}
		})
	}
}

// TestModelsListAliases: /v1/models lists the routes and their aliases by name, each alias
// naming its route; /v1/models/{model} answers for both, and the default route does not make
// every name a model.
func TestModelsListAliases(t *testing.T) {
	e := newEnv(t, withAliases, func(c *Config) { c.DefaultRoute = "support-agent" })
	status, _, body := e.do("GET", "/v1/models", clientKey, "")
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	type model struct {
		ID, Object string
		Afloat     *struct{ Route string }
	}
	list := decode[struct {
		Object string
		Data   []model
	}](t, body)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
		wantRoute := m.ID != "support-agent"
		if m.Object != "model" || (m.Afloat != nil) != wantRoute || (wantRoute && m.Afloat.Route != "support-agent") {
			t.Errorf("entry %+v", m)
		}
	}
	if want := []string{"claude-sonnet-4-5", "gpt-4o-mini", "support-agent"}; list.Object != "list" || !slices.Equal(ids, want) {
		t.Fatalf("models %v, want %v: %s", ids, want, body)
	}
	status, _, body = e.do("GET", "/v1/models/gpt-4o-mini", clientKey, "")
	if m := decode[model](t, body); status != 200 || m.ID != "gpt-4o-mini" || m.Afloat == nil || m.Afloat.Route != "support-agent" {
		t.Errorf("alias: status %d %s", status, body)
	}
	if status, _, body = e.do("GET", "/v1/models/gpt-9", clientKey, ""); status != 404 {
		t.Errorf("unknown model: status %d %s", status, body)
	}
}

// TestAliasesMustLeadToOneRoute: New refuses an alias of no route, an alias that is a route's
// name, and a default route that is no route.
func TestAliasesMustLeadToOneRoute(t *testing.T) {
	e := newEnv(t)
	routes := e.gw.served().routes
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"alias of no route", Config{Models: map[string]string{"gpt-4o": "drafts"}}, `names no route "drafts"`},
		{"alias is a route", Config{Models: map[string]string{"support-agent": "support-agent"}}, "is a route's name"},
		{"default route unknown", Config{DefaultRoute: "drafts"}, `default route "drafts"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Engine, cfg.Routes = e.engine, routes
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("New: %v, want an error saying %q", err, tt.msg)
			}
		})
	}
	cfg := Config{Engine: e.engine, Routes: map[string]*cascade.Route{}, Models: nil, DefaultRoute: ""}
	if _, err := New(cfg); err != nil {
		t.Fatalf("New without aliases: %v", err)
	}
}
