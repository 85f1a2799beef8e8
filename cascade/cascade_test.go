package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/review"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func outcomesOf(res afloat.Result[json.RawMessage]) []afloat.Outcome {
	var out []afloat.Outcome
	for _, a := range res.Attempts {
		out = append(out, a.Outcome)
	}
	return out
}

func sameOutcomes(t *testing.T, res afloat.Result[json.RawMessage], want ...afloat.Outcome) {
	t.Helper()
	got := outcomesOf(res)
	if len(got) != len(want) {
		t.Fatalf("attempts %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("attempts %v, want %v", got, want)
		}
	}
}

func TestHappyPath(t *testing.T) {
	fx := newFixture(t, nil, answer("```json\n"+validAnswer+"\n```"), answer(validAnswer))
	task := fx.task(t, nil)
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != afloat.SourceModel || res.Degraded || res.Reason != "" || res.Provider != "p0" || res.Tier != 0 {
		t.Fatalf("envelope %+v", res)
	}
	if string(res.Value) != validAnswer {
		t.Fatalf("value %s", res.Value)
	}
	if res.PromptVersion != "triage/p0/v1" {
		t.Fatalf("prompt version %q", res.PromptVersion)
	}
	if res.Usage.InputTokens != 100 || res.Usage.OutputTokens != 20 || res.Usage.Currency != "USD" {
		t.Fatalf("usage %+v", res.Usage)
	}
	if want := (100*1.0 + 20*2.0) / 1e6; res.Usage.Cost != want {
		t.Fatalf("cost %v, want %v", res.Usage.Cost, want)
	}
	sameOutcomes(t, res, afloat.OutcomeOK)
	req := fx.fakes["p0"].reqs[0]
	if req.ResponseFormat == nil || req.ResponseFormat.Type != "json_schema" || len(req.ResponseFormat.Schema) == 0 {
		t.Fatalf("response format %+v", req.ResponseFormat)
	}
	if req.Messages[1].Content != "Subject: Сайт не работает\nMessage: Ошибка 502 при входе" {
		t.Fatalf("rendered %q", req.Messages[1].Content)
	}
	if fx.fakes["p1"].calls.Load() != 0 {
		t.Fatal("backup called although the primary answered")
	}
}

func TestDowngradeOnUnavailable(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.Providers[0].Retry.Max = -1 }, failWith(500, afloat.Unavailable), answer(validAnswer))
	task := fx.task(t, nil)
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != afloat.SourceModel || !res.Degraded || res.Reason != "unavailable" || res.Provider != "p1" || res.Tier != 1 {
		t.Fatalf("envelope %+v", res)
	}
	if res.PromptVersion != "triage/p1/v1" {
		t.Fatalf("prompt version %q", res.PromptVersion)
	}
	sameOutcomes(t, res, afloat.OutcomeUnavailable, afloat.OutcomeOK)
}

func TestContractViolationReasksThenDowngradesAndNeverTrips(t *testing.T) {
	fx := newFixture(t, nil, answer("Извините, не могу помочь."), answer(validAnswer))
	task := fx.task(t, nil)
	for range 30 {
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		sameOutcomes(t, res, afloat.OutcomeContractViolation, afloat.OutcomeContractViolation, afloat.OutcomeOK)
		if !res.Attempts[1].Reask || res.Attempts[0].Reask {
			t.Fatalf("reask flags %+v", res.Attempts)
		}
		if res.Reason != "contract_violation" || res.Provider != "p1" || !res.Degraded {
			t.Fatalf("envelope %+v", res)
		}
	}
	if st := fx.eng.Breaker("p0").State(context.Background()); st != breaker.StateClosed {
		t.Fatalf("30 contract violations moved the breaker to %v", st)
	}
	if got := fx.fakes["p0"].calls.Load(); got != 60 {
		t.Fatalf("primary called %d times, want 60 (one re-ask per call)", got)
	}
	reask := fx.fakes["p0"].reqs[1]
	last := reask.Messages[len(reask.Messages)-1]
	if last.Role != afloat.RoleUser || !strings.Contains(last.Content, "JSON Schema") || !strings.Contains(last.Content, "no JSON object") {
		t.Fatalf("re-ask message %q", last.Content)
	}
	if prev := reask.Messages[len(reask.Messages)-2]; prev.Role != afloat.RoleAssistant || prev.Content != "Извините, не могу помочь." {
		t.Fatalf("re-ask does not carry the model's answer: %+v", prev)
	}
	m := fx.eng.Metrics()
	if got := testutil.ToFloat64(m.ContractViolations.WithLabelValues("triage", "p0", "extract")); got != 60 {
		t.Fatalf("contract violations metric %v, want 60", got)
	}
	if got := testutil.ToFloat64(m.Reasks.WithLabelValues("triage", "p0")); got != 30 {
		t.Fatalf("reasks metric %v, want 30", got)
	}
}

func TestReaskRecovers(t *testing.T) {
	fx := newFixture(t, nil, func(_ context.Context, _ *afloat.Request, n int) (*afloat.Response, error) {
		if n == 0 {
			return &afloat.Response{Content: `{"department":"technical","is_urgent":7}`}, nil
		}
		return &afloat.Response{Content: validAnswer}, nil
	})
	task := fx.task(t, nil)
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	sameOutcomes(t, res, afloat.OutcomeContractViolation, afloat.OutcomeOK)
	if res.Degraded || res.Reason != "" || res.Source != afloat.SourceModel {
		t.Fatalf("envelope %+v", res)
	}
	q := fx.fakes["p0"].reqs[1].Messages
	if !strings.Contains(q[len(q)-1].Content, "/is_urgent") {
		t.Fatalf("re-ask does not quote the validation error: %q", q[len(q)-1].Content)
	}
}

func TestBreakerOpensAndSkipsFast(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.Providers[0].Retry.Max = -1 }, failWith(502, afloat.Unavailable), answer(validAnswer))
	task := fx.task(t, nil)
	for range 5 {
		if _, err := task.RunJSON(context.Background(), ticket); err != nil {
			t.Fatal(err)
		}
	}
	if st := fx.eng.Breaker("p0").State(context.Background()); st != breaker.StateOpen {
		t.Fatalf("breaker %v after 5 failures", st)
	}
	res, _ := task.RunJSON(context.Background(), ticket)
	sameOutcomes(t, res, afloat.OutcomeCircuitOpen, afloat.OutcomeOK)
	if res.Reason != "circuit_open" || res.Provider != "p1" {
		t.Fatalf("envelope %+v", res)
	}
	if got := fx.fakes["p0"].calls.Load(); got != 5 {
		t.Fatalf("primary called %d times, want 5: an open circuit must not call", got)
	}
	m := fx.eng.Metrics()
	if got := m.CircuitState.Value("p0"); got != 2 {
		t.Fatalf("circuit state gauge %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.CircuitOpened.WithLabelValues("p0")); got != 1 {
		t.Fatalf("circuit opened %v", got)
	}
	if got := testutil.ToFloat64(m.Attempts.WithLabelValues("triage", "p0", "circuit_open")); got != 1 {
		t.Fatalf("circuit_open attempts %v", got)
	}
}

func TestPolicies(t *testing.T) {
	down := failWith(503, afloat.Unavailable)
	tests := []struct {
		name       string
		crit       afloat.Criticality
		policy     Policy
		heuristic  Heuristic
		wantSource afloat.Source
		wantErr    error
		wantValue  string
	}{
		{"enrichment heuristic", afloat.Enrichment, "", triageRules, afloat.SourceHeuristic, nil, `{"department":"technical","is_urgent":0.8,"urgency_score":2}`},
		{"enrichment without rules", afloat.Enrichment, "", nil, afloat.SourceUnavailable, nil, ""},
		{"assistance", afloat.Assistance, "", triageRules, afloat.SourceUnavailable, nil, ""},
		{"critical human", afloat.Critical, "", nil, afloat.SourceHuman, nil, ""},
		{"critical block", afloat.Critical, PolicyBlock, nil, afloat.SourceUnavailable, afloat.ErrBlocked, ""},
		{"go func heuristic", afloat.Enrichment, "", HeuristicFunc(func(in afloat.Input) (any, error) {
			return map[string]any{"department": "other", "is_urgent": 0, "urgency_score": 0}, nil
		}), afloat.SourceHeuristic, nil, `{"department":"other","is_urgent":0,"urgency_score":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, func(c *Config) { c.Providers[0].Retry.Max = -1 }, down)
			task := fx.task(t, func(c *TaskConfig) {
				c.Criticality, c.OnExhausted, c.Heuristic, c.ReviewSLA = tt.crit, tt.policy, tt.heuristic, 30*time.Minute
			})
			res, err := task.RunJSON(context.Background(), ticket)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if res.Source != tt.wantSource || !res.Degraded || res.Reason != "unavailable" {
				t.Fatalf("envelope %+v", res)
			}
			if string(res.Value) != tt.wantValue {
				t.Fatalf("value %s, want %s", res.Value, tt.wantValue)
			}
			if tt.wantSource == afloat.SourceHuman {
				if !strings.HasPrefix(res.ReviewID, "rv_") || res.ReviewSLA != 30*time.Minute || !res.ExpectedBy.Equal(fx.clock.Now().Add(30*time.Minute)) {
					t.Fatalf("review fields %+v", res)
				}
				item, err := fx.eng.review.Get(context.Background(), "", res.ReviewID)
				if err != nil {
					t.Fatal(err)
				}
				if item.Task != "triage" || len(item.Attempts) != 1 || !strings.Contains(string(item.Input), "Сайт") {
					t.Fatalf("queued item %+v", item)
				}
			}
		})
	}
}

type failingQueue struct{}

func (failingQueue) Enqueue(context.Context, *review.Item) (string, error) {
	return "", errors.New("disk I/O error")
}
func (failingQueue) Get(context.Context, string, string) (*review.Item, error) {
	return nil, review.ErrNotFound
}
func (failingQueue) Queued(context.Context, *review.Item) (*review.Item, error) {
	return nil, errors.New("disk I/O error")
}

func TestCriticalNeverFailsOpenWhenTheQueueFails(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.Review = failingQueue{} }, failWith(503, afloat.Unavailable))
	task := fx.task(t, func(c *TaskConfig) { c.Criticality, c.Heuristic = afloat.Critical, nil })
	res, err := task.RunJSON(context.Background(), ticket)
	if !errors.Is(err, afloat.ErrReviewUnavailable) {
		t.Fatalf("err %v, want ErrReviewUnavailable", err)
	}
	if res.HasValue() || res.Source == afloat.SourceHuman {
		t.Fatalf("a failed commit produced an answer: %+v", res)
	}
}

func TestConstructionRefusals(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	tests := []struct {
		name string
		mod  func(*TaskConfig)
		want string
	}{
		{"critical heuristic", func(c *TaskConfig) { c.Criticality, c.OnExhausted = afloat.Critical, PolicyHeuristic }, "must fail closed"},
		{"critical unavailable", func(c *TaskConfig) { c.Criticality, c.OnExhausted = afloat.Critical, PolicyUnavailable }, "must fail closed"},
		{"no criticality", func(c *TaskConfig) { c.Criticality = 0 }, "criticality is required"},
		{"no tiers", func(c *TaskConfig) { c.Cascade = nil }, "no tiers"},
		{"unknown provider", func(c *TaskConfig) { c.Cascade[0].Provider = "nope" }, "unknown provider"},
		{"bad schema", func(c *TaskConfig) { c.Schema = []byte(`{"type": 5}`) }, "schema"},
		{"rules outside schema", func(c *TaskConfig) {
			c.Heuristic = Rules{{Default: map[string]any{"department": "nowhere", "is_urgent": 0, "urgency_score": 0}}}
		}, "does not fit the schema"},
		{"rule breaks schema", func(c *TaskConfig) {
			c.Heuristic = Rules{{Default: map[string]any{"department": nil, "is_urgent": 0, "urgency_score": 0}},
				{WhenAny: []string{"x"}, Set: map[string]any{"is_urgent": 9}}}
		}, "does not fit the schema"},
		{"unknown policy", func(c *TaskConfig) { c.OnExhausted = "shrug" }, "unknown on_exhausted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema),
				Cascade: []Tier{{Provider: "p0", Prompt: mustPrompt(t, "t.v1.tmpl")}}}
			tt.mod(&cfg)
			_, err := fx.eng.Task(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestKillSwitchesReadOnEveryCall(t *testing.T) {
	f := flags.NewMemory()
	fx := newFixture(t, func(c *Config) { c.Flags = f }, answer(validAnswer))
	task := fx.task(t, nil)
	ctx := WithTenant(context.Background(), "acme")
	run := func() afloat.Result[json.RawMessage] {
		res, err := task.RunJSON(ctx, ticket)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(); res.Source != afloat.SourceModel {
		t.Fatalf("before the kill: %+v", res)
	}
	pct0 := 0
	for _, doc := range []*flags.Document{
		{Kill: true},
		{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}},
		{Tasks: map[string]flags.TaskFlags{"triage": {Blocklist: []string{"acme"}}}},
		{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: &pct0}}},
	} {
		if err := f.Set(ctx, doc); err != nil {
			t.Fatal(err)
		}
		before := fx.fakes["p0"].calls.Load()
		res := run()
		if res.Reason != afloat.ReasonKillSwitch || res.Source != afloat.SourceHeuristic || len(res.Attempts) != 0 {
			t.Fatalf("flags %+v: envelope %+v", doc, res)
		}
		if fx.fakes["p0"].calls.Load() != before {
			t.Fatal("a killed task called its provider")
		}
	}
	_ = f.Set(ctx, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Blocklist: []string{"globex"}}}})
	if res := run(); res.Source != afloat.SourceModel {
		t.Fatalf("after lifting the kill: %+v", res)
	}
}

func TestInputMissing(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	task := fx.task(t, nil)
	_, err := task.RunJSON(context.Background(), afloat.Input{"subject": "x"})
	var ie *InputError
	if !errors.As(err, &ie) || ie.Field != "message" {
		t.Fatalf("err %v, want an InputError naming message", err)
	}
	if got := task.Inputs(); len(got) != 2 || got[0] != "message" || got[1] != "subject" {
		t.Fatalf("inputs %v", got)
	}
}

func TestBulkheadSkipsAtOnce(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	blocking := func(ctx context.Context, _ *afloat.Request, _ int) (*afloat.Response, error) {
		started <- struct{}{}
		<-release
		return &afloat.Response{Content: validAnswer}, nil
	}
	fx := newFixture(t, func(c *Config) { c.Clock = nil; c.Providers[0].MaxInFlight, c.Providers[0].QueueWait = 2, -1 }, blocking)
	task := fx.task(t, func(c *TaskConfig) { c.Budget = time.Minute })
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = task.RunJSON(context.Background(), ticket) })
	}
	<-started
	<-started
	if got := fx.eng.InFlight("p0"); got != 2 {
		t.Fatalf("in flight %d", got)
	}
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	sameOutcomes(t, res, afloat.OutcomeBulkhead)
	if res.Source != afloat.SourceHeuristic || res.Reason != "bulkhead" {
		t.Fatalf("envelope %+v", res)
	}
	close(release)
	wg.Wait()
	if got := fx.eng.InFlight("p0"); got != 0 {
		t.Fatalf("in flight %d after release", got)
	}
}

func TestRetriesStayWithinBudgetUnderOutage(t *testing.T) {
	fx := newFixture(t, func(c *Config) {
		c.Clock = nil
		c.Providers[0].Breaker = breaker.Config{Disabled: true}
		c.Providers[0].Retry = RetryConfig{Backoff: time.Microsecond}
	}, failWith(503, afloat.Unavailable))
	task := fx.task(t, nil)
	const calls = 500
	retries := 0
	for range calls {
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		retries += len(res.Attempts) - 1
	}
	got := int(fx.fakes["p0"].calls.Load())
	if got != calls+retries {
		t.Fatalf("provider saw %d calls, envelopes say %d", got, calls+retries)
	}
	if float64(retries) > 0.2*calls {
		t.Fatalf("%d retries over %d calls exceed the 20%% budget", retries, calls)
	}
	if retries < 0.15*calls {
		t.Fatalf("only %d retries over %d calls: the budget should allow about 20%%", retries, calls)
	}
}

func TestRetryOnceOnTransientThenSucceed(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.Clock = nil; c.Providers[0].Retry = RetryConfig{Backoff: time.Microsecond} },
		func(_ context.Context, _ *afloat.Request, n int) (*afloat.Response, error) {
			if n < 10 {
				return &afloat.Response{Content: validAnswer}, nil // fill the budget's call count
			}
			if n == 10 {
				return nil, &afloat.ProviderError{Provider: "p0", Status: 502, Kind: afloat.Unavailable}
			}
			return &afloat.Response{Content: validAnswer}, nil
		})
	task := fx.task(t, nil)
	for range 10 {
		_, _ = task.RunJSON(context.Background(), ticket)
	}
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	sameOutcomes(t, res, afloat.OutcomeUnavailable, afloat.OutcomeOK)
	if res.Degraded || res.Provider != "p0" {
		t.Fatalf("envelope %+v", res)
	}
	// A 400 is never retried.
	fx2 := newFixture(t, func(c *Config) { c.Clock = nil }, failWith(400, afloat.Contract))
	task2 := fx2.task(t, nil)
	for range 10 {
		res, _ = task2.RunJSON(context.Background(), ticket)
	}
	sameOutcomes(t, res, afloat.OutcomeClientError)
}

func TestMetricsExportedFromStart(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer), answer(validAnswer))
	fx.task(t, nil)
	m := fx.eng.Metrics()
	if n := testutil.CollectAndCount(m.Attempts); n != 2*len(afloat.Outcomes) {
		t.Fatalf("%d attempt series at start, want %d", n, 2*len(afloat.Outcomes))
	}
	if n := testutil.CollectAndCount(m.CircuitState); n != 2 {
		t.Fatalf("%d circuit state series", n)
	}
}

func TestInputSchemaNamesTheField(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	task := fx.task(t, func(c *TaskConfig) {
		c.InputSchema = []byte(`{"type":"object","properties":{"subject":{"type":"string"},"message":{"type":"string"}},"required":["subject","message"]}`)
	})
	tests := []struct {
		in      afloat.Input
		field   string
		problem string
	}{
		{afloat.Input{"subject": "x", "message": 42}, "message", "string"},
		{afloat.Input{"subject": []any{"x"}, "message": "y"}, "subject", "string"},
	}
	for _, tt := range tests {
		_, err := task.RunJSON(context.Background(), tt.in)
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(ie.Problem, tt.problem) {
			t.Fatalf("input %v: err %v, want a problem with %q naming %q", tt.in, err, tt.problem, tt.field)
		}
	}
	if res, err := task.RunJSON(context.Background(), ticket); err != nil || res.Source != afloat.SourceModel {
		t.Fatalf("valid input refused: %v", err)
	}
	if got := inputError(&afloat.ContractError{Stage: "schema", Details: []string{"at /: missing properties 'message', 'subject'"}}); got.(*InputError).Field != "message" {
		t.Fatalf("missing property not named: %v", got)
	}
}

// TestIdempotentRetryReplaysTheQueuedItem: a retried critical call whose key queued an item
// gets that item back, marked replayed, without asking a model, though the provider is back
// (a gateway restarted since holds no answer in memory); the key with another input is
// ErrIdempotencyMismatch; a call without a key asks the model.
func TestIdempotentRetryReplaysTheQueuedItem(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	fx := newFixture(t, func(c *Config) { c.Review = review.NewMemory(c.Clock) }, func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
		if down.Load() {
			return failWith(503, afloat.Unavailable)(ctx, req, n)
		}
		return answer(validAnswer)(ctx, req, n)
	})
	task := fx.task(t, func(c *TaskConfig) { c.Criticality, c.Heuristic, c.ReviewSLA = afloat.Critical, nil, 30*time.Minute })
	keyed := WithIdempotencyKey(context.Background(), "ticket-7")
	first, err := task.RunJSON(keyed, ticket)
	if err != nil || first.Source != afloat.SourceHuman || first.Replayed {
		t.Fatalf("first call: %+v, %v; want queued for review", first, err)
	}
	down.Store(false)
	calls := fx.fakes["p0"].calls.Load()
	fx.clock.Advance(time.Minute)
	again, err := task.RunJSON(keyed, ticket)
	switch {
	case err != nil:
		t.Fatalf("retry: %v", err)
	case again.Source != afloat.SourceHuman || again.ReviewID != first.ReviewID || !again.Replayed:
		t.Fatalf("retry: source %s, review %q, replayed %v; want the first item %s, replayed", again.Source, again.ReviewID, again.Replayed, first.ReviewID)
	case !again.ExpectedBy.Equal(first.ExpectedBy) || again.Reason != first.Reason || len(again.Attempts) != len(first.Attempts):
		t.Errorf("retry: expected_by %v, reason %s, %d attempts; want the first's %v, %s, %d",
			again.ExpectedBy, again.Reason, len(again.Attempts), first.ExpectedBy, first.Reason, len(first.Attempts))
	}
	if n := fx.fakes["p0"].calls.Load(); n != calls {
		t.Errorf("the retry asked the provider %d times; want none", n-calls)
	}
	other := afloat.Input{"subject": "другое", "message": "другой текст"}
	if _, err := task.RunJSON(keyed, other); !errors.Is(err, review.ErrIdempotencyMismatch) {
		t.Errorf("the key with another input: %v, want ErrIdempotencyMismatch", err)
	}
	fresh, err := task.RunJSON(context.Background(), ticket)
	if err != nil || fresh.Source != afloat.SourceModel {
		t.Errorf("a call without a key: %+v, %v; want the model's answer", fresh, err)
	}
}
