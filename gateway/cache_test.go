package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cache"
	"github.com/afloat-dev/afloat/cascade"
)

// withCachedRoute adds route "cached" (primary then backup) with an answer cache.
func withCachedRoute(t *testing.T) envOption {
	return func(cfg *Config) {
		store, err := cache.New(cache.Options{MaxEntries: 100})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		r, err := cfg.Engine.Route(cascade.RouteConfig{Name: "cached", Criticality: afloat.Assistance, Budget: 5 * time.Second,
			Cascade: []cascade.RouteTier{{Provider: "primary"}, {Provider: "backup"}}, Cache: &cascade.Cache{Store: store, TTL: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		routes := map[string]*cascade.Route{"cached": r}
		for name, other := range cfg.Routes {
			routes[name] = other
		}
		cfg.Routes = routes
	}
}

// During an outage a chat route with a cache answers a request it saw, complete or streamed,
// marked by X-Afloat-Source: cache and the afloat extension's cached_at; another tenant's
// same request is not answered from it.
func TestChatAnsweredFromTheCache(t *testing.T) {
	e := newEnv(t, withCachedRoute(t))
	e.primary.answer = "Ваш заказ в пути."
	body := strings.Replace(chatBody, "support-agent", "cached", 1)
	stream := strings.Replace(body, `"messages"`, `"stream": true, "messages"`, 1)
	if status, hdr, b := e.do("POST", "/v1/chat/completions", clientKey, body); status != 200 || hdr.Get("X-Afloat-Source") != "model" {
		t.Fatalf("healthy: %d %v %s", status, hdr, b)
	}
	e.primary.set("fail")
	e.backup.set("fail")

	status, hdr, b := e.do("POST", "/v1/chat/completions", clientKey, body)
	if status != 200 || hdr.Get("X-Afloat-Source") != "cache" || hdr.Get("X-Afloat-Degraded") != "true" || hdr.Get("X-Afloat-Provider") != "primary" {
		t.Fatalf("during the outage: %d %v %s", status, hdr, b)
	}
	if at, err := time.Parse(time.RFC3339, hdr.Get("X-Afloat-Cached-At")); err != nil || time.Since(at) > time.Minute {
		t.Fatalf("X-Afloat-Cached-At %q: %v", hdr.Get("X-Afloat-Cached-At"), err)
	}
	var c struct {
		Choices []struct{ Message struct{ Content string } }
		Afloat  struct {
			Source   string
			CachedAt *time.Time `json:"cached_at"`
			Degraded bool
		}
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || c.Choices[0].Message.Content != "Ваш заказ в пути." || c.Afloat.Source != "cache" || c.Afloat.CachedAt == nil || !c.Afloat.Degraded {
		t.Fatalf("completion %s", b)
	}

	status, hdr, b = e.do("POST", "/v1/chat/completions", clientKey, stream)
	if status != 200 || hdr.Get("X-Afloat-Source") != "cache" || hdr.Get("X-Afloat-Cached-At") == "" || !strings.Contains(string(b), "Ваш заказ в пути.") || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("a stream during the outage: %d %v %s", status, hdr, b)
	}

	status, _, b = e.do("GET", "/admin/status", adminToken, "")
	var st struct {
		Routes map[string]struct {
			Cache *struct {
				TTL     string `json:"ttl"`
				Serve   string `json:"serve"`
				Entries int    `json:"entries"`
			} `json:"cache"`
		} `json:"routes"`
		Tasks map[string]struct {
			Cache *struct{} `json:"cache"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(b, &st); err != nil || status != 200 {
		t.Fatalf("status %d %s: %v", status, b, err)
	}
	if c := st.Routes["cached"].Cache; c == nil || c.TTL != "1h0m0s" || c.Serve != "on_error" || c.Entries != 1 {
		t.Fatalf("the cached route's cache in /admin/status: %+v", c)
	}
	if st.Routes["support-agent"].Cache != nil || st.Tasks["triage"].Cache != nil {
		t.Fatal("a route or task without a cache shows one")
	}

	if status, _, b := e.do("POST", "/v1/chat/completions", otherKey, body); status != 503 {
		t.Fatalf("another tenant during the outage: %d %s; want 503, not tenant acme's answer", status, b)
	}
}
