package cascade

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSynonymsNormalizeAndCountSteps(t *testing.T) {
	fx := newFixture(t, nil, answer("Вот ваш ответ:\n```json\n{'Категория': 'Technical', 'is_urgent': '0,8', 'urgencyScore': 2,}\n```"))
	task := fx.task(t, func(c *TaskConfig) { c.Synonyms = map[string][]string{"department": {"категория"}} })
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != afloat.SourceModel || res.Degraded || string(res.Value) != validAnswer {
		t.Fatalf("envelope %+v value %s", res, res.Value)
	}
	m := fx.eng.Metrics()
	for step, want := range map[string]float64{"locate": 1, "repair": 1, "rename": 1, "coerce": 1} {
		if got := testutil.ToFloat64(m.Normalize.WithLabelValues("triage", step)); got != want {
			t.Errorf("afloat_normalize_total{step=%q} = %v, want %v", step, got, want)
		}
	}
	pm := fx.eng.PromptMetrics()
	if got := testutil.ToFloat64(pm.Answers.WithLabelValues("triage", "p0", "v1", "ok")); got != 1 {
		t.Errorf("prompt answers ok = %v, want 1", got)
	}
	// A clean answer changes nothing and counts no step.
	fx.fakes["p0"].fn = answer(validAnswer)
	if _, err := task.RunJSON(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Normalize.WithLabelValues("triage", "locate")); got != 1 {
		t.Errorf("a clean answer counted locate: %v", got)
	}
}

func TestSynonymOfUnknownPropertyIsRefused(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer))
	_, err := fx.eng.Task(TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema),
		Synonyms: map[string][]string{"departament": {"отдел"}},
		Cascade:  []Tier{{Provider: "p0", Prompt: mustPrompt(t, "p0.v1.tmpl")}}})
	if err == nil || !strings.Contains(err.Error(), "departament") {
		t.Fatalf("err %v", err)
	}
}

// TestEveryViolationReasksOnceThenDowngradesAndNeverTrips: whatever the stage, a contract
// violation is re-asked once on the same provider, then the next tier answers, and however
// often it happens the provider's breaker stays closed.
func TestEveryViolationReasksOnceThenDowngradesAndNeverTrips(t *testing.T) {
	tests := []struct {
		stage, answer, quoted string
	}{
		{"extract", "Извините, я не могу классифицировать это обращение.", "no JSON object"},
		{"repair", `{"department": "technical", "is_urgent": 0.8,, "urgency_score": 2}`, "cannot be repaired"},
		{"schema", `{"department": "technical", "is_urgent": 0.8, "urgency_score": 2, "reason": "down"}`, "'reason' not allowed"},
		{"schema", `[` + validAnswer + `]`, "got array, want object"},
	}
	for _, tt := range tests {
		t.Run(tt.stage+"/"+tt.quoted, func(t *testing.T) {
			fx := newFixture(t, nil, answer(tt.answer), answer(validAnswer))
			task := fx.task(t, nil)
			const calls = 12 // more than the breaker's 5 consecutive failures
			for range calls {
				res, err := task.RunJSON(context.Background(), ticket)
				if err != nil {
					t.Fatal(err)
				}
				sameOutcomes(t, res, afloat.OutcomeContractViolation, afloat.OutcomeContractViolation, afloat.OutcomeOK)
				if res.Reason != afloat.Reason(afloat.OutcomeContractViolation) || res.Provider != "p1" || !res.Degraded || !res.Attempts[1].Reask {
					t.Fatalf("envelope %+v", res)
				}
				if !strings.Contains(res.Attempts[0].Error, tt.quoted) {
					t.Fatalf("attempt error %q does not say %q", res.Attempts[0].Error, tt.quoted)
				}
			}
			if st := fx.eng.Breaker("p0").State(context.Background()); st != breaker.StateClosed {
				t.Fatalf("%d contract violations moved the breaker to %v", 2*calls, st)
			}
			if got := fx.fakes["p0"].calls.Load(); got != 2*calls {
				t.Fatalf("primary called %d times, want %d", got, 2*calls)
			}
			reask := fx.fakes["p0"].reqs[1].Messages
			if last := reask[len(reask)-1]; last.Role != afloat.RoleUser || !strings.Contains(last.Content, tt.quoted) {
				t.Fatalf("re-ask %q does not quote %q", last.Content, tt.quoted)
			}
			m, pm := fx.eng.Metrics(), fx.eng.PromptMetrics()
			if got := testutil.ToFloat64(m.ContractViolations.WithLabelValues("triage", "p0", tt.stage)); got != 2*calls {
				t.Fatalf("violations at %s = %v, want %d", tt.stage, got, 2*calls)
			}
			if got := testutil.ToFloat64(pm.Answers.WithLabelValues("triage", "p0", "v1", tt.stage)); got != 2*calls {
				t.Fatalf("prompt answers at %s = %v, want %d", tt.stage, got, 2*calls)
			}
		})
	}
}

func TestMaxReasks(t *testing.T) {
	tests := []struct {
		max   int
		calls int64
	}{{-1, 1}, {0, 2}, {1, 2}, {3, 4}}
	for _, tt := range tests {
		fx := newFixture(t, nil, answer("no JSON"), answer(validAnswer))
		task := fx.task(t, func(c *TaskConfig) { c.MaxReasks = tt.max })
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil || res.Provider != "p1" {
			t.Fatalf("max %d: %+v %v", tt.max, res, err)
		}
		if got := fx.fakes["p0"].calls.Load(); got != tt.calls {
			t.Errorf("max %d: primary called %d times, want %d", tt.max, got, tt.calls)
		}
	}
}

// TestReaskStaysInsideTheDeadline: a re-ask is an attempt like any other; with too little of
// the budget left it is skipped, and so is every further tier.
func TestReaskStaysInsideTheDeadline(t *testing.T) {
	var fx *fixture
	fx = newFixture(t, nil, func(_ context.Context, _ *afloat.Request, n int) (*afloat.Response, error) {
		fx.clock.Advance(1400 * time.Millisecond) // of the 1.5s budget
		return &afloat.Response{Content: "no JSON"}, nil
	}, answer(validAnswer))
	task := fx.task(t, nil)
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	sameOutcomes(t, res, afloat.OutcomeContractViolation, afloat.OutcomeDeadline, afloat.OutcomeDeadline)
	if !res.Attempts[1].Reask || res.Source != afloat.SourceHeuristic {
		t.Fatalf("envelope %+v", res)
	}
	if got := fx.fakes["p0"].calls.Load(); got != 1 {
		t.Fatalf("primary called %d times", got)
	}
}

func TestReaskTemplateOverride(t *testing.T) {
	tpl, err := prompt.Parse("reask/p0.v2.tmpl", "--- system\nJSON only.\n--- user\nStage {{.stage}}. Fix:{{range .errors}} {{.}};{{end}}\nYou wrote: {{.answer}}\n")
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, nil, func(_ context.Context, _ *afloat.Request, n int) (*afloat.Response, error) {
		if n == 0 {
			return &afloat.Response{Content: `{"department":"technical","is_urgent":3,"urgency_score":2}`}, nil
		}
		return &afloat.Response{Content: validAnswer}, nil
	})
	task := fx.task(t, func(c *TaskConfig) { c.Cascade[0].Reask = tpl })
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil || res.Degraded {
		t.Fatalf("envelope %+v %v", res, err)
	}
	msgs := fx.fakes["p0"].reqs[1].Messages
	if len(msgs) != 5 {
		t.Fatalf("re-ask messages %+v", msgs)
	}
	if msgs[2].Role != afloat.RoleAssistant || !strings.Contains(msgs[2].Content, `"is_urgent":3`) {
		t.Fatalf("the model's answer is not in the conversation: %+v", msgs[2])
	}
	if msgs[3].Role != afloat.RoleSystem || msgs[4].Role != afloat.RoleUser {
		t.Fatalf("roles %s %s", msgs[3].Role, msgs[4].Role)
	}
	want := "Stage schema. Fix: at /is_urgent: maximum: got 3, want 1;\nYou wrote: " + `{"department":"technical","is_urgent":3,"urgency_score":2}`
	if msgs[4].Content != want {
		t.Fatalf("re-ask %q, want %q", msgs[4].Content, want)
	}
}

func TestReaskTemplateReadingUnknownFieldsIsRefused(t *testing.T) {
	tpl, err := prompt.Parse("reask.v1.tmpl", "--- user\nFix {{.subject}}: {{.errors}}\n")
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, nil, answer(validAnswer))
	_, err = fx.eng.Task(TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Schema: []byte(triageSchema),
		Cascade: []Tier{{Provider: "p0", Prompt: mustPrompt(t, "p0.v1.tmpl"), Reask: tpl}}})
	if err == nil || !strings.Contains(err.Error(), `"subject"`) {
		t.Fatalf("err %v", err)
	}
}

const orderTool = `{"type":"object","properties":{"order_id":{"type":"string"},"include_items":{"type":"boolean"}},"required":["order_id"],"additionalProperties":false}`

func toolRequest() *afloat.Request {
	req := *hi
	req.Tools = []afloat.Tool{{Name: "get_order", Parameters: json.RawMessage(orderTool)}}
	return &req
}

func callTool(args string) func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
	return func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
		return &afloat.Response{FinishReason: "tool_calls",
			ToolCalls: []afloat.ToolCall{{ID: "call_1", Name: "get_order", Arguments: json.RawMessage(args)}}}, nil
	}
}

func TestRouteToolArguments(t *testing.T) {
	t.Run("repaired and renamed without a re-ask", func(t *testing.T) {
		p := &fake{fn: callTool(`{orderId: 'A-17', include_items: 'yes'}`)}
		e, r := newRoute(t, nil, nil, nil, p)
		rep, err := r.Complete(context.Background(), toolRequest())
		if err != nil {
			t.Fatal(err)
		}
		if got := string(rep.Response.ToolCalls[0].Arguments); got != `{"include_items":true,"order_id":"A-17"}` || len(rep.Attempts) != 1 {
			t.Fatalf("arguments %s, attempts %+v", got, rep.Attempts)
		}
		if got := testutil.ToFloat64(e.Metrics().Normalize.WithLabelValues("chat", "rename")); got != 1 {
			t.Fatalf("rename counted %v times", got)
		}
	})
	t.Run("invalid: one re-ask, then the next tier, breaker untouched", func(t *testing.T) {
		bad := &fake{fn: callTool(`{"id": 17}`)}
		good := &fake{fn: callTool(`{"order_id": "A-17"}`)}
		e, r := newRoute(t, nil, nil, nil, bad, good)
		for range 8 {
			rep, err := r.Complete(context.Background(), toolRequest())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Provider != "p1" || rep.Reason != afloat.Reason(afloat.OutcomeContractViolation) || len(rep.Attempts) != 3 || !rep.Attempts[1].Reask {
				t.Fatalf("reply %+v", rep)
			}
		}
		if st := e.Breaker("p0").State(context.Background()); st != breaker.StateClosed {
			t.Fatalf("invalid tool arguments moved the breaker to %v", st)
		}
		msgs := bad.reqs[1].Messages
		n := len(msgs)
		if msgs[n-2].Role != afloat.RoleAssistant || len(msgs[n-2].ToolCalls) != 1 {
			t.Fatalf("the model's call is not in the conversation: %+v", msgs[n-2])
		}
		last := msgs[n-1]
		if last.Role != afloat.RoleTool || last.ToolCallID != "call_1" || !strings.Contains(last.Content, "missing property 'order_id'") || !strings.Contains(last.Content, `"order_id"`) {
			t.Fatalf("tool message %+v", last)
		}
		if got := testutil.ToFloat64(e.Metrics().ContractViolations.WithLabelValues("chat", "p0", "schema")); got != 16 {
			t.Fatalf("violations %v, want 16", got)
		}
	})
	t.Run("a tool the request does not offer", func(t *testing.T) {
		p := &fake{fn: func(context.Context, *afloat.Request, int) (*afloat.Response, error) {
			return &afloat.Response{ToolCalls: []afloat.ToolCall{{ID: "c", Name: "drop_tables", Arguments: json.RawMessage(`{}`)}}}, nil
		}}
		_, r := newRoute(t, nil, nil, nil, p)
		rep, err := r.Complete(context.Background(), toolRequest())
		if !errors.Is(err, ErrExhausted) || rep.Reason != afloat.Reason(afloat.OutcomeContractViolation) || !strings.Contains(rep.Attempts[0].Error, `there is no tool "drop_tables"`) {
			t.Fatalf("reply %+v err %v", rep, err)
		}
	})
	t.Run("a parameter schema that does not compile", func(t *testing.T) {
		p := &fake{fn: callTool(`{}`)}
		_, r := newRoute(t, nil, nil, nil, p)
		req := toolRequest()
		req.Tools = append(req.Tools, afloat.Tool{Name: "bad", Parameters: json.RawMessage(`{"type": 7}`)})
		_, err := r.Complete(context.Background(), req)
		var re *RequestError
		if !errors.As(err, &re) || re.Field != "tools[1].parameters" || p.calls.Load() != 0 {
			t.Fatalf("err %v, calls %d", err, p.calls.Load())
		}
	})
}

func TestRouteReaskTemplate(t *testing.T) {
	tpl, err := prompt.Parse("chat-reask.v1.tmpl", "--- user\nОтветь JSON по схеме {{.schema}}. Ошибки: {{range .errors}}{{.}}{{end}}\n")
	if err != nil {
		t.Fatal(err)
	}
	p := &fake{fn: func(_ context.Context, _ *afloat.Request, n int) (*afloat.Response, error) {
		if n == 0 {
			return &afloat.Response{Content: "нет"}, nil
		}
		return &afloat.Response{Content: validAnswer}, nil
	}}
	_, r := newRoute(t, nil, nil, []RouteTier{{Provider: "p0", Reask: tpl}}, p)
	req := *hi
	req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: []byte(triageSchema)}
	if _, err := r.Complete(context.Background(), &req); err != nil {
		t.Fatal(err)
	}
	last := p.reqs[1].Messages[len(p.reqs[1].Messages)-1]
	if !strings.HasPrefix(last.Content, "Ответь JSON по схеме {") || !strings.Contains(last.Content, "no JSON object") {
		t.Fatalf("re-ask %q", last.Content)
	}
}

func TestPromptSeriesExportedAtStart(t *testing.T) {
	fx := newFixture(t, nil, answer(validAnswer), answer(validAnswer))
	fx.task(t, func(c *TaskConfig) { c.Cascade[1].Prompt = mustPrompt(t, "prompts/triage/p1.v7.tmpl") })
	pm := fx.eng.PromptMetrics()
	if n, want := testutil.CollectAndCount(pm.Answers), 2*len(telemetry.PromptResults()); n != want {
		t.Fatalf("%d prompt series, want 2 tiers × %d results", n, want/2)
	}
	for _, r := range []string{"ok", "extract", "repair", "schema"} {
		if got := testutil.ToFloat64(pm.Answers.WithLabelValues("triage", "p1", "v7", r)); got != 0 {
			t.Fatalf("%s = %v", r, got)
		}
	}
	if n := testutil.CollectAndCount(fx.eng.Metrics().Normalize); n != 4 {
		t.Fatalf("%d normalize series, want 4 steps", n)
	}
}

// TestForcedToolChoiceRefusesText: with tool_choice naming a function (or "required"), a text
// answer is a contract violation: re-asked with a message that asks for the call, then passed
// on; a call of the right tool on the re-ask is the answer.
func TestForcedToolChoiceRefusesText(t *testing.T) {
	for _, choice := range []*afloat.ToolChoice{{Mode: "tool", Name: "get_order"}, {Mode: "required"}} {
		t.Run(choice.Mode, func(t *testing.T) {
			textThenCall := &fake{fn: func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
				if n == 0 {
					return &afloat.Response{Content: "Your order A-17 is on its way.", FinishReason: "stop"}, nil
				}
				return callTool(`{"order_id": "A-17"}`)(ctx, req, n)
			}}
			_, r := newRoute(t, nil, nil, nil, textThenCall)
			req := toolRequest()
			req.ToolChoice = choice
			rep, err := r.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Attempts) != 2 || rep.Attempts[0].Outcome != afloat.OutcomeContractViolation || len(rep.Response.ToolCalls) != 1 {
				t.Fatalf("attempts %+v, answer %+v", rep.Attempts, rep.Response)
			}
			msgs := textThenCall.reqs[1].Messages
			if last := msgs[len(msgs)-1]; last.Role != afloat.RoleUser || !strings.Contains(last.Content, "requires you to call") {
				t.Errorf("re-ask %+v", last)
			}
		})
	}
	// "auto" accepts text.
	_, r := newRoute(t, nil, nil, nil, &fake{fn: answer("plain text")})
	req := toolRequest()
	req.ToolChoice = &afloat.ToolChoice{Mode: "auto"}
	if rep, err := r.Complete(context.Background(), req); err != nil || len(rep.Attempts) != 1 {
		t.Fatalf("auto: %+v %v", rep, err)
	}
}
