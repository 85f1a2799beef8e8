package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/cascade"
)

// The canaries of the admin API: each task's canary in /admin/status ("canary"), all of
// them at GET /admin/canaries, and an operator's decision at PUT /admin/canaries/{task}
// {"state": "promoted" | "rolled_back" | "pinned" | "running"}, which answers the canary
// as it is then.

// canaryView is a task's canary as the admin API shows it.
type canaryView struct {
	State canary.State `json:"state"`
	Tier  int          `json:"tier"`
	// Incumbent and Candidate are the two arms' prompt versions ("triage/openai/v3").
	Incumbent string    `json:"incumbent"`
	Candidate string    `json:"candidate"`
	Share     float64   `json:"share"`
	Started   time.Time `json:"started"`
	DecideAt  time.Time `json:"decide_at"`
	// Waiting says what holds a due decision back; PinnedBy who pinned a pinned canary.
	Waiting  string        `json:"waiting,omitempty"`
	PinnedBy string        `json:"pinned_by,omitempty"`
	Figures  armsView      `json:"figures"`
	Decision *decisionView `json:"decision"`
}

// armsView is the two arms' figures.
type armsView struct {
	Incumbent figuresView `json:"incumbent"`
	Candidate figuresView `json:"candidate"`
}

// figuresView is one arm's figures since the canary started.
type figuresView struct {
	Calls         int     `json:"calls"`
	ViolationRate float64 `json:"violation_rate"`
	ReaskRate     float64 `json:"reask_rate"`
	FailureRate   float64 `json:"failure_rate"`
	// P95MS is null while the arm has answered no call.
	P95MS         *int64  `json:"p95_ms"`
	CostPerAnswer float64 `json:"cost_per_answer"`
}

// decisionView is a canary's decision: by "auto" (the canary itself) or an operator's name,
// on the figures it was taken on.
type decisionView struct {
	State   canary.State `json:"state"`
	At      time.Time    `json:"at"`
	By      string       `json:"by"`
	Reasons []string     `json:"reasons"`
	Figures armsView     `json:"figures"`
}

func viewFigures(f canary.Figures) figuresView {
	v := figuresView{Calls: f.Calls, ViolationRate: f.ViolationRate, ReaskRate: f.ReaskRate, FailureRate: f.FailureRate, CostPerAnswer: f.CostPerAnswer}
	if f.P95 > 0 {
		ms := f.P95.Milliseconds()
		v.P95MS = &ms
	}
	return v
}

// canaryOf returns task t's canary, deciding it first if it is due; nil when t has none.
func canaryOf(t *cascade.Task) *canaryView {
	cs, ok := t.Canary()
	if !ok {
		return nil
	}
	v := &canaryView{
		State: cs.State, Tier: cs.Tier, Incumbent: cs.IncumbentVersion, Candidate: cs.CandidateVersion, Share: cs.Share,
		Started: cs.Started.UTC(), DecideAt: cs.DecideAt.UTC(), Waiting: cs.Waiting, PinnedBy: cs.PinnedBy,
		Figures: armsView{viewFigures(cs.Incumbent), viewFigures(cs.Candidate)},
	}
	if d := cs.Decision; d != nil {
		reasons := d.Reasons
		if reasons == nil {
			reasons = []string{}
		}
		v.Decision = &decisionView{State: d.State, At: d.At.UTC(), By: d.By, Reasons: reasons,
			Figures: armsView{viewFigures(d.Incumbent), viewFigures(d.Candidate)}}
	}
	return v
}

// getCanaries answers {"canaries": {"triage": {...}}}: the tasks that have a canary.
func (g *Gateway) getCanaries(w http.ResponseWriter, r *http.Request) {
	out := map[string]*canaryView{}
	for name, t := range g.served().tasks {
		if v := canaryOf(t); v != nil {
			out[name] = v
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"canaries": out})
}

// putCanary is an operator's decision on a task's canary: promote it, roll it back, pin it
// (it keeps its share and decides nothing by itself) or unpin it (running). A decision is
// final: a decided canary answers 409.
func (g *Gateway) putCanary(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("task")
	t, ok := g.served().tasks[name]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_task", fmt.Sprintf("no task %q", name))
		return
	}
	by, ok := canaryOperator(w, r)
	if !ok {
		return
	}
	if !jsonBody(w, r) {
		return
	}
	var body struct {
		State canary.State `json:"state"`
	}
	if !decodeStrict(w, r, &body) {
		return
	}
	err := t.SetCanary(body.State, by)
	switch {
	case errors.Is(err, cascade.ErrNoCanary):
		writeError(w, http.StatusNotFound, "no_canary", fmt.Sprintf("task %q has no canary", name))
		return
	case errors.Is(err, canary.ErrDecided):
		writeError(w, http.StatusConflict, "canary_decided", fmt.Sprintf("the canary of task %q is decided already: a decision is final", name))
		return
	case err != nil:
		// SetCanary's one other refusal is a state it does not know.
		writeError(w, http.StatusBadRequest, "invalid_state", fmt.Sprintf("state %q: want \"promoted\", \"rolled_back\", \"pinned\" or \"running\"", body.State))
		return
	}
	g.log.InfoContext(r.Context(), "canary set", "task", name, "state", string(body.State), "by", by)
	writeJSON(w, http.StatusOK, canaryOf(t))
}

// canaryOperator names who decides, as the review API names who resolves: the console's
// session, else the operator the X-Afloat-Operator header names, else AdminOperator. It
// answers 400 itself for a name an operator may not have, and for "auto", which names the
// canary's own decisions.
func canaryOperator(w http.ResponseWriter, r *http.Request) (string, bool) {
	if name := operatorFrom(r); name != "" {
		return name, true
	}
	named := strings.TrimSpace(r.Header.Get(OperatorHeader))
	switch {
	case named == "":
		return AdminOperator, true
	case !operatorName.MatchString(named):
		writeError(w, http.StatusBadRequest, "invalid_operator", fmt.Sprintf("%s: want 1-64 letters, digits, '.', '_', '@' or '-'", OperatorHeader))
		return "", false
	case named == "auto":
		writeError(w, http.StatusBadRequest, "invalid_operator", fmt.Sprintf("%s: %q names the canary's own decisions", OperatorHeader, named))
		return "", false
	}
	return named, true
}
