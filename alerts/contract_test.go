package alerts_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/afloattest"
	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/provider/openai"
)

// modelServer is an OpenAI-compatible endpoint that answers 200 to every call, with the
// task's JSON or, once updated, with prose: a model update that broke the contract.
type modelServer struct {
	*httptest.Server
	prose atomic.Bool
}

func newModelServer(t *testing.T) *modelServer {
	m := &modelServer{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		content := validAnswer
		if m.prose.Load() {
			content = "Sure! This ticket looks technical and fairly urgent; I would route it to the on-call team."
		}
		b, _ := json.Marshal(content)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":12,"total_tokens":32}}`, b)
	}))
	t.Cleanup(m.Close)
	return m
}

// TestAlertContractViolationRate: the primary keeps answering HTTP 200, but after its
// "update" with prose instead of the task's JSON. Every answer fails the contract (re-asked,
// then passed to the backup), the breaker stays closed, and contract_violation_rate fires for
// (triage, primary) once the share held above 0.5 for its For; the backup's stays quiet.
// Once the model answers JSON again, it resolves.
func TestAlertContractViolationRate(t *testing.T) {
	ctx := t.Context()
	const tick, hold, perTick = 5 * time.Second, 20 * time.Second, 5
	fc := clockwork.NewFakeClockAt(start)
	model := newModelServer(t)
	client, err := openai.New(openai.Config{Name: "primary", BaseURL: model.URL, Model: "m", HTTPClient: model.Client(), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	eng, task := triageOver(t, fc, client, afloattest.Answering("backup", validAnswer))
	ev, err := alerts.New(alerts.Config{
		Rules:  []alerts.Rule{{Name: alerts.ContractViolationRate, Above: 0.5, For: hold, Window: 2 * tick, MinCalls: perTick}},
		Counts: alerts.MetricCounts{Metrics: eng.Metrics()}, Breakers: eng, Clock: fc,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	ev.Evaluate(ctx)
	step := func() {
		t.Helper()
		for range perTick {
			if _, err := task.RunJSON(ctx, ticket); err != nil {
				t.Fatal(err)
			}
		}
		fc.Advance(tick)
		ev.Evaluate(ctx)
	}
	for range 6 {
		step()
	}
	if got := ev.Firing(); len(got) != 0 {
		t.Fatalf("firing while the model answers JSON: %+v", got)
	}

	model.prose.Store(true)
	updated := fc.Now()
	var fired time.Time
	for range 12 {
		step()
		if got := ev.Firing(); len(got) > 0 && fired.IsZero() {
			fired = fc.Now()
			s := got[0]
			if len(got) != 1 || s.Scope != (alerts.Scope{Task: "triage", Provider: "primary"}) || s.Value != 1 || s.Threshold != 0.5 {
				t.Errorf("firing %+v, want triage on primary alone, every answer a violation", got)
			}
		}
		if st := eng.Breaker("primary").State(ctx); st != breaker.StateClosed {
			t.Fatalf("primary breaker %v after contract violations: they must never move it", st)
		}
	}
	// Seen above at the first evaluation after the update; fired For later.
	if want := updated.Add(tick + hold); !fired.Equal(want) {
		t.Fatalf("fired at %v, want %v", fired.Sub(start), want.Sub(start))
	}
	if res, err := task.RunJSON(ctx, ticket); err != nil || res.Provider != "backup" || !res.Degraded {
		t.Errorf("during the violations the backup answers: %+v, %v", res, err)
	}

	model.prose.Store(false)
	for range 10 {
		step()
	}
	if got := ev.Firing(); len(got) != 0 {
		t.Errorf("still firing after the model answers JSON again: %+v", got)
	}
}
