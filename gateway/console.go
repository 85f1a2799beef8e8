package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The operator console (GET /ui/): server-rendered pages over the admin API. A person signs
// in with the admin token or an operator's token, as the admin API takes them; the console
// keeps a session for them in memory (a random id in an HttpOnly, SameSite=Strict cookie) and
// every change it makes goes through the admin API's own handlers, in process, acting as the
// session's name. The admin token opens every page; an operator's token the review queue
// only. Sessions live in this process: a restart, or another replica, signs everyone out.

// sessionTTL is how long a session lasts from sign-in.
const sessionTTL = 8 * time.Hour

// sessionCookie names the console's session cookie.
const sessionCookie = "afloat_console"

//go:embed ui
var uiFiles embed.FS

// session is one signed-in person.
type session struct {
	name    string // "admin" or the operator's name
	admin   bool
	csrf    string
	expires time.Time
}

// console is the operator console of a Gateway. It is safe for concurrent use.
type console struct {
	g      *Gateway
	pages  map[string]*template.Template
	static http.Handler
	audit  *auditLog

	mu       sync.Mutex
	sessions map[string]*session
}

// routeConsole registers the console under /ui/ and the audit log at GET /admin/audit.
func (g *Gateway) routeConsole(mux *http.ServeMux) {
	c := &console{g: g, sessions: map[string]*session{}, audit: newAuditLog(auditSize), pages: map[string]*template.Template{}}
	funcs := template.FuncMap{"json": prettyJSON, "when": fmtTime, "ms": fmtMS, "pct": func(f float64) string {
		return strings.TrimRight(strings.TrimRight(fmtFloat(f*100, 1), "0"), ".") + "%"
	}, "spark": sparkline}
	layout := template.Must(template.New("layout.tmpl").Funcs(funcs).ParseFS(uiFiles, "ui/layout.tmpl"))
	for _, p := range []string{"login", "overview", "flags", "breakers", "canaries", "reviews", "review", "confirm", "message"} {
		c.pages[p] = template.Must(template.Must(layout.Clone()).ParseFS(uiFiles, "ui/"+p+".tmpl"))
	}
	static, _ := fs.Sub(uiFiles, "ui/static")
	c.static = http.StripPrefix("/ui/static/", http.FileServerFS(static))

	mux.Handle("GET /admin/audit", g.admin(http.HandlerFunc(c.getAudit)))
	mux.HandleFunc("GET /ui/static/", c.on(c.static.ServeHTTP))
	mux.HandleFunc("GET /ui/login", c.on(c.loginPage))
	mux.HandleFunc("POST /ui/login", c.on(c.login))
	mux.HandleFunc("POST /ui/logout", c.on(c.signedIn(false, c.logout)))
	mux.HandleFunc("GET /ui/{$}", c.on(c.signedIn(false, c.home)))
	mux.HandleFunc("GET /ui/overview", c.on(c.signedIn(true, c.overview)))
	mux.HandleFunc("GET /ui/flags", c.on(c.signedIn(true, c.flagsPage)))
	mux.HandleFunc("POST /ui/flags", c.on(c.signedIn(true, c.changeFlags)))
	mux.HandleFunc("GET /ui/breakers", c.on(c.signedIn(true, c.breakersPage)))
	mux.HandleFunc("POST /ui/breakers", c.on(c.signedIn(true, c.changeBreakers)))
	mux.HandleFunc("GET /ui/canaries", c.on(c.signedIn(true, c.canariesPage)))
	mux.HandleFunc("POST /ui/canaries", c.on(c.signedIn(true, c.changeCanary)))
	mux.HandleFunc("GET /ui/reviews", c.on(c.signedIn(false, c.reviewsPage)))
	mux.HandleFunc("GET /ui/reviews/{id}", c.on(c.signedIn(false, c.reviewPage)))
	mux.HandleFunc("POST /ui/reviews/{id}", c.on(c.signedIn(false, c.changeReview)))
	mux.HandleFunc("GET /ui/events", c.on(c.signedIn(false, c.events)))
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
}

// on answers 404 while the console has no token to sign in with, and sets the headers every
// console answer carries: no caching, no framing, no script but the console's own.
func (c *console) on(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.g.cfg.AdminToken == "" && len(c.g.cfg.Operators) == 0 {
			writeError(w, http.StatusNotFound, "console_disabled", "the console is off: set server.admin_token or configure operators")
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		r.Body = http.MaxBytesReader(w, r.Body, c.g.cfg.MaxBody)
		next(w, r)
	}
}

type sessionCtxKey struct{}

// signedIn passes on a request with a live session (an admin's when adminOnly), checking the
// CSRF token of every POST; without a session it sends the browser to the sign-in page.
func (c *console) signedIn(adminOnly bool, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.sessionOf(r)
		if s == nil {
			if r.Method == http.MethodGet && r.URL.Path != "/ui/events" {
				http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
				return
			}
			c.message(w, r, nil, http.StatusUnauthorized, "Signed out", "Your session has ended. Sign in again.")
			return
		}
		if r.Method == http.MethodPost {
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
				c.message(w, r, s, http.StatusForbidden, "Refused", "This form is missing its security token or the token is stale. Reload the page and try again.")
				return
			}
		}
		if adminOnly && !s.admin {
			c.message(w, r, s, http.StatusForbidden, "Admins only",
				"You are signed in as operator "+s.name+": an operator's token opens the review queue only. Sign in with the admin token for this page.")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionCtxKey{}, s)))
	}
}

func sessionFrom(r *http.Request) *session {
	s, _ := r.Context().Value(sessionCtxKey{}).(*session)
	return s
}

// sessionOf returns the live session of the request's cookie, nil when there is none.
func (c *console) sessionOf(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	now := c.g.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[ck.Value]
	if !ok {
		return nil
	}
	if !now.Before(s.expires) {
		delete(c.sessions, ck.Value)
		return nil
	}
	return s
}

// newSession stores a session for name and returns its id.
func (c *console) newSession(name string, admin bool) (string, *session) {
	id, csrf := randomID(), randomID()
	now := c.g.clock.Now()
	s := &session{name: name, admin: admin, csrf: csrf, expires: now.Add(sessionTTL)}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, o := range c.sessions { // sign-ins are rare: sweeping here bounds the map
		if !now.Before(o.expires) {
			delete(c.sessions, k)
		}
	}
	c.sessions[id] = s
	return id, s
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	if s := c.sessionOf(r); s != nil {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, http.StatusOK, "login", map[string]any{})
}

func (c *console) login(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimSpace(r.PostFormValue("token"))
	name, admin, ok := "", false, false
	if token != "" {
		name, admin, ok = c.g.whoIs([]byte(token), []byte(c.g.cfg.AdminToken))
	}
	if !ok {
		c.g.log.WarnContext(r.Context(), "console sign-in refused")
		c.render(w, r, nil, http.StatusUnauthorized, "login", map[string]any{
			"Error": "That token is neither the admin token nor an operator's token. Check it and try again."})
		return
	}
	if admin {
		name = AdminOperator
	}
	id, _ := c.newSession(name, admin)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/ui/", MaxAge: int(sessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	c.g.log.InfoContext(r.Context(), "console sign-in", "operator", name, "admin", admin)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.mu.Lock()
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

func (c *console) home(w http.ResponseWriter, r *http.Request) {
	if sessionFrom(r).admin {
		c.overview(w, r)
		return
	}
	http.Redirect(w, r, "/ui/reviews", http.StatusSeeOther)
}

// page is what every page template gets.
type page struct {
	Session *session
	CSRF    string
	Name    string
	Admin   bool
	Path    string
	Data    any
}

// render writes the page with the layout around it.
func (c *console) render(w http.ResponseWriter, r *http.Request, s *session, status int, name string, data any) {
	p := page{Session: s, Path: r.URL.Path, Data: data}
	if s != nil {
		p.CSRF, p.Name, p.Admin = s.csrf, s.name, s.admin
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.g.log.ErrorContext(r.Context(), "console template failed", "page", name, "err", err)
		writeInternal(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// message renders a page that only says something.
func (c *console) message(w http.ResponseWriter, r *http.Request, s *session, status int, title, text string) {
	c.render(w, r, s, status, "message", map[string]string{"Title": title, "Text": text})
}

// apiAnswer is an admin API handler's answer to a call the console made in process.
type apiAnswer struct {
	status int
	body   []byte
}

// ok reports a 2xx answer.
func (a apiAnswer) ok() bool { return a.status >= 200 && a.status < 300 }

// apiError is the message and details of an error answer.
func (a apiAnswer) apiError() (msg string, details []string) {
	var e struct {
		Error struct {
			Message string   `json:"message"`
			Details []string `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(a.body, &e) != nil || e.Error.Message == "" {
		return http.StatusText(a.status), nil
	}
	return e.Error.Message, e.Error.Details
}

// capture is the http.ResponseWriter of an in-process API call.
type capture struct {
	h      http.Header
	status int
	buf    bytes.Buffer
}

func (c *capture) Header() http.Header { return c.h }
func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.buf.Write(b)
}

// callAPI runs an admin API handler in process, as the session's name: the console changes
// nothing any other way. pathValues are the route's wildcards, in pairs.
func (c *console) callAPI(r *http.Request, h http.HandlerFunc, method string, body any, pathValues ...string) apiAnswer {
	s := sessionFrom(r)
	var rd bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&rd).Encode(body)
	}
	ctx := context.WithValue(r.Context(), operatorCtx, s.name)
	ctx = context.WithValue(ctx, adminCtx, s.admin)
	req, _ := http.NewRequestWithContext(ctx, method, r.URL.Path, &rd)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(pathValues); i += 2 {
		req.SetPathValue(pathValues[i], pathValues[i+1])
	}
	w := &capture{h: http.Header{}}
	h(w, req)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return apiAnswer{status: w.status, body: w.buf.Bytes()}
}
