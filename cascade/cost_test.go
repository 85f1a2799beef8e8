package cascade

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/telemetry"
)

// near reports whether two costs are equal but for float rounding.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// TestSourceShareBesideFallbackShare: afloat_source_share tells the backup's answers from the
// heuristic's over the window of afloat_fallback_share; the sources other than tier 0's add
// up to the fallback share, all of them to 1, and answers older than the window leave both.
func TestSourceShareBesideFallbackShare(t *testing.T) {
	if got, want := len(telemetry.ShareSources()), int(numShareSources); got != want {
		t.Fatalf("%d source names, %d sources", got, want)
	}
	for _, c := range []struct {
		src      afloat.Source
		degraded bool
		want     string
	}{
		{afloat.SourceModel, false, "model"}, {afloat.SourceModel, true, "model_degraded"},
		{afloat.SourceHeuristic, true, "heuristic"}, {afloat.SourceUnavailable, true, "unavailable"},
		{afloat.SourceHuman, true, "human"},
	} {
		if got := telemetry.ShareSources()[sourceOf(c.src, c.degraded)]; got != c.want {
			t.Errorf("%s degraded=%v reads %q, want %q", c.src, c.degraded, got, c.want)
		}
	}

	badRequest := failWith(400, afloat.Contract) // falls through, never retried, never opens
	fx := newFixture(t, nil,
		func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			if n == 0 || n >= 3 {
				return answer(validAnswer)(ctx, req, n)
			}
			return badRequest(ctx, req, n)
		},
		func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			if n == 0 {
				return answer(validAnswer)(ctx, req, n)
			}
			return badRequest(ctx, req, n)
		})
	task := fx.task(t, nil)
	m := fx.eng.Metrics()
	shares := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range telemetry.ShareSources() {
			out[s] = testutil.ToFloat64(m.SourceShare.WithLabelValues("triage", s))
		}
		return out
	}
	if n := testutil.CollectAndCount(m.SourceShare); n != len(telemetry.ShareSources()) {
		t.Fatalf("%d source share series at start, want one per source", n)
	}
	var sources []string
	for range 3 { // tier 0; the backup; the heuristic
		res, err := task.RunJSON(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, string(res.Source)+"/"+res.Provider)
	}
	if want := []string{"model/p0", "model/p1", "heuristic/"}; !slices.Equal(sources, want) {
		t.Fatalf("answers %v, want %v", sources, want)
	}
	got := shares()
	third := 1.0 / 3
	want := map[string]float64{"model": third, "model_degraded": third, "heuristic": third, "unavailable": 0, "human": 0}
	sum, others := 0.0, 0.0
	for s, w := range want {
		if !near(got[s], w) {
			t.Errorf("source_share{source=%q} = %v, want %v", s, got[s], w)
		}
		sum += got[s]
		if s != "model" {
			others += got[s]
		}
	}
	fallback := testutil.ToFloat64(m.FallbackShare.WithLabelValues("triage"))
	if !near(sum, 1) || !near(others, fallback) || !near(fallback, task.FallbackShare()) {
		t.Errorf("sources add up to %v, those off tier 0 to %v; fallback share %v (task says %v)", sum, others, fallback, task.FallbackShare())
	}

	// A minute later the three have left the window: one answer of tier 0 is all of it.
	fx.clock.Advance(61 * time.Second)
	if _, err := task.RunJSON(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	if got := shares(); got["model"] != 1 || got["model_degraded"] != 0 || got["heuristic"] != 0 {
		t.Errorf("after the window: %v", got)
	}
	if f := testutil.ToFloat64(m.FallbackShare.WithLabelValues("triage")); f != 0 {
		t.Errorf("fallback share after the window %v", f)
	}
}

// TestTaskUsageCostAndWaste: the envelope's usage sums every attempt with its price; what
// the answers that broke the contract cost is counted apart, in afloat_wasted_cost_total and
// in the task's Spend, beside afloat_cost_total and afloat_tokens_total by provider and task.
func TestTaskUsageCostAndWaste(t *testing.T) {
	fx := newFixture(t, func(c *Config) {
		c.Providers[1].Price = Price{InputPer1M: 3, OutputPer1M: 6, Currency: "USD"}
	}, answer("I cannot classify this ticket."), answer(validAnswer))
	task := fx.task(t, nil)
	res, err := task.RunJSON(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	if res.Provider != "p1" || len(res.Attempts) != 3 {
		t.Fatalf("answered by %q after %d attempts, want p1 after a violation and its re-ask on p0", res.Provider, len(res.Attempts))
	}
	p0 := (100*1.0 + 20*2.0) / 1e6 // each of p0's two answers
	p1 := (100*3.0 + 20*6.0) / 1e6
	u := res.Usage
	if u.InputTokens != 300 || u.OutputTokens != 60 || u.Currency != "USD" || !near(u.Cost, 2*p0+p1) {
		t.Fatalf("usage %+v, want 300/60 tokens costing %v USD", u, 2*p0+p1)
	}
	m := fx.eng.Metrics()
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"afloat_cost_total{p0}", testutil.ToFloat64(m.Cost.WithLabelValues("p0", "triage")), 2 * p0},
		{"afloat_cost_total{p1}", testutil.ToFloat64(m.Cost.WithLabelValues("p1", "triage")), p1},
		{"afloat_tokens_total{p0}", testutil.ToFloat64(m.Tokens.WithLabelValues("p0", "triage")), 240},
		{"afloat_tokens_total{p1}", testutil.ToFloat64(m.Tokens.WithLabelValues("p1", "triage")), 120},
		{"afloat_wasted_cost_total{p0}", testutil.ToFloat64(m.WastedCost.WithLabelValues("p0", "triage")), 2 * p0},
		{"afloat_wasted_cost_total{p1}", testutil.ToFloat64(m.WastedCost.WithLabelValues("p1", "triage")), 0},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	sp := task.Spend()
	if sp.Window != time.Hour || !near(sp.Total, 2*p0+p1) || !near(sp.Wasted, 2*p0) || sp.Answers != 1 || sp.Currency != "USD" {
		t.Fatalf("spend %+v", sp)
	}

	// The window forgets what is older than an hour, five minutes at a time.
	fx.clock.Advance(59 * time.Minute)
	if sp := task.Spend(); sp.Answers != 1 {
		t.Fatalf("59 minutes later: %+v", sp)
	}
	fx.clock.Advance(6 * time.Minute)
	if sp := task.Spend(); sp.Answers != 0 || sp.Total != 0 || sp.Wasted != 0 || sp.Currency != "USD" {
		t.Fatalf("65 minutes later: %+v", sp)
	}
}

// TestSpendCurrency: a task's spend is in its tiers' price currency; tiers priced in
// different currencies read "mixed", unpriced tiers add none.
func TestSpendCurrency(t *testing.T) {
	for _, c := range []struct {
		name       string
		currencies []string
		want       string
	}{
		{"one", []string{"USD", "USD"}, "USD"},
		{"unpriced backup", []string{"RUB", ""}, "RUB"},
		{"none", []string{"", ""}, ""},
		{"two", []string{"USD", "RUB"}, afloat.MixedCurrency},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t, func(cfg *Config) {
				for i, cur := range c.currencies {
					cfg.Providers[i].Price.Currency = cur
				}
			}, answer(validAnswer), answer(validAnswer))
			if got := fx.task(t, nil).Spend().Currency; got != c.want {
				t.Fatalf("currency %q, want %q", got, c.want)
			}
		})
	}
}

// TestRouteAnswerCost: a route's answer carries its own cost (the chat client is billed
// that alone), its Reply's usage every attempt's; a stream cut before its usage arrived is
// costed by an estimate of its tokens and counted as wasted.
func TestRouteAnswerCost(t *testing.T) {
	price := Price{InputPer1M: 1, OutputPer1M: 2, Currency: "EUR"}
	cutting := &streamer{recv: func(_ context.Context, n int) (afloat.Chunk, error) {
		if n == 0 {
			return afloat.Chunk{Delta: "Hel"}, nil
		}
		return afloat.Chunk{}, &afloat.ProviderError{Kind: afloat.Unavailable, Err: io.ErrUnexpectedEOF}
	}}
	failing := &fake{fn: failWith(400, afloat.Contract)}
	good := &fake{fn: answer("Hello")}
	e, err := New(Config{Providers: []ProviderConfig{
		{Name: "cut", Provider: cutting, Price: price, Retry: RetryConfig{Max: -1}, Continuation: ContinueNone},
		{Name: "bad", Provider: failing, Price: price, Retry: RetryConfig{Max: -1}},
		{Name: "good", Provider: good, Price: price, Retry: RetryConfig{Max: -1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance,
		Cascade: []RouteTier{{Provider: "bad"}, {Provider: "good"}}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Complete(context.Background(), hi)
	if err != nil {
		t.Fatal(err)
	}
	answerCost := (100*1.0 + 20*2.0) / 1e6
	if u := rep.Response.Usage; !near(u.Cost, answerCost) || u.Currency != "EUR" || u.InputTokens != 100 {
		t.Fatalf("answer's usage %+v, want its own cost %v EUR", u, answerCost)
	}
	if sp := r.Spend(); sp.Answers != 1 || !near(sp.Total, answerCost) || sp.Wasted != 0 || sp.Currency != "EUR" {
		t.Fatalf("spend %+v", sp)
	}

	cr, err := e.Route(RouteConfig{Name: "cut-chat", Criticality: afloat.Assistance, Cascade: []RouteTier{{Provider: "cut"}}})
	if err != nil {
		t.Fatal(err)
	}
	var c collector
	rep, err = cr.Stream(context.Background(), hi, c.emit)
	var se *StreamError
	if !errors.As(err, &se) || c.text.String() != "Hel" {
		t.Fatalf("streamed %q, err %v; want a cut after the first chunk", c.text.String(), err)
	}
	// "Be brief." and "hi" are 11 characters: 3 tokens; "Hel" is 1.
	estimated := (3*1.0 + 1*2.0) / 1e6
	if u := rep.Usage; u.InputTokens != 3 || u.OutputTokens != 1 || !near(u.Cost, estimated) {
		t.Fatalf("usage of the cut stream %+v, want 3/1 tokens costing %v", u, estimated)
	}
	if w := testutil.ToFloat64(e.Metrics().WastedCost.WithLabelValues("cut", "cut-chat")); !near(w, estimated) {
		t.Fatalf("afloat_wasted_cost_total{cut} = %v, want %v", w, estimated)
	}
	if sp := cr.Spend(); sp.Answers != 0 || !near(sp.Wasted, estimated) || !near(sp.Total, estimated) {
		t.Fatalf("spend of the cut stream %+v", sp)
	}
}
