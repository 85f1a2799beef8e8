package openfeature

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/jonboulle/clockwork"
	of "github.com/open-feature/go-sdk/openfeature"
)

// DefaultRefreshInterval is the longest a Source serves a document without evaluating it again:
// DESIGN.md §2 allows no cache longer than a second without push invalidation, and not every
// provider pushes.
const DefaultRefreshInterval = time.Second

// SourceConfig configures a Source. Its zero value is usable: an empty fallback, a refresh
// every second, real time, no logging.
type SourceConfig struct {
	// Fallback is the document in force wherever the flag system has no answer: a key it
	// does not know, a flag it serves disabled, an evaluation error, a value of the wrong type
	// or out of range. It is normally afloat's own config flags. It must be valid
	// (flags.Document.Validate); NewSource keeps its own copy. Tasks it holds that are not
	// given to NewSource are served as they are, without asking the flag system. nil means
	// the zero Document: every task on.
	Fallback *flags.Document
	// RefreshInterval is how often the document is evaluated again even when the provider
	// raised no event, which bounds how stale Flags can be with a provider that does not
	// push its changes. It must not be negative; 0 means DefaultRefreshInterval.
	RefreshInterval time.Duration
	// EvaluationContext is passed to every evaluation. The document is one for all tenants,
	// so it should describe this service, not a tenant. The zero value is empty.
	EvaluationContext of.EvaluationContext
	// Clock drives the refresh interval. nil means real time.
	Clock clockwork.Clock
	// Logger receives one record each time the evaluation errors change: a warning when
	// they appear or differ from the last refresh's, an info when they clear. nil discards.
	Logger *slog.Logger
	// OnRefresh, when set, is called after each evaluation of the document: the first from
	// NewSource before it returns, the others from the Source's goroutine, one at a time.
	// It must not block for long: the next refresh waits for it.
	OnRefresh func(Refresh)
}

// Refresh describes one evaluation of the document, for SourceConfig.OnRefresh.
type Refresh struct {
	// Doc is the document now in force. It must not be modified.
	Doc *flags.Document
	// Err joins the evaluation errors of the refresh, one per key, each of which took its
	// value from the fallback; nil when every flag evaluated or was absent.
	Err error
}

// Source is a flags.Source whose document is evaluated from a flag system through an
// OpenFeature client. Flags does not evaluate: it returns the last document evaluated, which
// is evaluated again when the provider reports PROVIDER_READY or
// PROVIDER_CONFIGURATION_CHANGED, and every SourceConfig.RefreshInterval. A Source is safe
// for concurrent use. Close stops the refreshing.
type Source struct {
	client    of.IClient
	tasks     []string
	fallback  *flags.Document
	evalCtx   of.EvaluationContext
	log       *slog.Logger
	onRefresh func(Refresh)

	cur    atomic.Pointer[snapshot]
	errors atomic.Uint64
	// lastErr is the message of the last refresh's error, "" for none. Only refresh touches
	// it, and refreshes never overlap: the first runs in NewSource, the others in run.
	lastErr string

	handler   of.EventCallback
	poke      chan struct{} // a pending refresh asked for by an event; never closed
	cancel    context.CancelFunc
	stopped   chan struct{}
	closeOnce sync.Once
}

// snapshot is what one refresh produced.
type snapshot struct {
	doc *flags.Document
	err error
}

// NewSource returns a Source evaluating the global kill and, for each of tasks, the flags of
// the package doc through client (an *openfeature.Client, for instance). It evaluates the
// document once before it returns, within ctx, and fails if ctx ends first; the refreshes
// that follow keep ctx's values (so a transaction evaluation context applies to them) but
// not its cancellation. A provider not ready yet is no error: its flags take the fallback
// until it reports ready. A nil client, an empty task name, a negative RefreshInterval and
// an invalid Fallback are errors.
func NewSource(ctx context.Context, client of.IClient, tasks []string, cfg SourceConfig) (*Source, error) {
	if client == nil {
		return nil, errors.New("openfeature: nil client")
	}
	if slices.Contains(tasks, "") {
		return nil, errors.New("openfeature: empty task name")
	}
	if cfg.RefreshInterval < 0 {
		return nil, fmt.Errorf("openfeature: negative refresh interval %v", cfg.RefreshInterval)
	}
	fallback := &flags.Document{Tasks: map[string]flags.TaskFlags{}}
	if cfg.Fallback != nil {
		if err := cfg.Fallback.Validate(); err != nil {
			return nil, fmt.Errorf("openfeature: fallback: %w", err)
		}
		fallback = cfg.Fallback.Clone()
	}
	interval := cfg.RefreshInterval
	if interval == 0 {
		interval = DefaultRefreshInterval
	}
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		client:    client,
		tasks:     slices.Clone(tasks),
		fallback:  fallback,
		evalCtx:   cfg.EvaluationContext,
		log:       log,
		onRefresh: cfg.OnRefresh,
		poke:      make(chan struct{}, 1),
		stopped:   make(chan struct{}),
	}
	if !s.refresh(ctx) {
		return nil, fmt.Errorf("openfeature: first evaluation: %w", ctx.Err())
	}

	// Registered after the first evaluation: a ready provider answers the registration with
	// PROVIDER_READY at once, so a change made in between is not missed.
	handler := func(of.EventDetails) {
		select {
		case s.poke <- struct{}{}:
		default: // a refresh is pending already, and it will see this change too
		}
	}
	s.handler = &handler
	client.AddHandler(of.ProviderReady, s.handler)
	client.AddHandler(of.ProviderConfigChange, s.handler)

	loop, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	ticker := clock.NewTicker(interval) // made here, so that a fake clock can be advanced at once
	go s.run(loop, ticker)
	return s, nil
}

// Flags returns the last document evaluated. It never fails: a flag the flag system could
// not answer holds its fallback value. It keeps working after Close, with the last document.
func (s *Source) Flags(context.Context) (*flags.Document, error) { return s.cur.Load().doc, nil }

// Err returns the evaluation errors of the last refresh, joined, or nil.
func (s *Source) Err() error { return s.cur.Load().err }

// Errors returns how many refreshes found evaluation errors different from the refresh
// before; each was logged once.
func (s *Source) Errors() uint64 { return s.errors.Load() }

// Close stops the refreshing and unregisters the Source's event handlers; it waits for a
// refresh in progress to end. Flags keeps serving the last document. Close may be called
// more than once.
func (s *Source) Close() {
	s.closeOnce.Do(func() {
		s.client.RemoveHandler(of.ProviderReady, s.handler)
		s.client.RemoveHandler(of.ProviderConfigChange, s.handler)
		s.cancel()
		<-s.stopped
	})
}

func (s *Source) run(ctx context.Context, ticker clockwork.Ticker) {
	defer close(s.stopped)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.poke:
		case <-ticker.Chan():
		}
		s.refresh(ctx)
	}
}

// refresh evaluates the document and puts it in force. It reports false, and changes
// nothing, when ctx ended meanwhile: evaluations cut short would put the fallback in force.
func (s *Source) refresh(ctx context.Context) bool {
	doc, err := s.evaluate(ctx)
	if ctx.Err() != nil {
		return false
	}
	s.cur.Store(&snapshot{doc: doc, err: err})
	s.noteErr(err)
	if s.onRefresh != nil {
		s.onRefresh(Refresh{Doc: doc, Err: err})
	}
	return true
}

// noteErr logs and counts err when it differs from the last refresh's.
func (s *Source) noteErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == s.lastErr {
		return
	}
	prev := s.lastErr
	s.lastErr = msg
	if err == nil {
		s.log.Info("openfeature: flag evaluation recovered", "previous", prev)
		return
	}
	s.errors.Add(1)
	s.log.Warn("openfeature: flag evaluation failed, fallback in force", "err", err)
}

// evaluate reads the document from the flag system, key by key, each key defaulting to its
// fallback value.
func (s *Source) evaluate(ctx context.Context) (*flags.Document, error) {
	doc := &flags.Document{Tasks: maps.Clone(s.fallback.Tasks)} // shared values: documents are read-only
	var errs []error
	var err error
	doc.Kill, err = s.boolean(ctx, globalKillKey, s.fallback.Kill)
	errs = append(errs, err)
	for _, task := range s.tasks {
		tf := s.fallback.Tasks[task]
		tf.Kill, err = s.boolean(ctx, taskKey(task, attrKill), tf.Kill)
		errs = append(errs, err)
		tf.Blocklist, err = s.tenants(ctx, taskKey(task, attrBlocklist), tf.Blocklist)
		errs = append(errs, err)
		tf.RolloutPct, err = s.rollout(ctx, taskKey(task, attrRollout), tf.RolloutPct)
		errs = append(errs, err)
		doc.Tasks[task] = tf
	}
	return doc, errors.Join(errs...)
}

func (s *Source) boolean(ctx context.Context, key string, fallback bool) (bool, error) {
	d, err := s.client.BooleanValueDetails(ctx, key, fallback, s.evalCtx)
	if err != nil {
		return fallback, evalErr(key, d.ErrorCode, err)
	}
	return d.Value, nil
}

func (s *Source) rollout(ctx context.Context, key string, fallback *int) (*int, error) {
	def := 100
	if fallback != nil {
		def = *fallback
	}
	d, err := s.client.IntValueDetails(ctx, key, int64(def), s.evalCtx)
	if err != nil {
		return fallback, evalErr(key, d.ErrorCode, err)
	}
	if d.Value < 0 || d.Value > 100 {
		return fallback, fmt.Errorf("%s: %d is outside 0–100", key, d.Value)
	}
	p := int(d.Value)
	return &p, nil
}

// noValue is the default of object evaluations: a provider without a value (a disabled
// flag) returns it, and the fallback applies.
type noValue struct{}

func (s *Source) tenants(ctx context.Context, key string, fallback []string) ([]string, error) {
	d, err := s.client.ObjectValueDetails(ctx, key, noValue{}, s.evalCtx)
	if err != nil {
		return fallback, evalErr(key, d.ErrorCode, err)
	}
	if _, ok := d.Value.(noValue); ok || d.Value == nil {
		return fallback, nil
	}
	list, err := tenantList(d.Value)
	if err != nil {
		return fallback, fmt.Errorf("%s: %w", key, err)
	}
	return list, nil
}

// tenantList reads a blocklist value: a list of strings, or an object {"tenants": [...]}.
func tenantList(v any) ([]string, error) {
	if m, ok := v.(map[string]any); ok {
		t, ok := m["tenants"]
		if !ok {
			return nil, errors.New(`object without a "tenants" list`)
		}
		v = t
	}
	switch l := v.(type) {
	case []string:
		return slices.Clone(l), nil
	case []any:
		out := make([]string, 0, len(l))
		for i, e := range l {
			t, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d is a %T, not a tenant id", i, e)
			}
			out = append(out, t)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %T is not a list of tenant ids", v)
}

// evalErr returns the error of an evaluation of key, or nil when the flag system does not
// know the key: an absent flag is how a team leaves a switch to afloat's config.
func evalErr(key string, code of.ErrorCode, err error) error {
	if code == of.FlagNotFoundCode {
		return nil
	}
	return fmt.Errorf("%s: %w", key, err)
}
