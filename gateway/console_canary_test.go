package gateway

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jonboulle/clockwork"
)

// TestConsoleCanary: the overview names a task's canary; the canaries page shows its arms'
// versions, share and figures, pins it and promotes it (each confirmed first, as the admin
// API's PUT, by the session's name, into the audit log), and then shows the decision and
// its reasons with no buttons left.
func TestConsoleCanary(t *testing.T) {
	clk := clockwork.NewFakeClock()
	e := newEnv(t, withCanary(t, clk))
	b := newBrowser(t, e.srv.URL)
	b.signIn(adminToken)

	_, body := b.get("/ui/overview")
	if !strings.Contains(body, `<a href="/ui/canaries#c-release"><span class="state state-running" data-canary-state="running">running</span></a> <code>`+releaseCandidate+`</code> at 50%`) {
		t.Errorf("the overview does not show release's canary\n%s", body)
	}
	status, body := b.get("/ui/canaries")
	for _, want := range []string{
		`<section class="card" aria-labelledby="c-release" data-canary="release">`,
		`candidate <code>` + releaseCandidate + `</code> takes 50% of the calls; incumbent <code>` + releaseIncumbent + `</code>`,
		`<tr data-arm="incumbent"><th scope="row">incumbent</th><td>0</td>`,
		`<tr data-arm="candidate"><th scope="row">candidate</th><td>0</td>`,
		`id="promoted-release"`, `id="rolled_back-release"`, `id="pinned-release"`,
	} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("canaries page: %d, lacks %s\n%s", status, want, body)
		}
	}
	if strings.Contains(body, `data-canary="triage"`) {
		t.Error("a task without a canary is on the canaries page")
	}

	status, body = b.post("/ui/canaries", url.Values{"task": {"release"}, "state": {"pinned"}})
	if status != http.StatusOK || !strings.Contains(body, "Pin the canary of task release: candidate "+releaseCandidate) ||
		!strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("pin: %d, want a confirmation page\n%s", status, body)
	}
	if c, _ := e.gw.served().tasks["release"].Canary(); c.State != "running" {
		t.Fatalf("the pin applied before it was confirmed: %s", c.State)
	}
	status, body = b.post("/ui/canaries", url.Values{"task": {"release"}, "state": {"pinned"}, "confirm": {"yes"}})
	if status != http.StatusOK || !strings.Contains(body, "Change applied.") || !strings.Contains(body, "Pinned by admin.") ||
		!strings.Contains(body, `id="running-release"`) {
		t.Fatalf("confirmed pin: %d\n%s", status, body)
	}

	status, body = b.post("/ui/canaries", url.Values{"task": {"release"}, "state": {"promoted"}, "confirm": {"yes"}})
	if status != http.StatusOK || !strings.Contains(body, `<p data-decision="promoted"><strong>promoted</strong> by admin at`) ||
		!strings.Contains(body, `<ul class="reasons"><li>`) || strings.Contains(body, `id="rolled_back-release"`) {
		t.Fatalf("promote: %d\n%s", status, body)
	}
	status, body = b.post("/ui/canaries", url.Values{"task": {"release"}, "state": {"rolled_back"}, "confirm": {"yes"}})
	if status != http.StatusConflict || !strings.Contains(body, "Not applied") || !strings.Contains(body, "decided already") {
		t.Errorf("rollback after the promotion: %d\n%s", status, body)
	}
	status, body = b.post("/ui/canaries", url.Values{"task": {"release"}, "state": {"bogus"}, "confirm": {"yes"}})
	if status != http.StatusBadRequest || !strings.Contains(body, "Unknown change.") {
		t.Errorf("bogus state: %d\n%s", status, body)
	}

	_, _, raw := e.do("GET", "/admin/audit", adminToken, "")
	got := decode[struct {
		Entries []auditEntry `json:"entries"`
	}](t, raw).Entries
	if len(got) != 2 || got[0].Action != "canary.promoted" || got[1].Action != "canary.pinned" || got[0].Target != "release" || got[0].Who != "admin" {
		t.Errorf("audit %+v, want the pin then the promotion", got)
	}
}
