package cascade

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cache"
	"github.com/jonboulle/clockwork"
)

// A route's cache answers a request it saw when every tier fails, complete or streamed (the
// caller streams the cached answer whole), never to another tenant or another request, and
// not past its ttl.
func TestRouteCache(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	store, err := cache.New(cache.Options{MaxEntries: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	p := &streamer{
		complete: func(context.Context, *afloat.Request) (*afloat.Response, error) {
			if down.Load() {
				return nil, &afloat.ProviderError{Status: 503, Kind: afloat.Unavailable}
			}
			return &afloat.Response{Content: "Hello there", FinishReason: "stop", Model: "m-1", Usage: afloat.Usage{InputTokens: 5, OutputTokens: 2}}, nil
		},
		recv: words("Hello", " there"),
		open: func(context.Context) error {
			if down.Load() {
				return &afloat.ProviderError{Status: 503, Kind: afloat.Unavailable}
			}
			return nil
		},
	}
	e, err := New(Config{Clock: clk, Providers: []ProviderConfig{{Name: "p0", Provider: p, Retry: RetryConfig{Max: -1}}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance,
		Cascade: []RouteTier{{Provider: "p0"}}, Cache: &Cache{Store: store, TTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	acme := WithTenant(context.Background(), "acme")
	if rep, err := r.Complete(acme, hi); err != nil || rep.Source != afloat.SourceModel {
		t.Fatalf("healthy: %v %+v", err, rep)
	}
	other := &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "streamed"}}}
	var c collector
	if _, err := r.Stream(acme, other, c.emit); err != nil || c.text.String() != "Hello there" {
		t.Fatalf("healthy stream: %v %q", err, c.text.String())
	}

	down.Store(true)
	clk.Advance(10 * time.Minute)
	rep, err := r.Complete(acme, hi)
	if err != nil || rep.Source != afloat.SourceCache || !rep.Degraded || rep.Response.Content != "Hello there" ||
		rep.Response.Model != "m-1" || rep.Usage.Cost != 0 || !rep.CachedAt.Equal(clk.Now().Add(-10*time.Minute)) || rep.Reason == "" {
		t.Fatalf("during the outage: %v, %+v", err, rep)
	}
	var none collector
	rep, err = r.Stream(acme, other, none.emit)
	if err != nil || rep.Source != afloat.SourceCache || rep.Response.Content != "Hello there" || none.text.Len() != 0 {
		t.Fatalf("a stream during the outage: %v, %+v, emitted %q (the caller streams a cached answer)", err, rep, none.text.String())
	}
	if _, err := r.Complete(WithTenant(context.Background(), "globex"), hi); !errors.Is(err, ErrExhausted) {
		t.Fatalf("another tenant: %v; want exhausted", err)
	}
	if _, err := r.Complete(acme, &afloat.Request{Messages: hi.Messages, MaxTokens: 10}); !errors.Is(err, ErrExhausted) {
		t.Fatalf("another request: %v; want exhausted", err)
	}
	clk.Advance(time.Hour)
	if _, err := r.Complete(acme, hi); !errors.Is(err, ErrExhausted) {
		t.Fatalf("past the ttl: %v; want exhausted", err)
	}
}
