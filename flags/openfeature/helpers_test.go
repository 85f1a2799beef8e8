package openfeature

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/jonboulle/clockwork"
	of "github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/open-feature/go-sdk/openfeature/memprovider"
)

func pct(p int) *int { return &p }

// flag is an in-memory flag serving v.
func flag(v any) memprovider.InMemoryFlag {
	return memprovider.InMemoryFlag{State: memprovider.Enabled, DefaultVariant: "v", Variants: map[string]any{"v": v}}
}

// dynamicFlag is an in-memory flag serving what v returns at each evaluation: it changes
// without the provider raising an event.
func dynamicFlag(v func() any) memprovider.InMemoryFlag {
	eval := func(memprovider.InMemoryFlag, of.FlattenedContext) (any, of.ProviderResolutionDetail) {
		return v(), of.ProviderResolutionDetail{Reason: of.TargetingMatchReason}
	}
	return memprovider.InMemoryFlag{State: memprovider.Enabled, ContextEvaluator: &eval}
}

// bind sets provider on an OpenFeature API of the test's own, waits until it is ready, and
// returns a client of it.
func bind(t *testing.T, provider of.FeatureProvider) of.IClient {
	t.Helper()
	ctx := context.Background()
	api := isolated.NewAPI()
	t.Cleanup(func() { _ = api.Shutdown(ctx) })
	if err := api.SetProviderAndWait(ctx, provider); err != nil {
		t.Fatalf("SetProviderAndWait: %v", err)
	}
	return api.NewClient()
}

// team is the team's flag system: an in-memory provider with flags, and a client of it.
func team(t *testing.T, fl map[string]memprovider.InMemoryFlag) (*memprovider.InMemoryProvider, of.IClient) {
	t.Helper()
	p := memprovider.NewInMemoryProvider(fl)
	return p, bind(t, p)
}

// hearing is a client that passes on the handlers of one event type only, as if its
// provider raised no other events; "" passes on none, so only the refresh interval refreshes.
type hearing struct {
	of.IClient
	only of.EventType
}

func (h hearing) AddHandler(e of.EventType, c of.EventCallback) {
	if e == h.only {
		h.IClient.AddHandler(e, c)
	}
}

func (h hearing) RemoveHandler(e of.EventType, c of.EventCallback) {
	if e == h.only {
		h.IClient.RemoveHandler(e, c)
	}
}

// harness is a Source on a fake clock whose refreshes the test waits on.
type harness struct {
	src       *Source
	clock     *clockwork.FakeClock
	refreshes chan Refresh
}

// start returns a started Source; cfg.Clock and cfg.OnRefresh are the harness's. The
// first refresh, made by NewSource, is consumed.
func start(t *testing.T, client of.IClient, tasks []string, cfg SourceConfig) *harness {
	t.Helper()
	h := &harness{clock: clockwork.NewFakeClock(), refreshes: make(chan Refresh, 64)}
	done := make(chan struct{})
	cfg.Clock = h.clock
	cfg.OnRefresh = func(r Refresh) {
		select {
		case h.refreshes <- r:
		case <-done:
		}
	}
	src, err := NewSource(context.Background(), client, tasks, cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	t.Cleanup(src.Close)
	t.Cleanup(func() { close(done) }) // first, so that Close never waits on a full channel
	h.src = src
	<-h.refreshes
	return h
}

// waitFor returns the first refresh for which ok holds, skipping the others (such as the one
// a provider's PROVIDER_READY causes at start).
func (h *harness) waitFor(t *testing.T, what string, ok func(*flags.Document) bool) Refresh {
	t.Helper()
	failsafe := time.NewTimer(10 * time.Second) // not a wait for the state: a hung test fails
	defer failsafe.Stop()
	for {
		select {
		case r := <-h.refreshes:
			if ok(r.Doc) {
				return r
			}
		case <-failsafe.C:
			t.Fatalf("no refresh with %s", what)
		}
	}
}

// next returns the next refresh.
func (h *harness) next(t *testing.T) Refresh {
	t.Helper()
	return h.waitFor(t, "any document", func(*flags.Document) bool { return true })
}

// doc returns the document the Source serves.
func (h *harness) doc(t *testing.T) *flags.Document {
	t.Helper()
	d, err := h.src.Flags(context.Background())
	if err != nil {
		t.Fatalf("Flags: %v", err)
	}
	return d
}

// sameTask reports whether a and b are the same flags: a nil blocklist is an empty one and a
// nil rollout is 100, as in flags.Document.Allow.
func sameTask(a, b flags.TaskFlags) bool {
	return a.Kill == b.Kill && slices.Equal(a.Blocklist, b.Blocklist) && a.Rollout() == b.Rollout()
}

// logRecorder is a slog.Handler keeping the records it receives.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// levels returns the levels of the records kept, in order.
func (l *logRecorder) levels() []slog.Level {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Level
	for _, r := range l.recs {
		out = append(out, r.Level)
	}
	return out
}
