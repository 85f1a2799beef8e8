package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	dto "github.com/prometheus/client_model/go"

	"github.com/afloat-dev/afloat/internal/scrape"
)

const (
	rulesFile     = "prometheus/afloat-rules.yaml"
	rulesTestFile = "prometheus/afloat-rules.test.yaml"
	dashboardFile = "grafana/afloat-dashboard.json"
)

// builtinAlerts are the alerts of afloat's alerts: block (shared/DESIGN.md §4), which the
// rules mirror one each.
var builtinAlerts = []string{"fallback_share", "primary_open", "contract_violation_rate", "review_sla", "unusable", "drill_stale", "canary_rolled_back"}

// prometheusSeries are the series Prometheus makes itself, which the dashboard may read.
var prometheusSeries = []string{"ALERTS", "ALERTS_FOR_STATE", "up"}

var (
	exportedOnce sync.Once
	exportedFams map[string]*dto.MetricFamily
)

// exported returns the metric families of a real scrape: a gateway of a small config over
// simulated providers, driven through the paths its metrics watch.
func exported(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	exportedOnce.Do(func() {
		g := scrape.Start(t)
		g.Drive(t)
		exportedFams = g.Families(t)
	})
	if exportedFams == nil {
		t.Fatal("the scrape failed in an earlier test")
	}
	return exportedFams
}

// isExported reports whether a PromQL series name is exported: a family, or a histogram's
// _bucket, _sum or _count.
func isExported(fams map[string]*dto.MetricFamily, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
				return true
			}
		}
	}
	return false
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlKeywords  = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}
	grafanaVariable = regexp.MustCompile(`\$\{?[a-zA-Z_]+\}?`)
)

// metricNames returns the series names a PromQL expression reads: its identifiers that are
// not functions, aggregations, keywords, label names of a grouping or label matchers.
func metricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = promqlMatchers.ReplaceAllString(e, "")
	e = promqlRanges.ReplaceAllString(e, "")
	e = promqlGrouping.ReplaceAllString(e, "")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		if i := loc[0]; i > 0 && strings.ContainsRune("0123456789.$", rune(e[i-1])) {
			continue // inside a number (1e6) or a variable
		}
		name := e[loc[0]:loc[1]]
		call := strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "(")
		if call || slices.Contains(promqlKeywords, strings.ToLower(name)) || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (task) (rate(afloat_requests_total{degraded="true", task=~"a|b"}[5m])) / on (task) group_left sum(x_total)`, []string{"afloat_requests_total", "x_total"}},
		{`histogram_quantile(0.99, sum by (le, provider) (rate(afloat_provider_latency_seconds_bucket[$__rate_interval])))`, []string{"afloat_provider_latency_seconds_bucket"}},
		{`max by (task) (afloat_drill_age_seconds) > 90 * 86400 and 1e6 < bool up`, []string{"afloat_drill_age_seconds", "up"}},
		{`ALERTS{alertstate="firing", alertname=~"Afloat.+"} unless on(provider) afloat_circuit_state == 0`, []string{"ALERTS", "afloat_circuit_state"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.expr, got, c.want)
		}
	}
}

// promtool returns the path of promtool, or skips the test when it is missing (under CI=true,
// fails it: CI installs it).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("promtool is not on PATH (CI installs it: apt-get install prometheus): %v", err)
	}
	t.Skipf("promtool is not on PATH (apt-get install prometheus, or Prometheus's release archive): %v", err)
	return ""
}

func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestPrometheusRules: the shipped rules are one alerting rule per built-in alert, each with
// a severity and a summary, over metrics afloat exports; promtool accepts them and passes
// their unit tests.
func TestPrometheusRules(t *testing.T) {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalWithOptions(b, &rf, yaml.Strict()); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if len(rf.Groups) == 0 {
		t.Fatalf("%s: no groups", rulesFile)
	}
	fams := exported(t)
	var mirrored []string
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: a name and rules are required", g.Name)
		}
		for _, r := range g.Rules {
			where := fmt.Sprintf("group %s, rule %s", g.Name, r.Alert)
			switch {
			case r.Record != "" || !strings.HasPrefix(r.Alert, "Afloat"):
				t.Errorf("%s: want alerting rules named Afloat…", where)
			case strings.TrimSpace(r.Expr) == "":
				t.Errorf("%s: no expr", where)
			case r.Labels["severity"] == "" || r.Annotations["summary"] == "":
				t.Errorf("%s: a severity label and a summary annotation are required", where)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
			a := r.Labels["afloat_alert"]
			if !slices.Contains(builtinAlerts, a) || slices.Contains(mirrored, a) {
				t.Errorf("%s: afloat_alert %q is not a built-in alert, or mirrored twice", where, a)
			}
			mirrored = append(mirrored, a)
			names := metricNames(r.Expr)
			if len(names) == 0 {
				t.Errorf("%s: no metric in %q", where, r.Expr)
			}
			for _, name := range names {
				if !isExported(fams, name) {
					t.Errorf("%s reads %s, which afloat does not export", where, name)
				}
			}
		}
	}
	for _, a := range builtinAlerts {
		if !slices.Contains(mirrored, a) {
			t.Errorf("no rule mirrors the built-in alert %s", a)
		}
	}

	t.Run("promtool", func(t *testing.T) {
		runPromtool(t, "prometheus", "check", "rules", filepath.Base(rulesFile))
		runPromtool(t, "prometheus", "test", "rules", filepath.Base(rulesTestFile))
	})
}

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	GridPos *struct{ X, Y, W, H int } `json:"gridPos"`
}

// TestGrafanaDashboard: the dashboard parses, has the panels an operator looks for, and every
// query reads metrics afloat exports (or Prometheus's own ALERTS); with promtool, each query
// parses as PromQL.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, %d panels", dashboardFile, d.Title, d.UID, len(d.Panels))
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	fams := exported(t)
	ids := map[int]bool{}
	read := map[string]bool{}
	var exprs []string
	for _, p := range d.Panels {
		if p.Title == "" || p.Type == "" || p.GridPos == nil || len(p.Targets) == 0 || ids[p.ID] {
			t.Errorf("panel %d %q: a unique id, a title, a type, a position and queries are required", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: a query without expr or refId", p.Title)
				continue
			}
			for _, v := range grafanaVariable.FindAllString(tg.Expr, -1) {
				name := strings.Trim(v, "${}")
				if !strings.HasPrefix(name, "__") && !vars[name] {
					t.Errorf("panel %q reads the variable %s, which the dashboard does not define", p.Title, v)
				}
			}
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %q", p.Title, tg.Expr)
			}
			for _, name := range names {
				read[name] = true
				if !isExported(fams, name) && !slices.Contains(prometheusSeries, name) {
					t.Errorf("panel %q reads %s, which afloat does not export", p.Title, name)
				}
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	// What the dashboard is for: breakers, sources and the degraded share, latency, cost,
	// the review queue, the alerts.
	for _, name := range []string{"afloat_circuit_state", "afloat_source_share", "afloat_fallback_share",
		"afloat_provider_latency_seconds_bucket", "afloat_cost_total", "afloat_review_queue_depth", "ALERTS"} {
		if !read[name] {
			t.Errorf("no panel reads %s", name)
		}
	}

	t.Run("promtool", func(t *testing.T) {
		// Each query as a recording rule, Grafana's variables given values, for promtool to
		// parse.
		var sb strings.Builder
		sb.WriteString("groups:\n  - name: dashboard\n    rules:\n")
		for i, e := range exprs {
			e = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$task", ".*").Replace(e)
			q, _ := json.Marshal(e) // a JSON string is a YAML string
			fmt.Fprintf(&sb, "      - record: afloat:dashboard_query_%d\n        expr: %s\n", i, q)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "dashboard-queries.yaml"), []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		runPromtool(t, dir, "check", "rules", "dashboard-queries.yaml")
	})
}
