package cascade

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/jonboulle/clockwork"
)

const triageSchema = `{
  "type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}
  },
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false
}`

const validAnswer = `{"department":"technical","is_urgent":0.8,"urgency_score":2}`

var triageRules = Rules{
	{WhenAny: []string{"fora do ar", "urgente", "не работает", "срочно"}, Set: map[string]any{"is_urgent": 0.8, "urgency_score": 2.0}},
	{WhenAny: []string{"erro", "ошибка", "error"}, Set: map[string]any{"department": "technical"}},
	{Default: map[string]any{"is_urgent": 0.2, "urgency_score": 0.5, "department": nil}},
}

func mustPrompt(t testing.TB, name string) *prompt.Template {
	t.Helper()
	p, err := prompt.Parse(name, "--- system\nTriage the ticket as JSON.\n--- user\nSubject: {{.subject}}\nMessage: {{.message}}\n")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var ticket = afloat.Input{"subject": "Сайт не работает", "message": "Ошибка 502 при входе"}

// noJitter makes breakers open for their exact recovery period, so that tests know when a
// probe comes.
func noJitter() float64 { return 0.5 }

// fake is a provider scripted by a function of the call number (from 0).
type fake struct {
	name  string
	calls atomic.Int64
	fn    func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error)
	mu    sync.Mutex
	reqs  []*afloat.Request
}

func (f *fake) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	n := int(f.calls.Add(1)) - 1
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return f.fn(ctx, req, n)
}

func answer(text string) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
		return &afloat.Response{Content: text, Usage: afloat.Usage{InputTokens: 100, OutputTokens: 20}}, nil
	}
}

func failWith(status int, kind afloat.Kind) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
		return nil, &afloat.ProviderError{Provider: "fake", Status: status, Kind: kind}
	}
}

// hang waits for the call's context, as a provider that never answers.
func hang(ctx context.Context, _ *afloat.Request, _ int) (*afloat.Response, error) {
	<-ctx.Done()
	return nil, &afloat.ProviderError{Provider: "fake", Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
}

type fixture struct {
	clock *clockwork.FakeClock
	eng   *Engine
	fakes map[string]*fake
}

// newFixture builds an engine over fakes named p0, p1, ... with a fake clock.
func newFixture(t testing.TB, mod func(*Config), fns ...func(context.Context, *afloat.Request, int) (*afloat.Response, error)) *fixture {
	t.Helper()
	fx := &fixture{clock: clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)), fakes: map[string]*fake{}}
	cfg := Config{Clock: fx.clock}
	for i, fn := range fns {
		name := "p" + string(rune('0'+i))
		f := &fake{name: name, fn: fn}
		fx.fakes[name] = f
		// No floor under the retry budget: a retry on a fake clock waits for an Advance, and
		// these tests script their calls one by one. The floor has tests of its own.
		cfg.Providers = append(cfg.Providers, ProviderConfig{Name: name, Provider: f, Price: Price{InputPer1M: 1, OutputPer1M: 2, Currency: "USD"},
			Retry: RetryConfig{BudgetFloor: -1}, Breaker: breaker.Config{Rand: noJitter}})
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx.eng = e
	return fx
}

// task builds a task over every provider of the fixture, in order.
func (fx *fixture) task(t testing.TB, mod func(*TaskConfig)) *Task {
	t.Helper()
	cfg := TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Budget: 1500 * time.Millisecond,
		Schema: []byte(triageSchema), Heuristic: triageRules}
	for _, name := range fx.eng.Providers() {
		cfg.Cascade = append(cfg.Cascade, Tier{Provider: name, Prompt: mustPrompt(t, "prompts/triage/"+name+".v1.tmpl")})
	}
	if mod != nil {
		mod(&cfg)
	}
	task, err := fx.eng.Task(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return task
}
