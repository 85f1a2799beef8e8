package gateway

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
)

// Prompt versions of task "release": primary's v2 is the incumbent, its v3 the candidate.
const (
	releaseIncumbent = "release/primary/v2"
	releaseCandidate = "release/primary/v3"
)

// withCanary adds task "release" (enrichment, over primary then backup) with a canary on its
// primary tier on clk: half the calls, split by request, to prompt v3; a one-minute window,
// one call per arm. Its latency and cost thresholds are wide, so that arms answering alike
// are promoted whatever the real time their calls took.
func withCanary(t *testing.T, clk clockwork.Clock) envOption {
	return func(c *Config) {
		tmpl := func(name string) *prompt.Template {
			p, err := prompt.Parse(name, "--- system\nAnswer with JSON.\n--- user\n{{.message}}")
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		task, err := c.Engine.Task(cascade.TaskConfig{Name: "release", Criticality: afloat.Enrichment, Budget: 2 * time.Second,
			Schema:  []byte(triageSchema),
			Cascade: []cascade.Tier{{Provider: "primary", Prompt: tmpl("release/primary.v2.tmpl")}, {Provider: "backup", Prompt: tmpl("release/backup.v1.tmpl")}},
			Canary: &cascade.Canary{Prompt: tmpl("release/primary.v3.tmpl"), ByRequest: true, Config: canary.Config{
				Share: 0.5, Window: time.Minute, MinCalls: 1, Clock: clk,
				RollbackIf: canary.Thresholds{P95: 1000, Cost: 1000},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Tasks = maps.Clone(c.Tasks)
		c.Tasks["release"] = task
	}
}

// canaryJSON is canaryView as a client decodes it, with pointers where absence matters.
type canaryJSON struct {
	State     string    `json:"state"`
	Tier      int       `json:"tier"`
	Incumbent string    `json:"incumbent"`
	Candidate string    `json:"candidate"`
	Share     float64   `json:"share"`
	Started   time.Time `json:"started"`
	DecideAt  time.Time `json:"decide_at"`
	Waiting   *string   `json:"waiting"`
	PinnedBy  *string   `json:"pinned_by"`
	Figures   armsJSON  `json:"figures"`
	Decision  *struct {
		State   string    `json:"state"`
		At      time.Time `json:"at"`
		By      string    `json:"by"`
		Reasons []string  `json:"reasons"`
		Figures armsJSON  `json:"figures"`
	} `json:"decision"`
}

type armsJSON struct {
	Incumbent figuresView `json:"incumbent"`
	Candidate figuresView `json:"candidate"`
}

// canaryStatus reads the tasks' canaries from /admin/status, raw.
func canaryStatus(t *testing.T, e *env) map[string]json.RawMessage {
	t.Helper()
	code, _, b := e.do("GET", "/admin/status", adminToken, "")
	if code != http.StatusOK {
		t.Fatalf("GET /admin/status: %d %s", code, b)
	}
	var doc struct {
		Tasks map[string]struct {
			Canary json.RawMessage `json:"canary"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("status %s: %v", b, err)
	}
	out := map[string]json.RawMessage{}
	for name, ts := range doc.Tasks {
		out[name] = ts.Canary
	}
	return out
}

// TestCanaryInStatus: /admin/status shows a task's canary (null for a task without one):
// its arms' versions, share and window, then the calls each arm answered, and, once the
// window has passed, the decision that reading the status took.
func TestCanaryInStatus(t *testing.T) {
	clk := clockwork.NewFakeClock()
	started := clk.Now().UTC()
	e := newEnv(t, withCanary(t, clk))

	st := canaryStatus(t, e)
	if string(st["triage"]) != "null" {
		t.Errorf("triage (no canary): canary %s, want null", st["triage"])
	}
	c := decode[canaryJSON](t, st["release"])
	if c.State != "running" || c.Tier != 0 || c.Incumbent != releaseIncumbent || c.Candidate != releaseCandidate || c.Share != 0.5 ||
		!c.Started.Equal(started) || !c.DecideAt.Equal(started.Add(time.Minute)) || c.Waiting != nil || c.PinnedBy != nil ||
		c.Decision != nil || c.Figures.Incumbent.Calls != 0 || c.Figures.Candidate.Calls != 0 || c.Figures.Candidate.P95MS != nil {
		t.Fatalf("a new canary: %s", st["release"])
	}
	for _, field := range []string{`"waiting"`, `"pinned_by"`} {
		if strings.Contains(string(st["release"]), field) {
			t.Errorf("%s shown while empty: %s", field, st["release"])
		}
	}

	// Calls until each arm has answered one; the envelope names the arm.
	calls := map[string]int{}
	for i := 0; i < 64 && (calls[releaseIncumbent] == 0 || calls[releaseCandidate] == 0); i++ {
		code, _, b := e.do("POST", "/v1/tasks/release", clientKey, `{"input": {"message": "hi"}}`)
		env := decode[envelope](t, b)
		if code != http.StatusOK || env.Source != afloat.SourceModel {
			t.Fatalf("call %d: %d %s", i, code, b)
		}
		calls[env.PromptVersion]++
	}
	c = decode[canaryJSON](t, canaryStatus(t, e)["release"])
	if c.Figures.Incumbent.Calls != calls[releaseIncumbent] || c.Figures.Candidate.Calls != calls[releaseCandidate] ||
		c.Figures.Candidate.Calls == 0 || c.Figures.Candidate.ViolationRate != 0 || c.Figures.Candidate.FailureRate != 0 {
		t.Fatalf("figures %+v after calls %v", c.Figures, calls)
	}

	// The window passes; reading the status decides the due canary.
	clk.Advance(time.Minute)
	c = decode[canaryJSON](t, canaryStatus(t, e)["release"])
	d := c.Decision
	if c.State != "promoted" || c.Share != 1 || d == nil || d.State != "promoted" || d.By != "auto" || !d.At.Equal(started.Add(time.Minute)) ||
		len(d.Reasons) == 0 || d.Figures.Candidate.Calls != calls[releaseCandidate] || d.Figures.Incumbent.Calls != calls[releaseIncumbent] {
		t.Fatalf("after the window: %+v", c)
	}
}

// TestCanaryPut: PUT /admin/canaries/{task} pins, unpins and promotes a canary, naming the
// operator, and answers the canary; a decided canary is 409, and every refusal has its
// status and code.
func TestCanaryPut(t *testing.T) {
	clk := clockwork.NewFakeClock()
	e := newEnv(t, withCanary(t, clk))
	put := func(task, body string, hdr ...string) (int, []byte) {
		t.Helper()
		code, _, b := e.do("PUT", "/admin/canaries/"+task, adminToken, body, hdr...)
		return code, b
	}

	for _, tc := range []struct {
		name, task, token, body string
		hdr                     []string
		status                  int
		code                    string
	}{
		{"no token", "release", "", `{"state":"promoted"}`, nil, http.StatusUnauthorized, "unauthorized"},
		{"a client key", "release", clientKey, `{"state":"promoted"}`, nil, http.StatusUnauthorized, "unauthorized"},
		{"unknown task", "nope", adminToken, `{"state":"promoted"}`, nil, http.StatusNotFound, "unknown_task"},
		{"a task without canary", "triage", adminToken, `{"state":"promoted"}`, nil, http.StatusNotFound, "no_canary"},
		{"unknown state", "release", adminToken, `{"state":"done"}`, nil, http.StatusBadRequest, "invalid_state"},
		{"no state", "release", adminToken, `{}`, nil, http.StatusBadRequest, "invalid_state"},
		{"bad JSON", "release", adminToken, `{"state":`, nil, http.StatusBadRequest, "invalid_request"},
		{"an unknown field", "release", adminToken, `{"state":"promoted","why":"x"}`, nil, http.StatusBadRequest, "invalid_request"},
		{"a bad operator", "release", adminToken, `{"state":"promoted"}`, []string{OperatorHeader, "not a name"}, http.StatusBadRequest, "invalid_operator"},
		{"operator auto", "release", adminToken, `{"state":"promoted"}`, []string{OperatorHeader, "auto"}, http.StatusBadRequest, "invalid_operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, b := e.do("PUT", "/admin/canaries/"+tc.task, tc.token, tc.body, tc.hdr...)
			if got := decode[errBody](t, b).Error.Code; code != tc.status || got != tc.code {
				t.Fatalf("%d %s, want %d %s", code, b, tc.status, tc.code)
			}
		})
	}
	if code, _, b := e.do("POST", "/admin/canaries/release", adminToken, `{"state":"promoted"}`); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d %s, want 405", code, b)
	}
	if c := decode[canaryJSON](t, canaryStatus(t, e)["release"]); c.State != "running" || c.Decision != nil {
		t.Fatalf("a refused PUT changed the canary: %+v", c)
	}

	code, b := put("release", `{"state":"pinned"}`, OperatorHeader, "alice")
	if c := decode[canaryJSON](t, b); code != http.StatusOK || c.State != "pinned" || c.PinnedBy == nil || *c.PinnedBy != "alice" || c.Share != 0.5 {
		t.Fatalf("pin: %d %s", code, b)
	}
	code, b = put("release", `{"state":"running"}`)
	if c := decode[canaryJSON](t, b); code != http.StatusOK || c.State != "running" || c.PinnedBy != nil {
		t.Fatalf("unpin: %d %s", code, b)
	}
	code, b = put("release", `{"state":"promoted"}`)
	c := decode[canaryJSON](t, b)
	if code != http.StatusOK || c.State != "promoted" || c.Share != 1 || c.Decision == nil || c.Decision.By != AdminOperator ||
		!c.Decision.At.Equal(clk.Now()) || c.Decision.Reasons == nil {
		t.Fatalf("promote: %d %s", code, b)
	}
	for _, body := range []string{`{"state":"rolled_back"}`, `{"state":"promoted"}`, `{"state":"pinned"}`} {
		code, b = put("release", body)
		if code != http.StatusConflict || decode[errBody](t, b).Error.Code != "canary_decided" {
			t.Errorf("%s after the promotion: %d %s, want 409 canary_decided", body, code, b)
		}
	}

	code, _, b = e.do("GET", "/admin/canaries", adminToken, "")
	var all struct {
		Canaries map[string]canaryJSON `json:"canaries"`
	}
	if err := json.Unmarshal(b, &all); code != http.StatusOK || err != nil || len(all.Canaries) != 1 ||
		all.Canaries["release"].State != "promoted" || all.Canaries["release"].Decision.By != AdminOperator {
		t.Fatalf("GET /admin/canaries: %d %s", code, b)
	}
	if code, _, _ := e.do("GET", "/admin/canaries", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /admin/canaries without a token: %d", code)
	}

	_, _, metrics := e.do("GET", "/metrics", "", "")
	want := `afloat_canary_decisions_total{by="operator",decision="promoted",task="release"} 1`
	if !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack %s", want)
	}
}
