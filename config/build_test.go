package config

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/review"
)

// Triage is the answer of the example's triage task.
type Triage struct {
	Department   *string `json:"department"`
	IsUrgent     float64 `json:"is_urgent"`
	UrgencyScore float64 `json:"urgency_score"`
}

const examplePath = "../examples/afloat.yaml"

// runTriage runs the triage task on a fake clock, advancing it until the call ends.
func runTriage(t *testing.T, clk *clockwork.FakeClock, waiters int, task *cascade.Task, in afloat.Input) afloat.Result[Triage] {
	t.Helper()
	var res afloat.Result[Triage]
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = afloat.Run[Triage](context.Background(), task, in)
	}()
	drive(t, clk, waiters, done)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// TestBuildExample: the example config builds, and its triage task answers through the sim
// providers: the primary first, the backup when a drill takes the primary down.
func TestBuildExample(t *testing.T) {
	f, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	f.Review.SQLite.Path = filepath.Join(t.TempDir(), "afloat.db") // not beside the example
	clk := clockwork.NewFakeClock()
	rt, err := f.Build(BuildOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	orders := []struct {
		name      string
		got, want []string
	}{
		{"providers", rt.ProviderOrder, []string{"sim-primary", "sim-backup", "sim-emergency", "t-lite"}},
		{"engine providers", rt.Engine.Providers(), []string{"sim-primary", "sim-backup", "sim-emergency", "t-lite"}},
		{"tasks", rt.TaskOrder, []string{"triage", "moderation"}},
		{"routes", rt.RouteOrder, []string{"support-agent"}},
		{"triage inputs", rt.Tasks["triage"].Inputs(), []string{"subject", "message"}},
	}
	for _, o := range orders {
		if !slices.Equal(o.got, o.want) {
			t.Errorf("%s %v, want %v", o.name, o.got, o.want)
		}
	}
	if len(rt.Faults) != 4 || rt.Registry == nil || rt.Metrics == nil || rt.Review == nil {
		t.Errorf("runtime parts missing: %d faults, registry %v, metrics %v, review %v", len(rt.Faults), rt.Registry, rt.Metrics, rt.Review)
	}
	if got := rt.ReviewSLA["moderation"]; got != 30*time.Minute {
		t.Errorf("moderation review SLA %v, want 30m", got)
	}
	if got := rt.Tasks["moderation"].Policy(); got != cascade.PolicyHuman {
		t.Errorf("moderation policy %s, want human", got)
	}
	doc, _ := rt.Flags.Flags(context.Background())
	for _, name := range []string{"triage", "moderation", "support-agent"} {
		if tf, ok := doc.Tasks[name]; !ok || tf.Rollout() != 100 || !doc.Allow(name, "acme") {
			t.Errorf("flags of %s: %+v (present %v), want on at 100%%", name, tf, ok)
		}
	}

	ticket := afloat.Input{"subject": "Сайт не работает", "message": "Ошибка 502 с утра"}
	res := runTriage(t, clk, 3, rt.Tasks["triage"], ticket)
	if res.Source != afloat.SourceModel || res.Degraded || res.Provider != "sim-primary" || res.PromptVersion != "triage/sim-primary/v3" {
		t.Fatalf("first call %+v, want the model's answer from sim-primary", res)
	}
	if res.Value.IsUrgent < 0 || res.Value.IsUrgent > 1 {
		t.Errorf("is_urgent %v outside the schema's range", res.Value.IsUrgent)
	}

	if err := rt.Faults["sim-primary"].Set(fault.Fault{Mode: fault.ModeUnavailable, Status: 503}); err != nil {
		t.Fatal(err)
	}
	res = runTriage(t, clk, 3, rt.Tasks["triage"], ticket)
	if res.Source != afloat.SourceModel || !res.Degraded || res.Provider != "sim-backup" || res.PromptVersion != "triage/sim-backup/v2" {
		t.Fatalf("call with the primary down %+v, want the backup's answer, degraded", res)
	}
}

// TestBuildRegisterer: metrics go to the given registerer, and no registry is made.
func TestBuildRegisterer(t *testing.T) {
	f, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rt, err := f.Build(BuildOptions{Clock: clockwork.NewFakeClock(), Registerer: reg, Review: review.NewMemory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Registry != nil {
		t.Error("Build made a registry though one was given")
	}
	n, err := testutil.GatherAndCount(reg, "afloat_attempts_total")
	if err != nil || n == 0 {
		t.Errorf("afloat_attempts_total series on the given registry: %d, %v", n, err)
	}
}

// TestBuildNoneMeansNone: retry.max, retry.budget_ratio and reask.max of 0 mean none, which
// the cascade reads from a negative value; left out, they take their defaults.
func TestBuildNoneMeansNone(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		retryMax  int
		ratio     float64
		maxReasks int
	}{
		{"left out", minimal, 1, 0.2, 1},
		{"provider max 0", strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, retry: {max: 0}}", 1), -1, 0.2, 1},
		{"provider max 3", strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, retry: {max: 3}}", 1), 3, 0.2, 1},
		{"defaults max 0", "defaults: {retry: {max: 0}, reask: {max: 0}}\n" + minimal, -1, 0.2, -1},
		{"provider ratio 0", strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, retry: {budget_ratio: 0}}", 1), 1, -1, 1},
		{"defaults ratio 0.5", "defaults: {retry: {budget_ratio: 0.5}}\n" + minimal, 1, 0.5, 1},
		{"task reask 2", minimal + "    reask: {max: 2}\n", 1, 0.2, 2},
		{"task reask 0", minimal + "    reask: {max: 0}\n", 1, 0.2, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.config), "/cfg", noEnv)
			if err != nil {
				t.Fatal(err)
			}
			b := &builder{f: f, clock: clockwork.NewFakeClock(), rt: &Runtime{Faults: map[string]*fault.Provider{}}}
			pc, ok := b.provider(f.Provider("primary"))
			if !ok || len(b.errs) > 0 {
				t.Fatalf("provider: %v", b.errs)
			}
			if pc.Retry.Max != tc.retryMax {
				t.Errorf("RetryConfig.Max %d, want %d", pc.Retry.Max, tc.retryMax)
			}
			if pc.Retry.BudgetRatio != tc.ratio {
				t.Errorf("RetryConfig.BudgetRatio %v, want %v", pc.Retry.BudgetRatio, tc.ratio)
			}
			tc2, _ := b.taskConfig(f.Task("triage")) // the files are absent: only the numbers count
			if tc2.MaxReasks != tc.maxReasks {
				t.Errorf("TaskConfig.MaxReasks %d, want %d", tc2.MaxReasks, tc.maxReasks)
			}
		})
	}
}

// TestBuildNoRetryRuns: with retry.max 0 a transient failure goes to the next tier at once:
// no backoff is waited (the fake clock never moves) and no retry is counted.
func TestBuildNoRetryRuns(t *testing.T) {
	config := strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, retry: {max: 0, budget_ratio: 1}}", 1)
	rt := buildTree(t, config, clockwork.NewFakeClock())
	if err := rt.Faults["primary"].Set(fault.Fault{Mode: fault.ModeUnavailable, Status: 503}); err != nil {
		t.Fatal(err)
	}
	var res afloat.Result[json.RawMessage]
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = rt.Tasks["triage"].RunJSON(context.Background(), afloat.Input{"subject": "s", "message": "m"})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call is waiting on the fake clock: it backs off for a retry")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 2 || res.Attempts[0].Provider != "primary" || res.Provider != "backup" {
		t.Errorf("attempts %+v, want one on primary, then backup's answer", res.Attempts)
	}
	if got := testutil.ToFloat64(rt.Metrics.Retries.WithLabelValues("triage", "primary")); got != 0 {
		t.Errorf("%v retries on primary, want 0", got)
	}
}

// TestBuildBreakerDisabled: breaker {enabled: false} makes a breaker that never opens.
func TestBuildBreakerDisabled(t *testing.T) {
	tests := []struct {
		name    string
		breaker string
		want    breaker.State
	}{
		{"enabled", "{consecutive_failures: 3}", breaker.StateOpen},
		{"disabled", "{consecutive_failures: 3, enabled: false}", breaker.StateClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config := strings.Replace(minimal, "primary: {type: sim}",
				"primary: {type: sim, retry: {max: 0}, breaker: "+tc.breaker+"}", 1)
			rt := buildTree(t, config, clockwork.NewFakeClock())
			if err := rt.Faults["primary"].Set(fault.Fault{Mode: fault.ModeUnavailable, Status: 503}); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				// No waits: the fault fails at once and the backup answers at once.
				if _, err := rt.Tasks["triage"].RunJSON(context.Background(), afloat.Input{"subject": "s", "message": "m"}); err != nil {
					t.Fatal(err)
				}
			}
			if got := rt.Engine.Breaker("primary").State(context.Background()); got != tc.want {
				t.Errorf("breaker %s, want %s", got, tc.want)
			}
		})
	}
}

// TestBuildInputSchema: declared input fields are required and type-checked on every call.
func TestBuildInputSchema(t *testing.T) {
	config := minimal + "    input: {subject: {type: string}, message: {type: string}, account: {type: integer}}\n"
	rt := buildTree(t, config, clockwork.NewFakeClock())
	task := rt.Tasks["triage"]
	if got := task.Inputs(); !slices.Equal(got, []string{"subject", "message", "account"}) {
		t.Errorf("inputs %v", got)
	}
	tests := []struct {
		name  string
		in    afloat.Input
		field string
	}{
		{"missing field", afloat.Input{"subject": "s", "message": "m"}, "account"},
		{"wrong type", afloat.Input{"subject": "s", "message": "m", "account": "seven"}, "account"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := task.RunJSON(context.Background(), tc.in)
			var ie *cascade.InputError
			if !errors.As(err, &ie) || ie.Field != tc.field {
				t.Fatalf("error %v, want an input error naming %s", err, tc.field)
			}
		})
	}
	res, err := task.RunJSON(context.Background(), afloat.Input{"subject": "s", "message": "m", "account": 7})
	if err != nil || res.Source != afloat.SourceModel {
		t.Fatalf("valid input: %+v, %v", res, err)
	}
	var v Triage
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
}

// TestBuildErrors: what only Build can tell is reported with its path and line, every error
// at once.
func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		path    string
		msg     string
		keyLine string // the text of the line the error is on
	}{
		{
			name:   "provider ca_file missing",
			config: strings.Replace(minimal, "backup: {type: sim}", "backup: {type: gigachat, model: GigaChat-Pro, auth_key: k, ca_file: certs/none.pem}", 1),
			path:   "providers.backup.ca_file", msg: "no such file",
			keyLine: "backup: {type: gigachat",
		},
		{
			name:   "provider credentials the adapter refuses",
			config: strings.Replace(minimal, "backup: {type: sim}", "backup: {type: yandex, model_uri: gpt://f/yandexgpt/latest, api_key: k, iam_token: t, folder_id: f}", 1),
			path:   "providers.backup.type", msg: "an api key or an iam token, not both",
			keyLine: "backup: {type: yandex",
		},
		{
			name:   "missing re-ask template",
			config: strings.Replace(minimal, "prompt: prompts/backup.v1.tmpl}", "prompt: prompts/backup.v1.tmpl, reask_prompt: prompts/gone.reask.tmpl}", 1),
			path:   "tasks.triage.cascade[1].reask_prompt", msg: "no such file",
			keyLine: "prompts/gone.reask.tmpl",
		},
		{
			name:   "missing schema file",
			config: strings.Replace(minimal, "schema: triage.json", "schema: nope.json", 1),
			path:   "tasks.triage.schema", msg: "no such file",
			keyLine: "schema: nope.json",
		},
		{
			name:   "missing prompt file",
			config: strings.Replace(minimal, "prompts/backup.v1.tmpl", "prompts/gone.v1.tmpl", 1),
			path:   "tasks.triage.cascade[1].prompt", msg: "no such file",
			keyLine: "prompts/gone.v1.tmpl",
		},
		{
			name:   "heuristic default that breaks the schema",
			config: minimal + "    heuristic:\n      - {default: {department: null, is_urgent: 0.2, urgency_score: 9}}\n",
			path:   "tasks.triage", msg: "does not fit the schema",
			keyLine: "  triage:",
		},
		{
			name:   "breaker recovery longer than its cap",
			config: strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, breaker: {recovery: 10m, max_recovery: 1m}}", 1),
			path:   "providers.primary.breaker", msg: "shorter than recovery",
			keyLine: "primary: {type: sim, breaker",
		},
		{
			name:   "read timeout bounds",
			config: strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, timeouts: {min: 5s, max: 1s}}", 1),
			path:   "providers.primary.timeouts", msg: "exceeds max",
			keyLine: "primary: {type: sim, timeouts",
		},
		{
			name:   "sim latency",
			config: strings.Replace(minimal, "primary: {type: sim}", "primary: {type: sim, latency: {p50: 2s, p95: 1s}}", 1),
			path:   "providers.primary.type", msg: "sim:",
			keyLine: "primary: {type: sim, latency",
		},
		{
			name:   "postgres review store that cannot be reached",
			config: "review: {store: postgres, postgres: {url: \"postgres://afloat@127.0.0.1:1/afloat?sslmode=disable\"}}\n" + minimal,
			path:   "review.postgres.url", msg: "open postgres afloat@127.0.0.1:1/afloat",
			keyLine: "review: {store: postgres",
		},
		{
			name:   "review database that cannot open",
			config: "review: {sqlite: {path: no/such/folder/afloat.db}}\n" + minimal,
			path:   "review.sqlite.path", msg: "unable to open",
			keyLine: "review: {sqlite:",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{
				"afloat.yaml": tc.config, "triage.json": triageSchema,
				"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
			})
			f, err := Load(filepath.Join(dir, "afloat.yaml"))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			rt, err := f.Build(BuildOptions{Clock: clockwork.NewFakeClock()})
			if rt != nil || err == nil {
				t.Fatal("built without error")
			}
			e := findError(asErrors(t, err), tc.path, tc.msg)
			if e == nil {
				t.Fatalf("no error at %s saying %q; got:\n%v", tc.path, tc.msg, err)
			}
			want := 0
			for i, l := range strings.Split(tc.config, "\n") {
				if strings.Contains(l, tc.keyLine) {
					want = i + 1
					break
				}
			}
			if e.Line != want {
				t.Errorf("error %q on line %d, want %d", e, e.Line, want)
			}
		})
	}
}

// TestProviderClientKeepsItsInFlightIdle holds an HTTP provider's client to as many idle
// connections as its max_in_flight: with the pool at 64, as it was, a load held at 200 calls
// closed a connection after most answers and dialed (and handshook) one for the next call.
func TestProviderClientKeepsItsInFlightIdle(t *testing.T) {
	for _, n := range []int{8, 256, 1000} {
		hc, err := httpClient(&Provider{Name: "p", Type: "openai", MaxInFlight: n})
		if err != nil {
			t.Fatal(err)
		}
		if got := hc.Transport.(*http.Transport).MaxIdleConnsPerHost; got != n {
			t.Errorf("max_in_flight %d: %d idle connections kept, want %d", n, got, n)
		}
	}
}
