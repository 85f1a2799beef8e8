package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/afloat-dev/afloat/internal/scrape"
)

// designMetrics are the metric names of shared/DESIGN.md §8.
var designMetrics = []string{
	"afloat_requests_total", "afloat_attempts_total", "afloat_circuit_opened_total", "afloat_circuit_state",
	"afloat_contract_violations_total", "afloat_reasks_total", "afloat_provider_latency_seconds",
	"afloat_read_timeout_seconds", "afloat_tokens_total", "afloat_cost_total", "afloat_fallback_share",
	"afloat_review_queue_depth", "afloat_review_sla_breaches_total", "afloat_normalize_total",
	"afloat_alerts_firing", "afloat_source_share", "afloat_concurrency_limit", "afloat_shed_total",
	"afloat_state_backend_healthy", "afloat_drill_age_seconds",
}

var metricName = regexp.MustCompile("`(afloat_[a-z0-9_]+)`")

// TestDesignMetricsAreTheDesigns: the list above is DESIGN §8's table, when the design
// document is beside the repository.
func TestDesignMetricsAreTheDesigns(t *testing.T) {
	f, err := os.Open("../../shared/DESIGN.md")
	if err != nil {
		t.Skipf("no design document beside the repository: %v", err)
	}
	defer f.Close()
	var names []string
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## 8."):
			in = true
		case strings.HasPrefix(line, "## "):
			in = false
		case in && strings.HasPrefix(line, "| `afloat_"):
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			for _, m := range metricName.FindAllStringSubmatch(cell, -1) {
				names = append(names, m[1])
			}
		}
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(designMetrics))
	if !slices.Equal(names, want) {
		t.Fatalf("DESIGN §8 names %v\nthe test knows %v", names, want)
	}
}

// value reads one series of a family: a counter's or gauge's value, a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// sum adds the series of a family whose labels include every pair of match.
func sum(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		ls := labels(m)
		ok := true
		for k, v := range match {
			ok = ok && ls[k] == v
		}
		if ok {
			total += value(m)
		}
	}
	return total
}

// TestMetricsAfterARun drives a gateway over simulated providers through the paths the
// metrics watch and reads its /metrics: every metric of DESIGN §8 is there, the ones the run
// exercised moved, no series names a task or route that does not exist or a tenant, and the cost in
// /admin/status is what the cost metrics say.
func TestMetricsAfterARun(t *testing.T) {
	g := scrape.Start(t)
	g.Drive(t)
	fams := g.Families(t)

	t.Run("design names", func(t *testing.T) {
		for _, name := range designMetrics {
			if _, have := fams[name]; !have {
				t.Errorf("%s is not in the scrape", name)
			}
		}
	})

	t.Run("moved", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			match map[string]string
		}{
			{"afloat_requests_total", map[string]string{"task": "triage", "source": "heuristic"}},
			{"afloat_requests_total", map[string]string{"task": "support", "source": "model"}},
			{"afloat_attempts_total", map[string]string{"provider": "primary", "outcome": "circuit_open"}},
			{"afloat_attempts_total", map[string]string{"provider": "primary", "outcome": "contract_violation"}},
			{"afloat_circuit_opened_total", map[string]string{"provider": "primary"}},
			{"afloat_circuit_opened_total", map[string]string{"provider": "backup"}},
			{"afloat_contract_violations_total", map[string]string{"task": "triage", "provider": "primary"}},
			{"afloat_reasks_total", map[string]string{"task": "triage", "provider": "primary"}},
			{"afloat_retries_total", map[string]string{"provider": "primary"}},
			{"afloat_provider_latency_seconds", map[string]string{"provider": "backup", "task": "triage"}},
			{"afloat_read_timeout_seconds", map[string]string{"provider": "primary", "task": "triage"}},
			{"afloat_tokens_total", map[string]string{"provider": "primary", "task": "support"}},
			{"afloat_cost_total", map[string]string{"provider": "backup", "task": "triage"}},
			// The stream cut: the provider generated, the answer was lost. (The injected malformed
			// answers cost nothing: the fault answers in the provider's stead, unbilled.)
			{"afloat_wasted_cost_total", map[string]string{"provider": "primary", "task": "support"}},
			{"afloat_fallback_share", map[string]string{"task": "triage"}},
			{"afloat_source_share", map[string]string{"task": "triage", "source": "model_degraded"}},
			{"afloat_source_share", map[string]string{"task": "triage", "source": "heuristic"}},
			{"afloat_review_enqueued_total", map[string]string{"task": "moderation"}},
			{"afloat_review_resolved_total", map[string]string{"task": "moderation"}},
			{"afloat_state_backend_healthy", nil},
			{"afloat_drill_age_seconds", map[string]string{"task": "triage"}},
		} {
			if _, ok := fams[c.name]; !ok {
				t.Errorf("%s not exported", c.name)
				continue
			}
			if v := sum(fams, c.name, c.match); !(v > 0) {
				t.Errorf("%s%v = %v after the run, want it moved", c.name, c.match, v)
			}
		}
		// The sources off tier 0 add up to the fallback share.
		off := 0.0
		for _, s := range []string{"model_degraded", "heuristic", "unavailable", "human"} {
			off += sum(fams, "afloat_source_share", map[string]string{"task": "triage", "source": s})
		}
		if fb := sum(fams, "afloat_fallback_share", map[string]string{"task": "triage"}); math.Abs(off-fb) > 1e-9 {
			t.Errorf("sources off tier 0 add up to %v, fallback share %v", off, fb)
		}
	})

	t.Run("bounded labels", func(t *testing.T) {
		allowed := map[string][]string{
			// Routes are under the task label, as tasks and routes share one namespace.
			"task":     {"triage", "moderation", "support"},
			"provider": {"primary", "backup"},
		}
		forbidden := append([]string{scrape.Tenant, scrape.ClientKey, scrape.AdminToken}, scrape.Unknown...)
		for _, name := range scrape.Afloat(fams) {
			for _, m := range fams[name].GetMetric() {
				for k, v := range labels(m) {
					if slices.Contains(forbidden, v) {
						t.Errorf("%s{%s=%q}: a series of a client-supplied name or a tenant", name, k, v)
					}
					if vals, ok := allowed[k]; ok && !slices.Contains(vals, v) {
						t.Errorf("%s{%s=%q}: not a configured %s", name, k, v, k)
					}
					if k == "route" || k == "tenant" {
						t.Errorf("%s has a %s label", name, k)
					}
				}
			}
		}
		text := g.Text(t)
		for _, s := range forbidden {
			if bytes.Contains(text, []byte(s)) {
				t.Errorf("the scrape holds %q", s)
			}
		}
	})

	t.Run("status cost", func(t *testing.T) {
		status, _, b := g.Do(t, "GET", "/admin/status", scrape.AdminToken, "")
		if status != http.StatusOK {
			t.Fatalf("status %d %s", status, b)
		}
		type cost struct {
			Window   string  `json:"window"`
			Total    float64 `json:"total"`
			Wasted   float64 `json:"wasted"`
			Answers  int     `json:"answers"`
			Currency *string `json:"currency"`
		}
		var doc struct {
			Tasks  map[string]struct{ Cost cost } `json:"tasks"`
			Routes map[string]struct{ Cost cost } `json:"routes"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			scope   string
			got     cost
			answers int
		}{
			// triage: 3 of tier 0, 1 after the violation, 3 with the primary down.
			{"triage", doc.Tasks["triage"].Cost, 7},
			{"moderation", doc.Tasks["moderation"].Cost, 1},
			{"support", doc.Routes["support"].Cost, 2},
		} {
			match := map[string]string{"task": c.scope}
			total, wasted := sum(fams, "afloat_cost_total", match), sum(fams, "afloat_wasted_cost_total", match)
			g := c.got
			if g.Window != "1h" || g.Currency == nil || *g.Currency != "USD" || g.Answers != c.answers {
				t.Errorf("%s cost %+v, want window 1h, USD, %d answers", c.scope, g, c.answers)
			}
			if math.Abs(g.Total-total) > 1e-12 || math.Abs(g.Wasted-wasted) > 1e-12 || !(g.Total > 0) {
				t.Errorf("%s cost total %v wasted %v; the metrics say %v and %v", c.scope, g.Total, g.Wasted, total, wasted)
			}
		}
		if w := doc.Routes["support"].Cost.Wasted; !(w > 0) {
			t.Errorf("the cut stream's cost is not counted as wasted: %v", w)
		}
	})
}

// TestTaskEnvelopeCost: a task's envelope carries its usage with the cost from the
// provider's price and the price's currency (DESIGN §3).
func TestTaskEnvelopeCost(t *testing.T) {
	g := scrape.Start(t)
	status, _, b := g.Do(t, "POST", "/v1/tasks/triage", scrape.ClientKey, `{"input": {"message": "The site is down"}}`)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	var env struct {
		Provider string `json:"provider"`
		Usage    struct {
			InputTokens  int      `json:"input_tokens"`
			OutputTokens int      `json:"output_tokens"`
			Cost         *float64 `json:"cost"`
			Currency     string   `json:"currency"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	u := env.Usage
	want := (float64(u.InputTokens)*2 + float64(u.OutputTokens)*6) / 1e6 // the primary's price
	if env.Provider != "primary" || u.InputTokens == 0 || u.Cost == nil || math.Abs(*u.Cost-want) > 1e-15 || u.Currency != "USD" {
		t.Fatalf("envelope %s: want the primary's usage costing %v USD", b, want)
	}
}

// TestChatCost: a chat answer's cost, from its provider's price and its own tokens, is in
// X-Afloat-Cost and X-Afloat-Currency and in the usage block beside OpenAI's fields; a
// stream sends the headers as trailers, and the usage block in its last chunk only when
// stream_options.include_usage asks for it.
func TestChatCost(t *testing.T) {
	g := scrape.Start(t)
	type usage struct {
		PromptTokens     int      `json:"prompt_tokens"`
		CompletionTokens int      `json:"completion_tokens"`
		Cost             *float64 `json:"cost"`
		Currency         string   `json:"currency"`
	}
	// The primary's price: 2 and 6 USD per million input and output tokens.
	priced := func(t *testing.T, u usage) float64 {
		t.Helper()
		want := (float64(u.PromptTokens)*2 + float64(u.CompletionTokens)*6) / 1e6
		if u.Cost == nil || math.Abs(*u.Cost-want) > 1e-15 || u.Currency != "USD" || u.PromptTokens == 0 {
			t.Fatalf("usage %+v, want cost %v USD", u, want)
		}
		return want
	}
	header := func(t *testing.T, h http.Header, want float64) {
		t.Helper()
		got, err := strconv.ParseFloat(h.Get("X-Afloat-Cost"), 64)
		if err != nil || math.Abs(got-want) > 1e-15 || h.Get("X-Afloat-Currency") != "USD" {
			t.Fatalf("X-Afloat-Cost %q X-Afloat-Currency %q, want %v USD", h.Get("X-Afloat-Cost"), h.Get("X-Afloat-Currency"), want)
		}
	}
	msgs := `"messages": [{"role": "user", "content": "Where is my order?"}]`

	t.Run("answer", func(t *testing.T) {
		status, h, b := g.Do(t, "POST", "/v1/chat/completions", scrape.ClientKey, `{"model": "support", `+msgs+`}`)
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, b)
		}
		var body struct{ Usage usage }
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		header(t, h, priced(t, body.Usage))
		if len(h.Values("Trailer")) != 0 {
			t.Errorf("trailers declared on an answer that is not streamed: %v", h.Values("Trailer"))
		}
	})

	for _, include := range []bool{true, false} {
		t.Run("stream include_usage="+strconv.FormatBool(include), func(t *testing.T) {
			body := `{"model": "support", "stream": true, ` + msgs + `}`
			if include {
				body = `{"model": "support", "stream": true, "stream_options": {"include_usage": true}, ` + msgs + `}`
			}
			status, h, b := g.Do(t, "POST", "/v1/chat/completions", scrape.ClientKey, body)
			if status != http.StatusOK || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
				t.Fatalf("%d %s", status, b)
			}
			var last *usage
			for _, line := range strings.Split(string(b), "\n") {
				data, ok := strings.CutPrefix(line, "data: {")
				if !ok {
					continue
				}
				var chunk struct{ Usage *usage }
				if err := json.Unmarshal([]byte("{"+data), &chunk); err != nil {
					t.Fatal(err)
				}
				if chunk.Usage != nil {
					last = chunk.Usage
				}
			}
			switch {
			case include && last == nil:
				t.Fatalf("no usage chunk in %s", b)
			case !include && last != nil:
				t.Fatalf("a usage chunk without include_usage: %+v", *last)
			case include:
				header(t, h, priced(t, *last))
			default:
				if c, err := strconv.ParseFloat(h.Get("X-Afloat-Cost"), 64); err != nil || !(c > 0) || h.Get("X-Afloat-Currency") != "USD" {
					t.Fatalf("trailers %q %q, want the answer's cost", h.Get("X-Afloat-Cost"), h.Get("X-Afloat-Currency"))
				}
			}
		})
	}
}
