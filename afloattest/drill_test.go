package afloattest_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/afloattest"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
)

// Triage is the task's answer: the model's and the heuristic's alike.
type Triage struct {
	Department   *string `json:"department"`
	IsUrgent     float64 `json:"is_urgent"`
	UrgencyScore float64 `json:"urgency_score"`
}

const triageSchema = `{"type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3}},
  "required": ["department", "is_urgent", "urgency_score"],
  "additionalProperties": false}`

var triageRules = cascade.Rules{
	{Default: map[string]any{"department": nil, "is_urgent": 0.2, "urgency_score": 0.5}},
	{WhenAny: []string{"не работает", "срочно"}, Set: map[string]any{"is_urgent": 0.8, "urgency_score": 2.0}},
	{WhenAny: []string{"ошибка"}, Set: map[string]any{"department": "technical"}},
}

var ticket = afloat.Input{"message": "Ошибка 502: сайт не работает"}

// triageOver builds an engine over providers and a triage task over them, in order. mod, when
// set, changes each provider's config.
func triageOver(t *testing.T, mod func(*cascade.ProviderConfig), cfg cascade.TaskConfig, providers ...*afloattest.Provider) (*cascade.Engine, *cascade.Task) {
	t.Helper()
	var ec cascade.Config
	for _, p := range providers {
		pc := cascade.ProviderConfig{Name: p.Name(), Provider: p}
		if mod != nil {
			mod(&pc)
		}
		ec.Providers = append(ec.Providers, pc)
		tmpl, err := prompt.Parse("triage/"+p.Name()+".v1.tmpl", "--- system\nTriage the ticket as JSON.\n--- user\n{{.message}}")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Cascade = append(cfg.Cascade, cascade.Tier{Provider: p.Name(), Prompt: tmpl})
	}
	engine, err := cascade.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name == "" {
		cfg.Name = "triage"
	}
	cfg.Schema = []byte(triageSchema)
	task, err := engine.Task(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return engine, task
}

// checkHangingPrimaryDrill is the drill's verdict: every call answered by the backup and
// marked degraded, the primary's breaker open, called at most five times, and the last five
// calls fast.
func checkHangingPrimaryDrill(t testing.TB, engine *cascade.Engine, primary *afloattest.Provider, rep *afloattest.Report[Triage]) {
	for _, c := range rep.Calls {
		afloattest.RequireDegraded(t, c.Result, afloat.SourceModel)
		afloattest.RequireModel(t, c.Result, "backup")
	}
	afloattest.RequireBreaker(t, engine, "primary", breaker.StateOpen)
	if n := primary.Calls(); n > 5 {
		t.Fatalf("the hanging primary was called %d times, want at most 5", n)
	}
	for _, c := range rep.Calls[len(rep.Calls)-5:] {
		afloattest.RequireReason(t, c.Result, "circuit_open")
		afloattest.RequireFailFast(t, c.Took, 100*time.Millisecond)
	}
}

// TestDrillHangingPrimary is the drill of the package doc, in a synctest bubble: the calls
// that wait on the hanging primary take exactly their timeout, those that skip its open
// circuit take no time at all.
func TestDrillHangingPrimary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := afloattest.Hanging("primary")
		backup := afloattest.Answering("backup", answer)
		engine, triage := triageOver(t, nil, cascade.TaskConfig{Criticality: afloat.Enrichment, Budget: 1500 * time.Millisecond, Heuristic: triageRules},
			primary, backup)

		rep := afloattest.Drill[Triage](t, triage, ticket, 20)
		checkHangingPrimaryDrill(t, engine, primary, rep)

		if got := rep.Sources; len(got) != 1 || got[afloat.SourceModel] != 20 {
			t.Errorf("sources %v, want 20 model answers", got)
		}
		if got := rep.Reasons; got["timeout"] != 5 || got["circuit_open"] != 15 {
			t.Errorf("reasons %v, want 5 timeout and 15 circuit_open", got)
		}
		for i, c := range rep.Calls[:5] {
			// The primary gets the budget less the backup's reserve (timeouts.min, 200ms, until
			// the backup is measured).
			if c.Took != 1300*time.Millisecond || c.Result.Latency != c.Took {
				t.Errorf("call %d took %v (engine: %v), want 1.3s", i, c.Took, c.Result.Latency)
			}
		}
		if n := backup.Calls(); n != 20 {
			t.Errorf("backup called %d times, want 20", n)
		}
	})
}

// TestDrillFailsWithoutTheBreaker runs the same drill with the primary's breaker disabled:
// its verdict must fail, or the drill proves nothing.
func TestDrillFailsWithoutTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := afloattest.Hanging("primary")
		engine, triage := triageOver(t, func(pc *cascade.ProviderConfig) {
			pc.Breaker = breaker.Config{Disabled: true}
		}, cascade.TaskConfig{Criticality: afloat.Enrichment, Budget: 1500 * time.Millisecond, Heuristic: triageRules},
			primary, afloattest.Answering("backup", answer))

		rep := afloattest.Drill[Triage](t, triage, ticket, 20)
		r := record(t, func(tb testing.TB) { checkHangingPrimaryDrill(tb, engine, primary, rep) })
		wantFatal(t, r, `breaker of "primary" is closed, want open`)

		// Each check fails on its own too: every call paid the timeout.
		r = record(t, func(tb testing.TB) { afloattest.RequireFailFast(tb, rep.Calls[19].Took, 100*time.Millisecond) })
		wantFatal(t, r, "took 1.3s")
		if n := primary.Calls(); n != 20 {
			t.Errorf("primary called %d times, want 20 without a breaker", n)
		}
	})
}

// TestDrillHeuristic: with the only tier down, an enrichment task answers from its rules,
// with the type of the model's answer; its breaker opens after five failures (each call
// retries a 503 once while the retry budget lasts).
func TestDrillHeuristic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := afloattest.Unavailable("primary", 503)
		engine, triage := triageOver(t, nil, cascade.TaskConfig{Criticality: afloat.Enrichment, Heuristic: triageRules}, primary)
		rep := afloattest.Drill[Triage](t, triage, ticket, 10)
		for _, c := range rep.Calls {
			afloattest.RequireDegraded(t, c.Result, afloat.SourceHeuristic)
			if v := c.Result.Value; v.Department == nil || *v.Department != "technical" || v.IsUrgent != 0.8 {
				t.Fatalf("heuristic answer %+v, want the rules' technical and urgent", v)
			}
		}
		for _, c := range rep.Calls[:3] {
			afloattest.RequireReason(t, c.Result, "unavailable")
		}
		for _, c := range rep.Calls[3:] {
			afloattest.RequireReason(t, c.Result, "circuit_open")
		}
		afloattest.RequireBreaker(t, engine, "primary", breaker.StateOpen)
		if n := primary.Calls(); n != 5 {
			t.Errorf("primary called %d times, want 5 (two calls retried, the third opened the breaker)", n)
		}
	})
}

// TestDrillRecordsPolicyRefusals: a critical task that blocks is a designed answer, recorded
// in the report; an error no policy gives (a missing input) stops the test.
func TestDrillRecordsPolicyRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, moderation := triageOver(t, nil, cascade.TaskConfig{Name: "moderation", Criticality: afloat.Critical, OnExhausted: cascade.PolicyBlock},
			afloattest.Malformed("primary"))
		rep := afloattest.Drill[Triage](t, moderation, ticket, 3)
		if len(rep.Calls) != 3 || rep.Sources[afloat.SourceUnavailable] != 3 {
			t.Fatalf("report %+v, want 3 unavailable answers", rep)
		}
		for _, c := range rep.Calls {
			if !errors.Is(c.Err, afloat.ErrBlocked) {
				t.Errorf("err %v, want afloat.ErrBlocked", c.Err)
			}
			afloattest.RequireReason(t, c.Result, "contract_violation")
		}

		r := record(t, func(tb testing.TB) {
			afloattest.Drill[Triage](tb, moderation, afloat.Input{"subject": "no message"}, 3)
		})
		wantFatal(t, r, "drill call 1 of 3", `input "message": missing`)
	})
}

// TestDrillBothTiersDown: with the primary hanging and the backup answering prose, the
// task's rules answer; the backup's contract violations never open its breaker.
func TestDrillBothTiersDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backup := afloattest.Malformed("backup")
		engine, triage := triageOver(t, nil, cascade.TaskConfig{Criticality: afloat.Enrichment, Budget: 1500 * time.Millisecond, Heuristic: triageRules},
			afloattest.Hanging("primary"), backup)
		rep := afloattest.Drill[Triage](t, triage, ticket, 20)
		for _, c := range rep.Calls {
			afloattest.RequireDegraded(t, c.Result, afloat.SourceHeuristic)
		}
		for _, c := range rep.Calls[15:] {
			afloattest.RequireReason(t, c.Result, "circuit_open")
			afloattest.RequireFailFast(t, c.Took, 100*time.Millisecond)
		}
		afloattest.RequireBreaker(t, engine, "primary", breaker.StateOpen)
		afloattest.RequireBreaker(t, engine, "backup", breaker.StateClosed)
		if n := backup.Calls(); n != 40 {
			t.Errorf("backup called %d times, want 40: each call asked once and re-asked once", n)
		}
	})
}
