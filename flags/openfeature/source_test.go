package openfeature

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/flags"
	of "github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/open-feature/go-sdk/openfeature/memprovider"
)

func TestSourceRefreshesOnConfigurationChange(t *testing.T) {
	tests := []struct {
		name   string
		update map[string]memprovider.InMemoryFlag
		ok     func(*flags.Document) bool // the change has arrived
		on     map[string]bool            // task → on for tenant acme, once it has
	}{
		{
			"task kill",
			map[string]memprovider.InMemoryFlag{"afloat.triage.kill": flag(true)},
			func(d *flags.Document) bool { return d.Tasks["triage"].Kill },
			map[string]bool{"triage": false, "summarize": true},
		},
		{
			"global kill",
			map[string]memprovider.InMemoryFlag{"afloat.kill": flag(true)},
			func(d *flags.Document) bool { return d.Kill },
			map[string]bool{"triage": false, "summarize": false},
		},
		{
			"blocklist",
			map[string]memprovider.InMemoryFlag{"afloat.summarize.blocklist": flag([]any{"acme"})},
			func(d *flags.Document) bool { return len(d.Tasks["summarize"].Blocklist) > 0 },
			map[string]bool{"triage": true, "summarize": false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prov, client := team(t, map[string]memprovider.InMemoryFlag{"afloat.triage.kill": flag(false)})
			// Not PROVIDER_READY, which the SDK sends on registration: a refresh it caused
			// could land after the update. The fake clock never moves either, so only the
			// PROVIDER_CONFIGURATION_CHANGED of the update can bring it.
			h := start(t, hearing{client, of.ProviderConfigChange}, []string{"triage", "summarize"}, SourceConfig{})
			if d := h.doc(t); !d.Allow("triage", "acme") || !d.Allow("summarize", "acme") {
				t.Fatalf("before the change: %+v, want every task on", d)
			}

			prov.UpdateFlags(tt.update)
			h.waitFor(t, "the change", tt.ok)
			d := h.doc(t)
			for task, want := range tt.on {
				if got := d.Allow(task, "acme"); got != want {
					t.Errorf("Allow(%s, acme) = %v, want %v", task, got, want)
				}
			}
		})
	}
}

// gated is a provider whose initialization waits until release is closed.
type gated struct {
	*memprovider.InMemoryProvider
	release chan struct{}
}

func (g *gated) Init(of.EvaluationContext) error { <-g.release; return nil }
func (g *gated) Shutdown()                       {}

func TestSourceFallsBackUntilProviderReady(t *testing.T) {
	ctx := context.Background()
	api := isolated.NewAPI()
	t.Cleanup(func() { _ = api.Shutdown(ctx) })
	p := &gated{
		InMemoryProvider: memprovider.NewInMemoryProvider(map[string]memprovider.InMemoryFlag{"afloat.triage.kill": flag(false)}),
		release:          make(chan struct{}),
	}
	if err := api.SetProvider(ctx, p); err != nil { // NOT_READY until released
		t.Fatal(err)
	}
	logs := &logRecorder{}
	h := start(t, api.NewClient(), []string{"triage"}, SourceConfig{
		Fallback: &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}},
		Logger:   slog.New(logs),
	})
	if d := h.doc(t); d.Allow("triage", "acme") {
		t.Fatal("provider not ready: triage is on, want the fallback's kill")
	}
	if err := h.src.Err(); err == nil || !strings.Contains(err.Error(), string(of.ProviderNotReadyCode)) {
		t.Fatalf("Err = %v, want %s", err, of.ProviderNotReadyCode)
	}

	close(p.release)
	r := h.waitFor(t, "the provider's flags", func(d *flags.Document) bool { return !d.Tasks["triage"].Kill })
	if r.Err != nil {
		t.Fatalf("ready: Err = %v", r.Err)
	}
	if got, want := logs.levels(), []slog.Level{slog.LevelWarn, slog.LevelInfo}; !slices.Equal(got, want) {
		t.Fatalf("logged %v, want %v (failed, recovered)", got, want)
	}
}

func TestSourceFallback(t *testing.T) {
	fallback := &flags.Document{Kill: true, Tasks: map[string]flags.TaskFlags{
		"triage":     {Kill: true, Blocklist: []string{"t1"}, RolloutPct: pct(30)},
		"moderation": {Kill: true}, // not given to NewSource
	}}
	disabled := flag(false)
	disabled.State = memprovider.Disabled
	tests := []struct {
		name    string
		flags   map[string]memprovider.InMemoryFlag // nil: no provider at all
		kill    bool
		tasks   map[string]flags.TaskFlags
		wantErr string // "" for none
	}{
		{"no key known", map[string]memprovider.InMemoryFlag{}, true, fallback.Tasks, ""},
		{"no provider", nil, true, fallback.Tasks, ""},
		{
			"one key known",
			map[string]memprovider.InMemoryFlag{"afloat.triage.kill": flag(false), "afloat.kill": flag(false)},
			false,
			map[string]flags.TaskFlags{"triage": {Blocklist: []string{"t1"}, RolloutPct: pct(30)}},
			"",
		},
		{
			"disabled flag",
			map[string]memprovider.InMemoryFlag{"afloat.triage.kill": disabled},
			true, fallback.Tasks, "",
		},
		{
			"wrong type",
			map[string]memprovider.InMemoryFlag{"afloat.triage.kill": flag("no"), "afloat.kill": flag(1)},
			true, fallback.Tasks, "afloat.kill: error code: TYPE_MISMATCH",
		},
		{
			"task outside the list is not asked",
			map[string]memprovider.InMemoryFlag{"afloat.moderation.kill": flag(false)},
			true, map[string]flags.TaskFlags{"moderation": {Kill: true}}, "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var client of.IClient = isolated.NewAPI().NewClient() // the SDK's no-op provider
			if tt.flags != nil {
				_, client = team(t, tt.flags)
			}
			h := start(t, client, []string{"triage", "summarize"}, SourceConfig{Fallback: fallback})
			d := h.doc(t)
			if d.Kill != tt.kill {
				t.Errorf("Kill = %v, want %v", d.Kill, tt.kill)
			}
			for task, want := range tt.tasks {
				if got := d.Tasks[task]; !sameTask(got, want) {
					t.Errorf("%s = %+v, want %+v", task, got, want)
				}
			}
			if got := d.Tasks["summarize"]; !sameTask(got, flags.TaskFlags{}) {
				t.Errorf("summarize, known to neither = %+v, want the zero flags", got)
			}
			err := h.src.Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Err = %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Err = %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

func TestSourceRollout(t *testing.T) {
	fallback := &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: pct(30)}}}
	tests := []struct {
		name  string
		value any // nil: the flag is absent
		want  int
		bad   bool
	}{
		{"absent", nil, 30, false},
		{"zero", 0, 0, false},
		{"half", 50, 50, false},
		{"all", int64(100), 100, false},
		{"above 100", 101, 30, true},
		{"negative", -1, 30, true},
		{"string", "50", 30, true},
		{"fraction", 12.5, 30, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fl := map[string]memprovider.InMemoryFlag{}
			if tt.value != nil {
				fl["afloat.triage.rollout_pct"] = flag(tt.value)
			}
			_, client := team(t, fl)
			h := start(t, client, []string{"triage"}, SourceConfig{Fallback: fallback})
			if got := h.doc(t).Tasks["triage"].Rollout(); got != tt.want {
				t.Errorf("rollout = %d, want %d", got, tt.want)
			}
			err := h.src.Err()
			if tt.bad != (err != nil) || (err != nil && !strings.Contains(err.Error(), "afloat.triage.rollout_pct")) {
				t.Errorf("Err = %v, want an error on afloat.triage.rollout_pct: %v", err, tt.bad)
			}
		})
	}
}

func TestSourceBlocklist(t *testing.T) {
	fallback := &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Blocklist: []string{"fallback"}}}}
	tests := []struct {
		name  string
		value any
		want  []string
		bad   bool
	}{
		{"list", []any{"acme", "globex"}, []string{"acme", "globex"}, false},
		{"string list", []string{"acme"}, []string{"acme"}, false},
		{"object", map[string]any{"tenants": []any{"acme"}}, []string{"acme"}, false},
		{"empty list", []any{}, nil, false},
		{"not a string", []any{"acme", 3.0}, []string{"fallback"}, true},
		{"object without tenants", map[string]any{"ids": []any{"acme"}}, []string{"fallback"}, true},
		{"a string", "acme", []string{"fallback"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, client := team(t, map[string]memprovider.InMemoryFlag{"afloat.triage.blocklist": flag(tt.value)})
			h := start(t, client, []string{"triage"}, SourceConfig{Fallback: fallback})
			if got := h.doc(t).Tasks["triage"].Blocklist; !slices.Equal(got, tt.want) {
				t.Errorf("blocklist = %q, want %q", got, tt.want)
			}
			if err := h.src.Err(); tt.bad != (err != nil) {
				t.Errorf("Err = %v, want an error: %v", err, tt.bad)
			}
		})
	}
}

func TestSourceRefreshInterval(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		want     time.Duration
	}{
		{"default", 0, time.Second},
		{"set", 250 * time.Millisecond, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kill atomic.Bool
			_, client := team(t, map[string]memprovider.InMemoryFlag{
				"afloat.triage.kill": dynamicFlag(func() any { return kill.Load() }),
			})
			h := start(t, hearing{IClient: client}, []string{"triage"}, SourceConfig{RefreshInterval: tt.interval})

			kill.Store(true) // no event: only the interval can bring it
			h.clock.Advance(tt.want - time.Millisecond)
			if h.doc(t).Tasks["triage"].Kill {
				t.Fatal("refreshed before the interval")
			}
			h.clock.Advance(time.Millisecond)
			h.waitFor(t, "the kill", func(d *flags.Document) bool { return d.Tasks["triage"].Kill })
		})
	}
}

func TestSourceFlagsDoesNotEvaluate(t *testing.T) {
	var evals atomic.Int64
	_, client := team(t, map[string]memprovider.InMemoryFlag{
		"afloat.triage.kill": dynamicFlag(func() any { evals.Add(1); return false }),
	})
	h := start(t, hearing{IClient: client}, []string{"triage"}, SourceConfig{})
	before := evals.Load()
	for range 1000 {
		h.doc(t)
	}
	if got := evals.Load(); got != before {
		t.Fatalf("1000 Flags calls made %d evaluations, want none", got-before)
	}
	h.clock.Advance(time.Second)
	h.next(t)
	if got := evals.Load(); got != before+1 {
		t.Fatalf("a refresh made %d evaluations of the flag, want 1", got-before)
	}
}

func TestSourceLogsErrorsOncePerChange(t *testing.T) {
	var rollout atomic.Int64
	rollout.Store(150)
	_, client := team(t, map[string]memprovider.InMemoryFlag{
		"afloat.triage.rollout_pct": dynamicFlag(func() any { return rollout.Load() }),
	})
	logs := &logRecorder{}
	h := start(t, hearing{IClient: client}, []string{"triage"}, SourceConfig{Logger: slog.New(logs)})
	tick := func() Refresh { h.clock.Advance(time.Second); return h.next(t) }
	warn, info := slog.LevelWarn, slog.LevelInfo

	steps := []struct {
		name    string
		rollout int64
		levels  []slog.Level
		errors  uint64
	}{
		{"same error again", 150, []slog.Level{warn}, 1},
		{"and again", 150, []slog.Level{warn}, 1},
		{"another error", 200, []slog.Level{warn, warn}, 2},
		{"recovered", 50, []slog.Level{warn, warn, info}, 2},
		{"still fine", 50, []slog.Level{warn, warn, info}, 2},
	}
	if got := logs.levels(); !slices.Equal(got, []slog.Level{warn}) || h.src.Errors() != 1 {
		t.Fatalf("after the first evaluation: logged %v, Errors %d; want [WARN], 1", got, h.src.Errors())
	}
	for _, s := range steps {
		rollout.Store(s.rollout)
		r := tick()
		if got := logs.levels(); !slices.Equal(got, s.levels) || h.src.Errors() != s.errors {
			t.Fatalf("%s: logged %v, Errors %d; want %v, %d", s.name, got, h.src.Errors(), s.levels, s.errors)
		}
		if (r.Err == nil) != (s.rollout <= 100) {
			t.Fatalf("%s: Err = %v", s.name, r.Err)
		}
	}
}

// recording is a client that records its handlers.
type recording struct {
	of.IClient
	added, removed map[of.EventType]of.EventCallback
}

func (r *recording) AddHandler(e of.EventType, c of.EventCallback) {
	r.added[e] = c
	r.IClient.AddHandler(e, c)
}

func (r *recording) RemoveHandler(e of.EventType, c of.EventCallback) {
	r.removed[e] = c
	r.IClient.RemoveHandler(e, c)
}

func TestSourceClose(t *testing.T) {
	_, client := team(t, map[string]memprovider.InMemoryFlag{"afloat.triage.kill": flag(true)})
	rec := &recording{IClient: client, added: map[of.EventType]of.EventCallback{}, removed: map[of.EventType]of.EventCallback{}}
	h := start(t, rec, []string{"triage"}, SourceConfig{})
	for _, e := range []of.EventType{of.ProviderReady, of.ProviderConfigChange} {
		if rec.added[e] == nil {
			t.Errorf("no handler for %s", e)
		}
	}

	h.src.Close()
	h.src.Close()
	if len(rec.removed) != len(rec.added) {
		t.Errorf("removed handlers for %d events, want %d", len(rec.removed), len(rec.added))
	}
	for e, c := range rec.added {
		if rec.removed[e] != c {
			t.Errorf("handler for %s not removed", e)
		}
	}
	if d := h.doc(t); !d.Tasks["triage"].Kill {
		t.Errorf("after Close: %+v, want the last document", d)
	}
}

func TestNewSourceInvalid(t *testing.T) {
	_, client := team(t, nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		client of.IClient
		tasks  []string
		cfg    SourceConfig
	}{
		{"nil client", context.Background(), nil, nil, SourceConfig{}},
		{"empty task", context.Background(), client, []string{"triage", ""}, SourceConfig{}},
		{"negative interval", context.Background(), client, nil, SourceConfig{RefreshInterval: -time.Second}},
		{"invalid fallback", context.Background(), client, nil, SourceConfig{
			Fallback: &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: pct(101)}}},
		}},
		{"cancelled", cancelled, client, []string{"triage"}, SourceConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := NewSource(tt.ctx, tt.client, tt.tasks, tt.cfg)
			if err == nil {
				src.Close()
				t.Fatal("NewSource succeeded")
			}
		})
	}
}
