package gateway

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const (
	aliceToken = "op-alice-5e2b8d1f7a"
	bobToken   = "op-bob-9c4e6a2f1b"
	modBody    = `{"input": {"message": "you are all idiots"}}`
)

var operators = map[string]string{"alice": aliceToken, "bob": bobToken}

// reviewEnv is a gateway whose only provider always fails, so that every call of the
// critical task "moderation" goes to the review store the test chose; "triage"
// (enrichment) answers from its heuristic beside it.
type reviewEnv struct {
	*env
	store    review.Store
	metrics  *telemetry.Metrics
	newGW    func(opts ...envOption) *httptest.Server
	upstream *mockUpstream
}

func newReviewEnv(t *testing.T, open func(m *telemetry.Metrics) review.Store, opts ...envOption) *reviewEnv {
	t.Helper()
	up := newMockUpstream(t, triageAnswer)
	up.set("fail")
	re := &reviewEnv{env: &env{t: t, logs: &syncBuffer{}, registry: prometheus.NewRegistry()}, upstream: up}
	logger := slog.New(slog.NewJSONHandler(re.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	if re.metrics, err = telemetry.New(re.registry); err != nil {
		t.Fatal(err)
	}
	re.store = open(re.metrics)
	t.Cleanup(func() { _ = re.store.Close() })
	c, err := openai.New(openai.Config{Name: "primary", BaseURL: up.srv.URL + "/v1", APIKey: providerKey, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := cascade.New(cascade.Config{
		Providers: []cascade.ProviderConfig{{Name: "primary", Provider: c, Retry: cascade.RetryConfig{Max: -1}}},
		Review:    re.store, Metrics: re.metrics, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := prompt.Parse("moderation/primary.v1.tmpl", "--- user\n{{.message}}")
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[string]*cascade.Task{}
	for _, tc := range []cascade.TaskConfig{
		{Name: "moderation", Criticality: afloat.Critical, Budget: 2 * time.Second, Schema: []byte(moderationSchema), ReviewSLA: 30 * time.Minute},
		{Name: "triage", Criticality: afloat.Enrichment, Budget: 2 * time.Second, Schema: []byte(triageSchema),
			Heuristic: cascade.Rules{{Default: map[string]any{"department": nil, "is_urgent": 0.2, "urgency_score": 0.5}}}},
	} {
		tc.Cascade = []cascade.Tier{{Provider: "primary", Prompt: tmpl}}
		if tasks[tc.Name], err = engine.Task(tc); err != nil {
			t.Fatal(err)
		}
	}
	re.engine = engine
	re.newGW = func(extra ...envOption) *httptest.Server {
		cfg := Config{Engine: engine, Tasks: tasks, Review: re.store, AdminToken: adminToken, Operators: operators,
			Tenants:  map[string][]string{"acme": {clientKey}, "globex": {otherKey}},
			Gatherer: re.registry, Logger: logger}
		for _, o := range append(slices.Clone(opts), extra...) {
			o(&cfg)
		}
		gw, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw.Handler())
		t.Cleanup(srv.Close)
		return srv
	}
	re.srv = re.newGW()
	return re
}

// sqliteAt opens the review store of a reviewEnv on the SQLite file at path, which a second
// gateway (a restart) opens again.
func sqliteAt(t *testing.T, path string) func(m *telemetry.Metrics) review.Store {
	return func(m *telemetry.Metrics) review.Store {
		s, err := review.OpenSQLite(context.Background(), path, review.Options{Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func memoryStore(m *telemetry.Metrics) review.Store {
	return review.NewMemoryWith(review.Options{Metrics: m})
}

// queue calls the critical task as tenant (by its key) and returns the review id of its 202.
func (e *reviewEnv) queue(key string, hdr ...string) string {
	e.t.Helper()
	status, _, body := e.do("POST", "/v1/tasks/moderation", key, modBody, hdr...)
	if status != http.StatusAccepted {
		e.t.Fatalf("moderation call: %d %s, want 202", status, body)
	}
	res := decode[envelope](e.t, body)
	if res.Source != afloat.SourceHuman || res.ReviewID == "" {
		e.t.Fatalf("202 envelope %s", body)
	}
	return res.ReviewID
}

type errBody struct {
	Error struct {
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Details []string `json:"details"`
	} `json:"error"`
}

func TestReviewLifecycle(t *testing.T) {
	e := newReviewEnv(t, memoryStore)
	a, b, c := e.queue(clientKey), e.queue(clientKey), e.queue(clientKey)
	g := e.queue(otherKey)

	// The operators see every tenant's items, oldest first, with the tenant named.
	status, _, body := e.do("GET", "/admin/reviews?status=pending", aliceToken, "")
	list := decode[reviewList](t, body)
	if status != 200 || len(list.Items) != 4 || list.Items[0].ID != a || list.Items[3].ID != g || list.Items[3].Tenant != "globex" || list.NextCursor != nil {
		t.Fatalf("list pending: %d %s", status, body)
	}
	if list.Items[0].Input != nil || list.Items[0].Attempts != nil {
		t.Errorf("the list carries inputs and attempts: %s", body)
	}
	status, _, body = e.do("GET", "/admin/reviews/"+a, bobToken, "")
	full := decode[reviewItem](t, body)
	if status != 200 || string(full.Input) != `{"message":"you are all idiots"}` || len(full.Attempts) != 1 ||
		full.Attempts[0].Outcome != afloat.OutcomeUnavailable || !slices.Equal(full.PromptVersions, []string{"moderation/primary/v1"}) {
		t.Fatalf("show: %d %s", status, body)
	}

	steps := []struct {
		name, method, path, token, body string
		status                          int
		code, contains                  string
	}{
		{"alice claims a", "POST", "/admin/reviews/" + a + "/claim", aliceToken, "", 200, "", `"operator":"alice"`},
		{"bob cannot claim a", "POST", "/admin/reviews/" + a + "/claim", bobToken, "", 409, "review_conflict", "claimed by alice"},
		{"bob cannot resolve a", "POST", "/admin/reviews/" + a + "/resolve", bobToken, `{"result": {"allowed": true}}`, 409, "review_conflict", "claimed by alice"},
		{"an answer off the schema", "POST", "/admin/reviews/" + a + "/resolve", aliceToken, `{"result": {"allowed": "no", "extra": 1}}`, 400, "invalid_result", "/allowed"},
		{"no result", "POST", "/admin/reviews/" + a + "/resolve", aliceToken, `{}`, 400, "invalid_request", "result"},
		{"alice resolves a", "POST", "/admin/reviews/" + a + "/resolve", aliceToken, `{"result": {"allowed": false, "reason": "insult"}}`, 200, "", `"status":"resolved"`},
		{"a is resolved for good", "POST", "/admin/reviews/" + a + "/resolve", aliceToken, `{"result": {"allowed": true}}`, 409, "review_conflict", "already resolved by alice"},
		{"bob rejects pending b", "POST", "/admin/reviews/" + b + "/reject", bobToken, `{"reason": "not moderation: a test message"}`, 200, "", `"operator":"bob"`},
		{"resolving rejected b", "POST", "/admin/reviews/" + b + "/resolve", aliceToken, `{"result": {"allowed": true}}`, 409, "review_conflict", "already rejected by bob"},
		{"a reject needs a reason", "POST", "/admin/reviews/" + c + "/reject", bobToken, `{"reason": "  "}`, 400, "invalid_request", "reason"},
		{"bob resolves pending c", "POST", "/admin/reviews/" + c + "/resolve", bobToken, `{"result": {"allowed": true}}`, 200, "", `"claimed_at":"`},
		{"unknown id", "POST", "/admin/reviews/rv_nope/resolve", aliceToken, `{"result": {"allowed": true}}`, 404, "unknown_review", "rv_nope"},
		{"unknown id shown", "GET", "/admin/reviews/rv_nope", aliceToken, "", 404, "unknown_review", ""},
		{"bad status", "GET", "/admin/reviews?status=open", aliceToken, "", 400, "invalid_status", "open"},
		{"bad limit", "GET", "/admin/reviews?limit=0", aliceToken, "", 400, "invalid_limit", ""},
		{"bad cursor", "GET", "/admin/reviews?cursor=xyz", aliceToken, "", 400, "invalid_request", "cursor"},
	}
	for _, s := range steps {
		status, _, body := e.do(s.method, s.path, s.token, s.body)
		if status != s.status || !strings.Contains(string(body), s.contains) {
			t.Fatalf("%s: %d %s, want %d with %q", s.name, status, body, s.status, s.contains)
		}
		if s.code != "" {
			if eb := decode[errBody](t, body); eb.Error.Code != s.code {
				t.Fatalf("%s: code %q, want %q", s.name, eb.Error.Code, s.code)
			}
		}
	}
	// A refused answer lists every validation error, and leaves the item as it was.
	status, _, body = e.do("POST", "/admin/reviews/"+g+"/resolve", aliceToken, `{"result": {"allowed": "no", "extra": 1}}`)
	eb := decode[errBody](t, body)
	if status != 400 || len(eb.Error.Details) != 2 || !strings.Contains(strings.Join(eb.Error.Details, "\n"), "at /allowed") {
		t.Fatalf("validation details: %d %s", status, body)
	}
	if it, err := e.store.Lookup(context.Background(), g); err != nil || it.Status != review.StatusPending {
		t.Fatalf("a refused answer changed the item: %+v, %v", it, err)
	}

	// The callers see their own items' outcome, and nobody else's.
	callers := []struct {
		name, id, key string
		status        int
		state, result string
	}{
		{"resolved", a, clientKey, 200, "resolved", `{"allowed":false,"reason":"insult"}`},
		{"rejected", b, clientKey, 200, "rejected", "null"},
		{"pending", g, otherKey, 200, "pending", "null"},
		{"another tenant's", a, otherKey, 404, "", ""},
		{"unknown", "rv_nope", clientKey, 404, "", ""},
	}
	for _, c := range callers {
		status, _, body := e.do("GET", "/v1/reviews/"+c.id, c.key, "")
		if status != c.status {
			t.Fatalf("%s: %d %s", c.name, status, body)
		}
		if status != 200 {
			continue
		}
		v := decode[reviewView](t, body)
		if string(v.Status) != c.state || string(v.Result) != c.result || (c.state != "pending") != (v.ResolvedAt != nil) {
			t.Fatalf("%s: %s", c.name, body)
		}
		if strings.Contains(string(body), "bob") || strings.Contains(string(body), "alice") {
			t.Errorf("%s: the caller sees the operator: %s", c.name, body)
		}
	}

	// Pages of one item walk the whole queue once, in order.
	var got []string
	cursor := ""
	for range 10 {
		path := "/admin/reviews?limit=1"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		_, _, body := e.do("GET", path, aliceToken, "")
		page := decode[reviewList](t, body)
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if !slices.Equal(got, []string{a, b, c, g}) {
		t.Fatalf("pages %v, want %v", got, []string{a, b, c, g})
	}
	_, _, body = e.do("GET", "/admin/reviews?status=resolved&task=moderation", aliceToken, "")
	if l := decode[reviewList](t, body); len(l.Items) != 2 || l.Items[0].ID != a || l.Items[1].ID != c {
		t.Fatalf("resolved: %s", body)
	}

	metrics := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"enqueued", e.metrics.ReviewEnqueued.WithLabelValues("moderation"), 4},
		{"resolved", e.metrics.ReviewResolved.WithLabelValues("moderation"), 2},
		{"rejected", e.metrics.ReviewRejected.WithLabelValues("moderation"), 1},
		{"depth", e.metrics.ReviewQueueDepth.WithLabelValues("moderation"), 1},
	}
	for _, m := range metrics {
		if got := testutil.ToFloat64(m.c); got != m.want {
			t.Errorf("%s: %v, want %v", m.name, got, m.want)
		}
	}
	if _, text := e.metricsText(); !strings.Contains(text, `afloat_review_oldest_pending_seconds{task="moderation"} `) ||
		!strings.Contains(text, `afloat_review_queue_depth{task="moderation"} 1`) {
		t.Errorf("/metrics lacks the queue's series:\n%s", grep(text, "afloat_review"))
	}
	if !strings.Contains(e.logs.String(), `"msg":"review resolved","review":"`+a+`","task":"moderation","operator":"alice"`) {
		t.Errorf("no audit line for the resolve")
	}
}

func TestReviewAuth(t *testing.T) {
	e := newReviewEnv(t, memoryStore)
	id, other := e.queue(clientKey), e.queue(clientKey)
	tests := []struct {
		name, method, path, token string
		hdr                       []string
		status                    int
		code                      string
	}{
		{"no token", "GET", "/admin/reviews", "", nil, 401, "unauthorized"},
		{"a client key", "GET", "/admin/reviews", clientKey, nil, 401, "unauthorized"},
		{"an operator outside the review API", "GET", "/admin/status", aliceToken, nil, 403, "forbidden"},
		{"an operator's flags", "PUT", "/admin/flags", aliceToken, nil, 403, "forbidden"},
		{"admin reads without naming anyone", "GET", "/admin/reviews", adminToken, nil, 200, ""},
		{"admin writes without naming anyone", "POST", "/admin/reviews/" + other + "/claim", adminToken, nil, 200, ""},
		{"admin names a malformed operator", "POST", "/admin/reviews/" + id + "/claim", adminToken, []string{OperatorHeader, "carol smith"}, 400, "invalid_operator"},
		{"alice poses as bob", "POST", "/admin/reviews/" + id + "/claim", aliceToken, []string{OperatorHeader, "bob"}, 403, "operator_mismatch"},
		{"alice names herself", "POST", "/admin/reviews/" + id + "/claim", aliceToken, []string{OperatorHeader, "alice"}, 200, ""},
		{"admin acts for alice", "POST", "/admin/reviews/" + id + "/claim", adminToken, []string{OperatorHeader, "alice"}, 200, ""},
		{"admin acts for carol", "POST", "/admin/reviews/" + id + "/claim", adminToken, []string{OperatorHeader, "carol"}, 409, "review_conflict"},
	}
	for _, tc := range tests {
		status, _, body := e.do(tc.method, tc.path, tc.token, "", tc.hdr...)
		if status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
		if tc.code != "" {
			if eb := decode[errBody](t, body); eb.Error.Code != tc.code {
				t.Fatalf("%s: code %q, want %q", tc.name, eb.Error.Code, tc.code)
			}
		}
	}

	// Without an admin token and operators the API does not exist; operators alone open it.
	off := e.newGW(func(c *Config) { c.AdminToken, c.Operators = "", nil })
	opsOnly := e.newGW(func(c *Config) { c.AdminToken = "" })
	for _, tc := range []struct {
		name   string
		srv    *httptest.Server
		token  string
		status int
	}{
		{"off", off, adminToken, 404},
		{"operators only, operator", opsOnly, bobToken, 200},
		{"operators only, old admin token", opsOnly, adminToken, 401},
	} {
		req, _ := http.NewRequest("GET", tc.srv.URL+"/admin/reviews", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
}

// TestWhoActs: the admin token alone acts as "admin", with X-Afloat-Operator as the operator
// it names; an operator's token acts as its operator, and cannot name another.
func TestWhoActs(t *testing.T) {
	e := newReviewEnv(t, memoryStore)
	tests := []struct {
		name, verb, body, token string
		hdr                     []string
		status                  int
		operator                string // who the store records; "" when the call is refused
	}{
		{"admin alone claims", "claim", "", adminToken, nil, 200, AdminOperator},
		{"admin alone resolves", "resolve", `{"result": {"allowed": false}}`, adminToken, nil, 200, AdminOperator},
		{"admin alone rejects", "reject", `{"reason": "spam"}`, adminToken, nil, 200, AdminOperator},
		{"admin claims for carol", "claim", "", adminToken, []string{OperatorHeader, "carol"}, 200, "carol"},
		{"admin resolves for carol", "resolve", `{"result": {"allowed": false}}`, adminToken, []string{OperatorHeader, "carol"}, 200, "carol"},
		{"admin rejects for carol", "reject", `{"reason": "spam"}`, adminToken, []string{OperatorHeader, "carol"}, 200, "carol"},
		{"admin names an operator with a token", "resolve", `{"result": {"allowed": false}}`, adminToken, []string{OperatorHeader, "alice"}, 200, "alice"},
		{"alice alone", "resolve", `{"result": {"allowed": false}}`, aliceToken, nil, 200, "alice"},
		{"alice names herself", "reject", `{"reason": "spam"}`, aliceToken, []string{OperatorHeader, "alice"}, 200, "alice"},
		{"alice names bob", "claim", "", aliceToken, []string{OperatorHeader, "bob"}, 403, ""},
		{"alice names the admin", "resolve", `{"result": {"allowed": false}}`, aliceToken, []string{OperatorHeader, AdminOperator}, 403, ""},
		{"alice names nobody but spaces", "reject", `{"reason": "spam"}`, aliceToken, []string{OperatorHeader, "  "}, 200, "alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.queue(clientKey)
			status, _, body := e.do("POST", "/admin/reviews/"+id+"/"+tc.verb, tc.token, tc.body, tc.hdr...)
			if status != tc.status {
				t.Fatalf("%d %s, want %d", status, body, tc.status)
			}
			it, err := e.store.Lookup(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if it.Operator != tc.operator {
				t.Fatalf("the store records operator %q, want %q (%s)", it.Operator, tc.operator, body)
			}
			if tc.operator != "" {
				if v := decode[reviewItem](t, body); v.Operator == nil || *v.Operator != tc.operator {
					t.Fatalf("the answer names %v, want %q: %s", v.Operator, tc.operator, body)
				}
			} else if it.Status != review.StatusPending {
				t.Fatalf("a refused call changed the item: %+v", it)
			}
		})
	}
	if !strings.Contains(e.logs.String(), `"msg":"review resolved","review":"`) || !strings.Contains(e.logs.String(), `"operator":"admin"`) {
		t.Errorf("no audit line names the admin")
	}
}

func TestOperatorsConfigRefused(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		ops  map[string]string
		want string
	}{
		{"the admin token", map[string]string{"alice": adminToken}, "admin token"},
		{"a client key", map[string]string{"alice": clientKey}, "client key of tenant"},
		{"a shared token", map[string]string{"alice": "tok-1234567890", "bob": "tok-1234567890"}, "share a token"},
		{"an empty token", map[string]string{"alice": ""}, "empty token"},
		{"a name with spaces", map[string]string{"alice smith": "tok-1234567890"}, "operator name"},
		{"the admin's name", map[string]string{"admin": "tok-1234567890"}, "the admin token's"},
	}
	for _, tc := range tests {
		_, err := New(Config{Engine: e.engine, AdminToken: adminToken, Operators: tc.ops,
			Tenants: map[string][]string{"acme": {clientKey}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "tok-1234567890") {
			t.Errorf("%s: the error shows the token: %v", tc.name, err)
		}
	}
}

// TestIdempotencyKeyFindsTheSameReviewAfterARestart: the store, not only the gateway's
// memory, keeps one item per key: a second gateway over the same store (a restart) answers
// the retried call with the first review.
func TestIdempotencyKeyFindsTheSameReviewAfterARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afloat.db")
	e := newReviewEnv(t, sqliteAt(t, path))
	first := e.queue(clientKey, "Idempotency-Key", "order-42")
	e.srv = e.newGW()
	if again := e.queue(clientKey, "Idempotency-Key", "order-42"); again != first {
		t.Fatalf("retried call queued %s, want the first review %s", again, first)
	}
	if other := e.queue(otherKey, "Idempotency-Key", "order-42"); other == first {
		t.Fatal("another tenant's key found the first tenant's review")
	}
	page, err := e.store.List(context.Background(), review.Filter{})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("%v items, %v; want 2", page, err)
	}
}

// brokenStore is a store whose commits fail while broken is set.
type brokenStore struct {
	review.Store
	broken atomic.Bool
}

var errDiskFull = errors.New("database or disk is full")

func (b *brokenStore) Enqueue(ctx context.Context, it *review.Item) (string, error) {
	if b.broken.Load() {
		return "", errDiskFull
	}
	return b.Store.Enqueue(ctx, it)
}

func (b *brokenStore) Ping(ctx context.Context) error {
	if b.broken.Load() {
		return fmt.Errorf("review: the store cannot commit: %w", errDiskFull)
	}
	return b.Store.Ping(ctx)
}

// TestStoreFailureFailsClosed: when the review store cannot commit, the critical task
// answers 503 and never a result; enrichment keeps answering; /readyz and /admin/status show
// it; everything returns once the store commits again.
func TestStoreFailureFailsClosed(t *testing.T) {
	broken := &brokenStore{Store: review.NewMemory(nil)}
	e := newReviewEnv(t, func(*telemetry.Metrics) review.Store { return broken })
	broken.broken.Store(true)
	checkFailsClosed(t, e, "database or disk is full")
	broken.broken.Store(false)
	checkRecovered(t, e)
}

// TestLockedSQLiteFailsClosed: the same with a real SQLite file whose write lock another
// process holds; the metric shows it too.
func TestLockedSQLiteFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afloat.db")
	e := newReviewEnv(t, func(m *telemetry.Metrics) review.Store {
		s, err := review.OpenSQLite(context.Background(), path, review.Options{Metrics: m, BusyTimeout: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	ctx := context.Background()
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	checkFailsClosed(t, e, "locked")
	if _, body := e.metricsText(); !strings.Contains(body, "afloat_review_store_healthy 0") {
		t.Fatalf("metric while locked:\n%s", grep(body, "afloat_review_store"))
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, e)
	if _, body := e.metricsText(); !strings.Contains(body, "afloat_review_store_healthy 1") {
		t.Fatalf("metric after recovery:\n%s", grep(body, "afloat_review_store"))
	}
}

func checkFailsClosed(t *testing.T, e *reviewEnv, cause string) {
	t.Helper()
	for range 3 {
		status, hdr, body := e.do("POST", "/v1/tasks/moderation", clientKey, modBody)
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Fatalf("critical call with the store down: %d %s, want 503 with Retry-After", status, body)
		}
		if eb := decode[errBody](t, body); eb.Error.Code != "review_unavailable" || !strings.Contains(eb.Error.Message, "not queued") {
			t.Fatalf("error %s", body)
		}
		if strings.Contains(string(body), "result") || strings.Contains(string(body), "review_id") {
			t.Fatalf("a 503 that carries an answer: %s", body)
		}
	}
	if status, _, body := e.do("POST", "/v1/tasks/triage", clientKey, modBody); status != 200 {
		t.Fatalf("enrichment with the store down: %d %s, want its heuristic", status, body)
	}
	status, _, body := e.do("GET", "/readyz", "", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), cause) {
		t.Fatalf("/readyz with the store down: %d %s", status, body)
	}
	status, _, body = e.do("GET", "/admin/status", adminToken, "")
	doc := decode[map[string]any](t, body)
	rs, _ := doc["review_store"].(map[string]any)
	if status != 200 || rs["healthy"] != false || !strings.Contains(fmt.Sprint(rs["error"]), cause) {
		t.Fatalf("/admin/status review_store with the store down: %s", body)
	}
}

func checkRecovered(t *testing.T, e *reviewEnv) {
	t.Helper()
	if status, _, body := e.do("GET", "/readyz", "", ""); status != 200 {
		t.Fatalf("/readyz after recovery: %d %s", status, body)
	}
	_, _, body := e.do("GET", "/admin/status", adminToken, "")
	rs, _ := decode[map[string]any](t, body)["review_store"].(map[string]any)
	if rs["healthy"] != true {
		t.Fatalf("/admin/status review_store after recovery: %s", body)
	}
	id := e.queue(clientKey)
	_, _, body = e.do("GET", "/admin/status", adminToken, "")
	if !strings.Contains(string(body), `"moderation":{"pending":1,"claimed":0,"oldest_pending_at":"`) {
		t.Fatalf("/admin/status lacks the queued item %s: %s", id, body)
	}
}

func (e *reviewEnv) metricsText() (int, string) {
	status, _, body := e.do("GET", "/metrics", "", "")
	return status, string(body)
}

func grep(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
