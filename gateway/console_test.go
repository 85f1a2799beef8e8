package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// browser is a console client: a cookie jar, and the CSRF token of the last page it read.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) read(resp *http.Response, err error) (int, string) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, string(body)
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	return b.read(b.c.Get(b.base + path))
}

// post sends a form with the CSRF token of the last page unless form sets one.
func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	return b.read(b.c.PostForm(b.base+path, form))
}

func (b *browser) signIn(token string) (int, string) {
	b.t.Helper()
	return b.post("/ui/login", url.Values{"token": {token}})
}

func withOperators(c *Config) { c.Operators = operators }

func TestConsoleSignIn(t *testing.T) {
	e := newEnv(t, withOperators)
	b := newBrowser(t, e.srv.URL)
	if status, body := b.get("/ui/overview"); status != http.StatusOK || !strings.Contains(body, `id="token"`) {
		t.Fatalf("signed out: %d, want the sign-in page\n%s", status, body)
	}
	status, body := b.signIn("adm-wrong-token")
	if status != http.StatusUnauthorized || !strings.Contains(body, "neither the admin token nor an operator") {
		t.Fatalf("wrong token: %d\n%s", status, body)
	}
	if u, _ := url.Parse(e.srv.URL + "/ui/"); len(b.c.Jar.Cookies(u)) != 0 {
		t.Fatal("a wrong token got a session cookie")
	}
	status, body = b.signIn(adminToken)
	if status != http.StatusOK || !strings.Contains(body, "<h1>Overview</h1>") || !strings.Contains(body, `id="providers"`) {
		t.Fatalf("admin sign-in: %d, want the overview\n%s", status, body)
	}
	// Sign-out needs the CSRF token too, and ends the session.
	if status, _ := b.post("/ui/logout", url.Values{"csrf": {"forged"}}); status != http.StatusForbidden {
		t.Fatalf("sign-out without the CSRF token: %d, want 403", status)
	}
	b.post("/ui/logout", url.Values{})
	if _, body := b.get("/ui/flags"); !strings.Contains(body, `id="token"`) {
		t.Fatal("after sign-out the flags page still opens")
	}
}

func TestConsoleCookieFlags(t *testing.T) {
	e := newEnv(t)
	for _, tls := range []bool{false, true} {
		req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if !tls {
			req.TLS = nil
		}
		if tls {
			req = httptest.NewRequest("POST", "https://gw.example/ui/login", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		w := httptest.NewRecorder()
		e.gw.Handler().ServeHTTP(w, req)
		cookies := w.Result().Cookies()
		if w.Code != http.StatusSeeOther || len(cookies) != 1 {
			t.Fatalf("tls=%v: %d, cookies %v", tls, w.Code, cookies)
		}
		c := cookies[0]
		if c.Name != sessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.Secure != tls ||
			c.MaxAge != int(sessionTTL.Seconds()) || len(c.Value) < 40 {
			t.Errorf("tls=%v: cookie %+v: want HttpOnly, SameSite=Strict, Path /ui/, Secure only over TLS, 8h, a long random id", tls, c)
		}
		if strings.Contains(c.Value, adminToken) {
			t.Error("the cookie holds the admin token")
		}
	}
}

func TestConsoleSessionExpires(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, func(c *Config) { c.Clock = clock })
	b := newBrowser(t, e.srv.URL)
	b.signIn(adminToken)
	if _, body := b.get("/ui/flags"); !strings.Contains(body, "<h1>Flags</h1>") {
		t.Fatal("signed in, the flags page does not open")
	}
	clock.Advance(sessionTTL + time.Second)
	if _, body := b.get("/ui/flags"); !strings.Contains(body, `id="token"`) {
		t.Fatal("8h later the session still opens the flags page")
	}
}

func TestConsoleCSRFRefused(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e.srv.URL)
	b.signIn(adminToken)
	change := url.Values{"action": {"global"}, "kill": {"on"}, "confirm": {"yes"}}
	for name, token := range map[string][]string{"missing": nil, "wrong": {"forged-token"}} {
		form := url.Values{}
		for k, v := range change {
			form[k] = v
		}
		if token != nil {
			form["csrf"] = token
		} else {
			form["csrf"] = []string{""}
		}
		status, body := b.post("/ui/flags", form)
		if status != http.StatusForbidden || !strings.Contains(body, "security token") {
			t.Errorf("%s CSRF token: %d, want 403\n%s", name, status, body)
		}
	}
	for _, path := range []string{"/ui/breakers", "/ui/reviews/rv_x"} {
		if status, _ := b.post(path, url.Values{"csrf": {""}, "action": {"claim"}}); status != http.StatusForbidden {
			t.Errorf("POST %s without a CSRF token: %d, want 403", path, status)
		}
	}
	if d, _ := e.flags.Flags(context.Background()); d.Kill {
		t.Fatal("a POST without its CSRF token turned the kill switch on")
	}
}

func TestConsoleOperatorSeesTheQueueOnly(t *testing.T) {
	e := newEnv(t, withOperators)
	b := newBrowser(t, e.srv.URL)
	status, body := b.signIn(aliceToken)
	if status != http.StatusOK || !strings.Contains(body, "<h1>Review queue</h1>") || !strings.Contains(body, "review queue only") {
		t.Fatalf("operator sign-in: %d, want the review queue saying so\n%s", status, body)
	}
	if strings.Contains(body, `href="/ui/flags"`) {
		t.Error("an operator's page links to the flags")
	}
	for _, path := range []string{"/ui/overview", "/ui/flags", "/ui/breakers"} {
		status, body := b.get(path)
		if status != http.StatusForbidden || !strings.Contains(body, "operator alice") || !strings.Contains(body, "admin token") {
			t.Errorf("operator GET %s: %d, want 403 naming the admin token\n%s", path, status, body)
		}
	}
	b.get("/ui/reviews")
	status, _ = b.post("/ui/flags", url.Values{"action": {"global"}, "kill": {"on"}, "confirm": {"yes"}})
	if status != http.StatusForbidden {
		t.Errorf("operator POST /ui/flags: %d, want 403", status)
	}
	if d, _ := e.flags.Flags(context.Background()); d.Kill {
		t.Fatal("an operator turned the kill switch on")
	}
}

func TestConsoleFlagsConfirmAndAudit(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e.srv.URL)
	b.signIn(adminToken)
	b.get("/ui/flags")
	form := url.Values{"action": {"task"}, "task": {"triage"}, "kill": {"on"}, "blocklist": {"globex"}, "rollout": {"100"}}
	status, body := b.post("/ui/flags", form)
	if status != http.StatusOK || !strings.Contains(body, "Set task triage: OFF (kill switch on); blocklist [globex]") || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("first POST: %d, want a confirmation page\n%s", status, body)
	}
	if d, _ := e.flags.Flags(context.Background()); d.Tasks["triage"].Kill {
		t.Fatal("the change applied before it was confirmed")
	}
	form.Set("confirm", "yes")
	status, body = b.post("/ui/flags", form)
	if status != http.StatusOK || !strings.Contains(body, "Change applied.") {
		t.Fatalf("confirmed POST: %d\n%s", status, body)
	}
	d, _ := e.flags.Flags(context.Background())
	if tf := d.Tasks["triage"]; !tf.Kill || len(tf.Blocklist) != 1 || tf.Blocklist[0] != "globex" {
		t.Fatalf("flags after the change: %+v", tf)
	}
	if status, _, body := e.do("POST", "/v1/tasks/triage", clientKey, `{"input": {"message": "hi"}}`); status != http.StatusOK ||
		decode[envelope](t, body).Reason != "kill_switch" {
		t.Fatalf("triage after the kill: %d %s", status, body)
	}
	// A bad rollout is refused on the page; the API's refusals show there too.
	status, body = b.post("/ui/flags", url.Values{"action": {"task"}, "task": {"nope"}, "rollout": {"100"}, "confirm": {"yes"}})
	if status != http.StatusBadRequest || !strings.Contains(body, "Not applied") || !strings.Contains(body, "nope") {
		t.Fatalf("unknown task: %d\n%s", status, body)
	}
	status, _, body2 := e.do("GET", "/admin/audit", adminToken, "")
	var audit struct {
		Entries []auditEntry `json:"entries"`
	}
	if err := json.Unmarshal(body2, &audit); status != http.StatusOK || err != nil || len(audit.Entries) != 1 {
		t.Fatalf("GET /admin/audit: %d %s", status, body2)
	}
	if a := audit.Entries[0]; a.Who != "admin" || a.Action != "flags.patch" || a.Target != "flags.tasks.triage" || a.At.IsZero() {
		t.Fatalf("audit entry %+v", a)
	}
	if status, _, _ := e.do("GET", "/admin/audit", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("GET /admin/audit without the admin token: %d", status)
	}
}

func TestConsoleBreakersAndFaults(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e.srv.URL)
	b.signIn(adminToken)
	b.get("/ui/breakers")
	for _, form := range []url.Values{
		{"action": {"breaker"}, "provider": {"primary"}, "state": {"open"}, "confirm": {"yes"}},
		{"action": {"fault"}, "provider": {"backup"}, "mode": {"unavailable"}, "status": {"503"}, "ttl": {"10m"}, "confirm": {"yes"}},
	} {
		if status, body := b.post("/ui/breakers", form); status != http.StatusOK || !strings.Contains(body, "Change applied.") {
			t.Fatalf("%v: %d\n%s", form, status, body)
		}
	}
	_, body := b.get("/ui/breakers")
	if !strings.Contains(body, `id="p-primary">primary <span class="state state-open" data-breaker="open">`) {
		t.Errorf("primary is not shown open\n%s", body)
	}
	if f := e.faults["backup"].State().Fault; f.Mode != "unavailable" || f.TTL != 10*time.Minute {
		t.Errorf("backup's fault: %+v", f)
	}
	if !strings.Contains(body, "In force: <strong>unavailable</strong> (status 503)") {
		t.Errorf("backup's fault is not shown\n%s", body)
	}
	if status, body := b.post("/ui/breakers", url.Values{"action": {"clear"}, "provider": {"backup"}, "confirm": {"yes"}}); status != http.StatusOK {
		t.Fatalf("clear: %d\n%s", status, body)
	}
	if f := e.faults["backup"].State().Fault; f.Mode != "" {
		t.Errorf("backup's fault after clearing: %+v", f)
	}
	status, body := b.post("/ui/breakers", url.Values{"action": {"fault"}, "provider": {"backup"}, "mode": {"bogus"}, "confirm": {"yes"}})
	if status != http.StatusBadRequest || !strings.Contains(body, "Not applied") {
		t.Errorf("bogus mode: %d\n%s", status, body)
	}
}

func TestConsoleReviewResolve(t *testing.T) {
	e := newReviewEnv(t, memoryStore)
	id := e.queue(clientKey)
	b := newBrowser(t, e.srv.URL)
	b.signIn(aliceToken)
	_, body := b.get("/ui/reviews")
	if !strings.Contains(body, `data-review="`+id+`"`) || !strings.Contains(body, `class="sla"`) {
		t.Fatalf("the queue does not list %s with its SLA\n%s", id, body)
	}
	_, body = b.get("/ui/reviews/" + id)
	for _, want := range []string{`<select id="f-allowed" name="allowed" required`, `<input id="f-reason" name="reason"`, "you are all idiots"} {
		if !strings.Contains(body, want) {
			t.Errorf("item page lacks %q\n%s", want, body)
		}
	}
	if status, body := b.post("/ui/reviews/"+id, url.Values{"action": {"claim"}}); status != http.StatusOK || !strings.Contains(body, "claimed (alice)") {
		t.Fatalf("claim: %d\n%s", status, body)
	}
	// Left empty, the required field is refused by the API, at the field.
	status, body := b.post("/ui/reviews/"+id, url.Values{"action": {"resolve"}, "allowed": {""}, "reason": {"x"}})
	if status != http.StatusBadRequest || !regexp.MustCompile(`id="e-allowed">required`).MatchString(body) || !strings.Contains(body, `aria-invalid="true" aria-describedby="e-allowed"`) {
		t.Fatalf("resolve without allowed: %d, want the error at the field\n%s", status, body)
	}
	if !strings.Contains(body, `value="x"`) {
		t.Error("the form lost what the operator typed")
	}
	status, body = b.post("/ui/reviews/"+id, url.Values{"action": {"resolve"}, "allowed": {"true"}, "reason": {"banter"}})
	if status != http.StatusOK || !strings.Contains(body, "Done: resolve") {
		t.Fatalf("resolve: %d\n%s", status, body)
	}
	_, _, got := e.do("GET", "/v1/reviews/"+id, clientKey, "")
	v := decode[reviewView](t, got)
	if v.Status != "resolved" || string(v.Result) != `{"allowed":true,"reason":"banter"}` {
		t.Fatalf("GET /v1/reviews/%s: %s", id, got)
	}
	// Another item, rejected.
	id2 := e.queue(clientKey)
	b.get("/ui/reviews/" + id2)
	if status, body := b.post("/ui/reviews/"+id2, url.Values{"action": {"reject"}, "reason": {"spam"}}); status != http.StatusOK || !strings.Contains(body, "spam") {
		t.Fatalf("reject: %d\n%s", status, body)
	}
}

func TestConsoleSchemaForm(t *testing.T) {
	fields, ok := schemaForm([]byte(triageSchema))
	if !ok || len(fields) != 3 {
		t.Fatalf("triage schema: %v %+v", ok, fields)
	}
	if f := fields[0]; f.Name != "department" || f.Kind != "enum" || len(f.Options) != 5 || f.Options[4].Label != "(none)" || !f.Required {
		t.Errorf("department: %+v", f)
	}
	if f := fields[1]; f.Name != "is_urgent" || f.Kind != "number" {
		t.Errorf("is_urgent: %+v", f)
	}
	res, good := formResult(fields, url.Values{"department": {`"billing"`}, "is_urgent": {"0.5"}, "urgency_score": {"two"}}.Get)
	if good || fields[2].Error != "must be a number" {
		t.Errorf("a word for a number: %v %+v", good, fields[2])
	}
	res, good = formResult(fields, url.Values{"department": {"null"}, "is_urgent": {"5"}, "urgency_score": {"1"}}.Get)
	if !good || string(res) != `{"department":null,"is_urgent":5,"urgency_score":1}` {
		t.Errorf("result %s %v", res, good)
	}
	rest := fieldErrors(fields, []string{"at /is_urgent: must be <= 1", "at /: missing property 'urgency_score'", "at /: something else"})
	if fields[1].Error != "must be <= 1" || !strings.Contains(fields[2].Error, "required") || len(rest) != 1 {
		t.Errorf("field errors: %q %q rest %q", fields[1].Error, fields[2].Error, rest)
	}
	if _, ok := schemaForm([]byte(`{"type":"object","properties":{"tags":{"type":"array"}}}`)); ok {
		t.Error("an array property made a flat form")
	}
}

func TestConsoleEventsOnQueueChange(t *testing.T) {
	e := newReviewEnv(t, memoryStore)
	b := newBrowser(t, e.srv.URL)
	b.signIn(aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/ui/events", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- ev
			}
		}
		close(events)
	}()
	if first := <-events; first != "{}" {
		t.Fatalf("first event %q, want the empty queue", first)
	}
	e.queue(clientKey)
	if next := <-events; !strings.Contains(next, `"moderation"`) || !strings.Contains(next, `"Pending":1`) {
		t.Fatalf("event after queueing: %q", next)
	}
}

func TestConsoleNoSecretInAnyPage(t *testing.T) {
	e := newEnv(t, withOperators)
	id := ""
	{
		e.primary.set("fail")
		e.backup.set("fail")
		status, _, body := e.do("POST", "/v1/tasks/moderation", clientKey, `{"input": {"message": "m"}}`)
		if status != http.StatusAccepted {
			t.Fatalf("moderation: %d %s", status, body)
		}
		id = decode[envelope](t, body).ReviewID
	}
	secrets := []string{adminToken, aliceToken, bobToken, clientKey, otherKey, providerKey}
	check := func(what, body string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s shows a secret (%s…)", what, s[:4])
			}
		}
	}
	b := newBrowser(t, e.srv.URL)
	_, body := b.signIn(adminToken + "x")
	check("the refused sign-in", body)
	_, body = b.signIn(adminToken)
	check("the overview", body)
	for _, path := range []string{"/ui/flags", "/ui/breakers", "/ui/reviews", "/ui/reviews/" + id, "/ui/reviews?fragment=queue", "/ui/static/console.js"} {
		_, body := b.get(path)
		check(path, body)
	}
	_, body = b.post("/ui/flags", url.Values{"action": {"global"}, "kill": {"on"}})
	check("the confirmation page", body)
	op := newBrowser(t, e.srv.URL)
	_, body = op.signIn(bobToken)
	check("the operator's queue", body)
	_, body = op.get("/ui/flags")
	check("the operator's refusal", body)
}

// TestConsoleSparkline: the overview's chart has a bar per 5 s bucket with calls, its height
// the share, and says the shares in words.
func TestConsoleSparkline(t *testing.T) {
	got := string(sparkline([]float64{-1, 0, 0.5, 1}))
	for _, want := range []string{`role="img"`, "none, 0%, 50%, 100%", `height="10"`, `height="20"`, `height="1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("sparkline %s: no %q", got, want)
		}
	}
	if n := strings.Count(got, "<rect"); n != 3 {
		t.Errorf("%d bars, want 3 (none for the bucket without calls)", n)
	}
}
