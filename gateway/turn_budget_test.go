package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/shed"
)

// hangingProvider never answers: a call on it lasts until its context ends.
type hangingProvider struct{}

func (hangingProvider) Complete(ctx context.Context, _ *afloat.Request) (*afloat.Response, error) {
	<-ctx.Done()
	return nil, &afloat.ProviderError{Provider: "slow", Kind: afloat.Unavailable, Timeout: true, Err: ctx.Err()}
}

// TestTurnWaitIsPartOfTheBudget: a call that waited for a turn (afloat saturated) has that
// much less of its budget left: the budget counts from its arrival, not from its turn. A
// task with a 1s budget on a provider that never answers is answered with its heuristic 1s
// after it arrived, though it waited 200ms for a turn.
func TestTurnWaitIsPartOfTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng, err := cascade.New(cascade.Config{
			Providers: []cascade.ProviderConfig{{Name: "slow", Provider: hangingProvider{}, Retry: cascade.RetryConfig{Max: -1}}},
			Shed:      shed.New(10*time.Millisecond, func() time.Duration { return 0 }),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		tmpl, err := prompt.Parse("triage/slow.v1.tmpl", "--- user\n{{.message}}")
		if err != nil {
			t.Fatal(err)
		}
		task, err := eng.Task(cascade.TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Budget: time.Second,
			Schema: []byte(triageSchema), Cascade: []cascade.Tier{{Provider: "slow", Prompt: tmpl}},
			Heuristic: cascade.Rules{{Default: map[string]any{"department": nil, "is_urgent": 0.2, "urgency_score": 0.5}}}})
		if err != nil {
			t.Fatal(err)
		}
		gw, err := New(Config{Engine: eng, Tasks: map[string]*cascade.Task{"triage": task}})
		if err != nil {
			t.Fatal(err)
		}
		call := func(body string) chan *httptest.ResponseRecorder {
			answered := make(chan *httptest.ResponseRecorder)
			go func() {
				req := httptest.NewRequest("POST", "/v1/tasks/triage", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				gw.Handler().ServeHTTP(rec, req)
				answered <- rec
			}()
			return answered
		}
		var held []func()
		for {
			leave, ok := task.Enter(context.Background())
			if !ok {
				break // every turn is taken
			}
			held = append(held, leave)
		}
		// A call whose own budget_ms the wait spends whole: its policy answers (the heuristic),
		// not a 500 for a context already past its deadline.
		answered := call(`{"input": {"message": "the site is down"}, "budget_ms": 100}`)
		synctest.Wait() // the call waits for a turn
		time.Sleep(200 * time.Millisecond)
		held[0]()
		rec := <-answered
		if rec.Code != http.StatusOK {
			t.Fatalf("a call whose 100ms went on the wait for a turn: %d %s; want 200 with the heuristic", rec.Code, rec.Body)
		}
		if res := decode[envelope](t, rec.Body.Bytes()); res.Source != afloat.SourceHeuristic || res.Reason != afloat.Reason(afloat.OutcomeDeadline) || len(res.Attempts) != 0 {
			t.Errorf("source %s, reason %s, attempts %+v; want the heuristic at once, reason deadline, no attempt", res.Source, res.Reason, res.Attempts)
		}
		held[0], _ = task.Enter(context.Background()) // the turn it left, held again

		start := time.Now()
		answered = call(`{"input": {"message": "the site is down"}}`)
		synctest.Wait() // the call waits for a turn
		time.Sleep(200 * time.Millisecond)
		held[0]()
		rec = <-answered
		took := time.Since(start)
		for _, leave := range held[1:] {
			leave()
		}
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %s; want 200 with the heuristic", rec.Code, rec.Body)
		}
		res := decode[envelope](t, rec.Body.Bytes())
		if res.Source != afloat.SourceHeuristic || len(res.Attempts) != 1 {
			t.Errorf("source %s, attempts %+v; want the heuristic after one attempt", res.Source, res.Attempts)
		}
		if took != time.Second {
			t.Errorf("answered %s after it arrived; want its budget, 1s, the 200ms wait for a turn included", took)
		}
	})
}
