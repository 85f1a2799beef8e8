package gateway

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/flags"
)

// The admin's pages: overview, flags, breakers and faults, canaries. Every change asks for a
// confirmation first (a page that repeats the form with confirm=yes), then goes through the
// admin API's handler and into the audit log.

// faultModes are the modes the breakers page offers.
var faultModes = []string{"unavailable", "timeout", "slow", "malformed", "reset", "rate_limited",
	"stream_cut", "stream_stall", "first_token_slow", "flap", "error_rate"}

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	doc := c.g.statusOf(r.Context())
	history := map[string][]float64{}
	tab := c.g.served()
	for name, t := range tab.tasks {
		history[name] = t.FallbackHistory()
	}
	for name, rt := range tab.routes {
		history[name] = rt.FallbackHistory()
	}
	c.render(w, r, sessionFrom(r), http.StatusOK, "overview", map[string]any{
		"Status": doc, "Audit": c.audit.latest(20), "Now": c.g.clock.Now(), "History": history,
	})
}

// sparkline draws shares in [0, 1] (-1: no calls) as a small inline SVG bar chart, the
// oldest first, with a text alternative for screen readers. It writes numbers only, so its
// output is safe HTML.
func sparkline(shares []float64) template.HTML {
	const w, h, bar = 96, 20, 8
	var b strings.Builder
	desc := make([]string, 0, len(shares))
	fmt.Fprintf(&b, `<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>`, w, h, w, h)
	for _, v := range shares {
		if v < 0 {
			desc = append(desc, "none")
		} else {
			desc = append(desc, strconv.Itoa(int(v*100+0.5))+"%")
		}
	}
	b.WriteString("fallback share per 5 s over the last minute: " + strings.Join(desc, ", ") + "</title>")
	for i, v := range shares {
		if v < 0 {
			continue
		}
		bh := max(1, int(v*h+0.5))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d"></rect>`, i*bar, h-bh, bar-1, bh)
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// flagRow is one task of the flags page.
type flagRow struct {
	Name      string
	Kill      bool
	Blocklist string
	Rollout   int
}

func (c *console) flagsPage(w http.ResponseWriter, r *http.Request) {
	c.renderFlags(w, r, http.StatusOK, "")
}

func (c *console) renderFlags(w http.ResponseWriter, r *http.Request, status int, errMsg string) {
	data := map[string]any{"Error": errMsg, "Done": r.URL.Query().Get("done") != ""}
	if c.g.cfg.Flags == nil {
		data["Off"] = true
		c.render(w, r, sessionFrom(r), status, "flags", data)
		return
	}
	d, err := c.g.cfg.Flags.Flags(r.Context())
	if err != nil {
		data["Error"] = "The flags cannot be read: " + err.Error()
		c.render(w, r, sessionFrom(r), http.StatusServiceUnavailable, "flags", data)
		return
	}
	full := c.g.fullFlags(d)
	var rows []flagRow
	for name, tf := range full.Tasks {
		rows = append(rows, flagRow{Name: name, Kill: tf.Kill, Blocklist: strings.Join(tf.Blocklist, ", "), Rollout: tf.Rollout()})
	}
	slices.SortFunc(rows, func(a, b flagRow) int { return strings.Compare(a.Name, b.Name) })
	data["Kill"], data["Tasks"] = full.Kill, rows
	c.render(w, r, sessionFrom(r), status, "flags", data)
}

// changeFlags turns a flags form into a JSON merge patch for PATCH /admin/flags.
func (c *console) changeFlags(w http.ResponseWriter, r *http.Request) {
	var patch map[string]any
	var summary, target string
	switch r.PostFormValue("action") {
	case "global":
		kill := r.PostFormValue("kill") == "on"
		patch, target = map[string]any{"kill": kill}, "flags.kill"
		summary = "Turn the global kill switch OFF: every task answers again (each by its own flags)."
		if kill {
			summary = "Turn the global kill switch ON: every task and route stops calling providers."
		}
	case "task":
		name := r.PostFormValue("task")
		rollout, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("rollout")))
		if err != nil || rollout < 0 || rollout > 100 {
			c.renderFlags(w, r, http.StatusBadRequest, fmt.Sprintf("Task %s: the rollout is a whole number from 0 to 100.", name))
			return
		}
		block := []string{}
		for _, t := range strings.Split(r.PostFormValue("blocklist"), ",") {
			if t = strings.TrimSpace(t); t != "" {
				block = append(block, t)
			}
		}
		kill := r.PostFormValue("kill") == "on"
		patch = map[string]any{"tasks": map[string]any{name: flags.TaskFlags{Kill: kill, Blocklist: block, RolloutPct: &rollout}}}
		target = "flags.tasks." + name
		state := "on"
		if kill {
			state = "OFF (kill switch on)"
		}
		summary = fmt.Sprintf("Set task %s: %s; blocklist [%s]; rollout %d%%.", name, state, strings.Join(block, ", "), rollout)
	default:
		c.renderFlags(w, r, http.StatusBadRequest, "Unknown change.")
		return
	}
	if !c.confirmed(w, r, "/ui/flags", summary) {
		return
	}
	ans := c.callAPI(r, c.g.patchFlags, http.MethodPatch, patch)
	if !ans.ok() {
		msg, _ := ans.apiError()
		c.renderFlags(w, r, ans.status, "Not applied: "+msg)
		return
	}
	b, _ := json.Marshal(patch)
	c.record(r, "flags.patch", target, string(b))
	http.Redirect(w, r, "/ui/flags?done=1", http.StatusSeeOther)
}

// confirmed reports whether the form carries confirm=yes; when it does not, it answers a
// page that says what the change does and repeats the form with confirm=yes.
func (c *console) confirmed(w http.ResponseWriter, r *http.Request, back, summary string) bool {
	if r.PostFormValue("confirm") == "yes" {
		return true
	}
	type field struct{ Name, Value string }
	var fields []field
	for k, vs := range r.PostForm {
		if k == "csrf" || k == "confirm" {
			continue
		}
		for _, v := range vs {
			fields = append(fields, field{k, v})
		}
	}
	slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.Name, b.Name) })
	c.render(w, r, sessionFrom(r), http.StatusOK, "confirm", map[string]any{
		"Summary": summary, "Action": r.URL.Path, "Back": back, "Fields": fields})
	return false
}

// providerRow is one provider of the breakers page.
type providerRow struct {
	Name   string
	Status providerStatus
}

func (c *console) breakersPage(w http.ResponseWriter, r *http.Request) {
	c.renderBreakers(w, r, http.StatusOK, "")
}

func (c *console) renderBreakers(w http.ResponseWriter, r *http.Request, status int, errMsg string) {
	doc := c.g.statusOf(r.Context())
	var rows []providerRow
	for name, ps := range doc.Providers {
		rows = append(rows, providerRow{name, ps})
	}
	slices.SortFunc(rows, func(a, b providerRow) int { return strings.Compare(a.Name, b.Name) })
	c.render(w, r, sessionFrom(r), status, "breakers", map[string]any{
		"Providers": rows, "Modes": faultModes, "Faults": c.g.served().faults != nil,
		"Error": errMsg, "Done": r.URL.Query().Get("done") != "",
	})
}

// changeBreakers forces or resets a breaker, or injects or clears a fault.
func (c *console) changeBreakers(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("provider")
	var (
		summary, action string
		call            func() apiAnswer
		detail          string
	)
	switch r.PostFormValue("action") {
	case "breaker":
		st := r.PostFormValue("state")
		summary = fmt.Sprintf("Force the breaker of %s open: no call goes to it until it is reset.", name)
		if st != "open" {
			st = "closed"
			summary = fmt.Sprintf("Reset the breaker of %s: closed, calls go to it again.", name)
		}
		action, detail = "breaker."+st, ""
		call = func() apiAnswer {
			return c.callAPI(r, c.g.putBreaker, http.MethodPut, map[string]string{"state": st}, "provider", name)
		}
	case "fault":
		body := map[string]any{"mode": r.PostFormValue("mode")}
		parts := []string{r.PostFormValue("mode")}
		if s := strings.TrimSpace(r.PostFormValue("status")); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				c.renderBreakers(w, r, http.StatusBadRequest, "The status is an HTTP status: a whole number.")
				return
			}
			body["status"] = n
			parts = append(parts, "status "+s)
		}
		for _, k := range []string{"delay", "ttl"} {
			if s := strings.TrimSpace(r.PostFormValue(k)); s != "" {
				if _, err := time.ParseDuration(s); err != nil {
					c.renderBreakers(w, r, http.StatusBadRequest, fmt.Sprintf("The %s is a duration such as 30s or 15m.", k))
					return
				}
				body[k] = s
				parts = append(parts, k+" "+s)
			}
		}
		detail = strings.Join(parts, ", ")
		summary = fmt.Sprintf("Inject a fault into %s: %s (without a ttl it clears itself after 15m).", name, detail)
		action = "fault.set"
		call = func() apiAnswer { return c.callAPI(r, c.g.putFault, http.MethodPut, body, "provider", name) }
	case "clear":
		summary, action = fmt.Sprintf("Clear the fault of %s.", name), "fault.clear"
		call = func() apiAnswer { return c.callAPI(r, c.g.deleteFault, http.MethodDelete, nil, "provider", name) }
	default:
		c.renderBreakers(w, r, http.StatusBadRequest, "Unknown change.")
		return
	}
	if !c.confirmed(w, r, "/ui/breakers", summary) {
		return
	}
	ans := call()
	if !ans.ok() {
		msg, _ := ans.apiError()
		c.renderBreakers(w, r, ans.status, "Not applied: "+msg)
		return
	}
	c.record(r, action, name, detail)
	http.Redirect(w, r, "/ui/breakers?done=1", http.StatusSeeOther)
}

// canaryRow is one task's canary on the canaries page: its arms' figures in order, those of
// its decision, and the changes an operator may make to it.
type canaryRow struct {
	Task     string
	Canary   *canaryView
	Arms     []armRow
	Decision []armRow
	Actions  []canaryAction
}

// armRow is one arm's figures.
type armRow struct {
	Arm     string
	Figures figuresView
}

// canaryAction is a button of the canaries page.
type canaryAction struct {
	State  canary.State
	Label  string
	Danger bool
}

func armRows(a armsView) []armRow {
	return []armRow{{"incumbent", a.Incumbent}, {"candidate", a.Candidate}}
}

// newCanaryRow lays out task's canary v for the page.
func newCanaryRow(task string, v *canaryView) canaryRow {
	row := canaryRow{Task: task, Canary: v, Arms: armRows(v.Figures)}
	if v.Decision != nil {
		row.Decision = armRows(v.Decision.Figures)
		return row
	}
	row.Actions = []canaryAction{{canary.Promoted, "Promote", true}, {canary.RolledBack, "Roll back", true}}
	if v.State == canary.Pinned {
		row.Actions = append(row.Actions, canaryAction{canary.Running, "Unpin", false})
	} else {
		row.Actions = append(row.Actions, canaryAction{canary.Pinned, "Pin", false})
	}
	return row
}

func (c *console) canariesPage(w http.ResponseWriter, r *http.Request) {
	c.renderCanaries(w, r, http.StatusOK, "")
}

func (c *console) renderCanaries(w http.ResponseWriter, r *http.Request, status int, errMsg string) {
	var rows []canaryRow
	for name, t := range c.g.served().tasks {
		if v := canaryOf(t); v != nil {
			rows = append(rows, newCanaryRow(name, v))
		}
	}
	slices.SortFunc(rows, func(a, b canaryRow) int { return strings.Compare(a.Task, b.Task) })
	c.render(w, r, sessionFrom(r), status, "canaries", map[string]any{
		"Canaries": rows, "Error": errMsg, "Done": r.URL.Query().Get("done") != "",
	})
}

// changeCanary promotes, rolls back, pins or unpins a task's canary.
func (c *console) changeCanary(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("task")
	st := canary.State(r.PostFormValue("state"))
	arms := "its candidate"
	if t, ok := c.g.served().tasks[name]; ok {
		if v := canaryOf(t); v != nil {
			arms = fmt.Sprintf("candidate %s (incumbent %s)", v.Candidate, v.Incumbent)
		}
	}
	var summary string
	switch st {
	case canary.Promoted:
		summary = fmt.Sprintf("Promote the canary of task %s: %s takes every call. A decision is final.", name, arms)
	case canary.RolledBack:
		summary = fmt.Sprintf("Roll back the canary of task %s: %s takes no call any more. A decision is final.", name, arms)
	case canary.Pinned:
		summary = fmt.Sprintf("Pin the canary of task %s: %s keeps its share, and nothing is decided by itself until it is unpinned.", name, arms)
	case canary.Running:
		summary = fmt.Sprintf("Unpin the canary of task %s: it decides by itself again once its window has passed.", name)
	default:
		c.renderCanaries(w, r, http.StatusBadRequest, "Unknown change.")
		return
	}
	if !c.confirmed(w, r, "/ui/canaries", summary) {
		return
	}
	ans := c.callAPI(r, c.g.putCanary, http.MethodPut, map[string]string{"state": string(st)}, "task", name)
	if !ans.ok() {
		msg, _ := ans.apiError()
		c.renderCanaries(w, r, ans.status, "Not applied: "+msg)
		return
	}
	c.record(r, "canary."+string(st), name, "")
	http.Redirect(w, r, "/ui/canaries?done=1", http.StatusSeeOther)
}

// prettyJSON indents a JSON document for a <pre>.
func prettyJSON(v any) string {
	var b []byte
	switch v := v.(type) {
	case json.RawMessage:
		var x any
		if json.Unmarshal(v, &x) != nil {
			return string(v)
		}
		b, _ = json.MarshalIndent(x, "", "  ")
	default:
		b, _ = json.MarshalIndent(v, "", "  ")
	}
	return string(b)
}

// fmtTime shows a time in UTC to the second; "—" for none.
func fmtTime(v any) string {
	switch t := v.(type) {
	case time.Time:
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if t == nil {
			return "—"
		}
		return fmtTime(*t)
	}
	return fmt.Sprint(v)
}

// fmtMS shows milliseconds; "—" for none.
func fmtMS(v any) string {
	switch n := v.(type) {
	case *int64:
		if n == nil {
			return "—"
		}
		return fmtMS(*n)
	case int64:
		d := time.Duration(n) * time.Millisecond
		if d > time.Second {
			d = d.Round(time.Second)
		}
		return d.String()
	}
	return fmt.Sprint(v)
}

func fmtFloat(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }

// pathEscape is url.PathEscape, for links to review items.
func pathEscape(s string) string { return url.PathEscape(s) }
