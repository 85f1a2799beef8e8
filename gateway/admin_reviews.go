package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/review"
)

// The operators' review API (shared/DESIGN.md §6):
//
//	GET  /admin/reviews?status=pending&task=moderation&limit=50&cursor=…
//	GET  /admin/reviews/{id}
//	POST /admin/reviews/{id}/claim
//	POST /admin/reviews/{id}/resolve   {"result": {...}}   validated against the task's schema
//	POST /admin/reviews/{id}/reject    {"reason": "..."}
//	POST /admin/reviews/{id}/release   the claim goes back: the item is pending again
//
// Who may call it: an operator with their own token (Config.Operators, from
// operators.<name>.token), who acts as that name (the X-Afloat-Operator header, if sent, must
// name them: an operator cannot act as another); or the admin token, which acts as the
// operator the header names, or as AdminOperator without it. An operator's token opens only
// this API, never the rest of /admin. The API is off (404) when there is neither an admin
// token nor an operator.

// OperatorHeader names the operator an admin-token call acts for.
const OperatorHeader = "X-Afloat-Operator"

// AdminOperator is who an admin-token call acts as when it names no operator.
const AdminOperator = "admin"

const (
	operatorCtx ctxKey = 1
	// adminCtx marks a call made with the admin token, whoever it acts for.
	adminCtx ctxKey = 2
)

// operatorName is what an operator may be called: it is written to the store and the logs.
var operatorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// maxReason caps a rejection's reason, in characters.
const maxReason = 2000

// checkOperators refuses operators whose names or tokens would make identities ambiguous.
func checkOperators(cfg Config) error {
	seen := map[string]string{}
	for name, token := range cfg.Operators {
		if !operatorName.MatchString(name) {
			return fmt.Errorf("gateway: operator name %q: want 1-64 letters, digits, '.', '_', '@' or '-'", name)
		}
		if name == AdminOperator {
			return fmt.Errorf("gateway: operator %q: the name is the admin token's, who acts as %q when it names no operator", name, AdminOperator)
		}
		if token == "" {
			return fmt.Errorf("gateway: operator %q has an empty token", name)
		}
		if token == cfg.AdminToken {
			return fmt.Errorf("gateway: operator %q has the admin token as their token", name)
		}
		if other, ok := seen[token]; ok {
			return fmt.Errorf("gateway: operators %q and %q share a token", other, name)
		}
		seen[token] = name
		for tenant, keys := range cfg.Tenants {
			for _, k := range keys {
				if k == token {
					return fmt.Errorf("gateway: operator %q's token is a client key of tenant %q", name, tenant)
				}
			}
		}
	}
	return nil
}

// routeReviews registers the review API on mux.
func (g *Gateway) routeReviews(mux *http.ServeMux) {
	mux.Handle("GET /admin/reviews", g.reviewer(http.HandlerFunc(g.listReviews)))
	mux.Handle("GET /admin/reviews/{id}", g.reviewer(http.HandlerFunc(g.showReview)))
	mux.Handle("POST /admin/reviews/{id}/claim", g.reviewer(http.HandlerFunc(g.claimReview)))
	mux.Handle("POST /admin/reviews/{id}/resolve", g.reviewer(http.HandlerFunc(g.resolveReview)))
	mux.Handle("POST /admin/reviews/{id}/reject", g.reviewer(http.HandlerFunc(g.rejectReview)))
	mux.Handle("POST /admin/reviews/{id}/release", g.reviewer(http.HandlerFunc(g.releaseReview)))
}

// reviewer authenticates an operator or the admin, and puts the name the call acts as in
// the context.
func (g *Gateway) reviewer(next http.Handler) http.Handler {
	admin := []byte(g.cfg.AdminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(admin) == 0 && len(g.cfg.Operators) == 0 {
			writeError(w, http.StatusNotFound, "admin_disabled", "the review API is off: set server.admin_token or configure operators")
			return
		}
		token, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="afloat-admin"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing token: send Authorization: Bearer <operator token or admin token>")
			return
		}
		name, isAdmin, ok := g.whoIs([]byte(token), admin)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="afloat-admin"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "unknown operator or admin token")
			return
		}
		named := strings.TrimSpace(r.Header.Get(OperatorHeader))
		switch {
		case isAdmin && named != "" && !operatorName.MatchString(named):
			writeError(w, http.StatusBadRequest, "invalid_operator", fmt.Sprintf("%s: want 1-64 letters, digits, '.', '_', '@' or '-'", OperatorHeader))
			return
		case isAdmin && named != "":
			name = named
		case isAdmin:
			name = AdminOperator
		case named != "" && named != name:
			writeError(w, http.StatusForbidden, "operator_mismatch", fmt.Sprintf("this token is operator %s's; it cannot act as %s", name, named))
			return
		}
		if g.cfg.Review == nil {
			writeError(w, http.StatusNotFound, "reviews_disabled", "this gateway has no review store")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBody)
		ctx := context.WithValue(r.Context(), operatorCtx, name)
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, adminCtx, isAdmin)))
	})
}

// whoIs finds the operator whose token this is, or the admin, comparing in constant time
// against every token.
func (g *Gateway) whoIs(token, admin []byte) (name string, isAdmin, ok bool) {
	found := 0
	if len(admin) > 0 && subtle.ConstantTimeCompare(token, admin) == 1 {
		found, isAdmin = 1, true
	}
	for op, t := range g.cfg.Operators {
		if subtle.ConstantTimeCompare(token, []byte(t)) == 1 {
			found, name = 1, op
		}
	}
	return name, isAdmin, found == 1
}

// operatorFrom returns the name a call acts as, which reviewer put in the context.
func operatorFrom(r *http.Request) string {
	name, _ := r.Context().Value(operatorCtx).(string)
	return name
}

// byAdmin reports whether the call was made with the admin token.
func byAdmin(r *http.Request) bool {
	admin, _ := r.Context().Value(adminCtx).(bool)
	return admin
}

// reviewItem is the operators' view of an item. Input, attempts and prompt versions are in
// the full view only (GET /admin/reviews/{id} and the answers of claim, resolve, reject).
type reviewItem struct {
	ID             string           `json:"id"`
	Task           string           `json:"task"`
	Tenant         string           `json:"tenant"`
	Status         review.Status    `json:"status"`
	CreatedAt      time.Time        `json:"created_at"`
	Operator       *string          `json:"operator"`
	ClaimedAt      *time.Time       `json:"claimed_at"`
	ClaimExpiresAt *time.Time       `json:"claim_expires_at"`
	ResolvedAt     *time.Time       `json:"resolved_at"`
	Result         json.RawMessage  `json:"result"`
	Reason         *string          `json:"reason"`
	Input          json.RawMessage  `json:"input,omitempty"`
	Attempts       []afloat.Attempt `json:"attempts,omitempty"`
	PromptVersions []string         `json:"prompt_versions,omitempty"`
	// Overdue: not answered, and queued longer ago than its task's review_sla (Gateway.view).
	Overdue bool `json:"overdue"`
	// Delivery is the answer's webhook (review_delivery.go); null when there is none.
	Delivery *deliveryView `json:"delivery"`
}

func viewItem(it *review.Item, full bool) reviewItem {
	v := reviewItem{ID: it.ID, Task: it.Task, Tenant: it.Tenant, Status: it.Status, CreatedAt: it.CreatedAt.UTC(),
		Operator: strPtr(it.Operator), ClaimedAt: timePtr(it.ClaimedAt), ClaimExpiresAt: timePtr(it.ClaimExpiresAt),
		ResolvedAt: timePtr(it.ResolvedAt), Result: json.RawMessage("null"), Reason: strPtr(it.Reason),
		Delivery: viewDelivery(it.Delivery)}
	if len(it.Result) > 0 {
		v.Result = it.Result
	}
	if full {
		v.Input, v.Attempts, v.PromptVersions = it.Input, it.Attempts, it.PromptVersions
		if v.Attempts == nil {
			v.Attempts = []afloat.Attempt{}
		}
		if v.PromptVersions == nil {
			v.PromptVersions = []string{}
		}
	}
	return v
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

type reviewList struct {
	Items      []reviewItem `json:"items"`
	NextCursor *string      `json:"next_cursor"`
}

func (g *Gateway) listReviews(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := review.Filter{Task: q.Get("task"), Cursor: q.Get("cursor")}
	if s := q.Get("status"); s != "" {
		st, err := review.ParseStatus(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_status", fmt.Sprintf("status %q: want pending, claimed, resolved or rejected", s))
			return
		}
		f.Status = st
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, "invalid_limit", fmt.Sprintf("limit %q: want 1 to 500", s))
			return
		}
		f.Limit = n
	}
	page, err := g.cfg.Review.List(r.Context(), f)
	if err != nil {
		g.reviewError(w, r, "", err)
		return
	}
	out := reviewList{Items: make([]reviewItem, 0, len(page.Items)), NextCursor: strPtr(page.Next)}
	for _, it := range page.Items {
		out.Items = append(out.Items, g.view(it, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) showReview(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	it, err := g.cfg.Review.Lookup(r.Context(), id)
	if err != nil {
		g.reviewError(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, g.view(it, true))
}

func (g *Gateway) claimReview(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	op := operatorFrom(r)
	it, err := g.cfg.Review.Claim(r.Context(), id, op)
	if err != nil {
		g.reviewError(w, r, id, err)
		return
	}
	g.log.InfoContext(r.Context(), "review claimed", "review", id, "task", it.Task, "operator", op)
	writeJSON(w, http.StatusOK, g.view(it, true))
}

func (g *Gateway) resolveReview(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	op := operatorFrom(r)
	if !jsonBody(w, r) {
		return
	}
	var body struct {
		Result json.RawMessage `json:"result"`
	}
	if !decodeStrict(w, r, &body) {
		return
	}
	if len(body.Result) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", `"result" is required: the answer, in the task's schema`)
		return
	}
	ctx := r.Context()
	it, err := g.cfg.Review.Lookup(ctx, id)
	if err != nil {
		g.reviewError(w, r, id, err)
		return
	}
	if it.Answered() {
		g.reviewError(w, r, id, &review.ConflictError{ID: id, Status: it.Status, Operator: it.Operator})
		return
	}
	task, ok := g.served().tasks[it.Task]
	if !ok {
		writeError(w, http.StatusConflict, "unknown_task",
			fmt.Sprintf("review %s belongs to task %s, which this gateway's config does not have: its answer cannot be validated", id, it.Task))
		return
	}
	if err := task.Contract().Validate(body.Result); err != nil {
		var ce *afloat.ContractError
		details := []string{err.Error()}
		if errors.As(err, &ce) && len(ce.Details) > 0 {
			details = ce.Details
		}
		writeJSON(w, http.StatusBadRequest, map[string]detailedError{"error": {
			Code: "invalid_result", Message: fmt.Sprintf("the answer does not fit task %s's schema", it.Task), Details: details,
		}})
		return
	}
	it, err = g.cfg.Review.Resolve(ctx, id, op, body.Result)
	if err != nil {
		g.reviewError(w, r, id, err)
		return
	}
	g.log.InfoContext(r.Context(), "review resolved", "review", id, "task", it.Task, "operator", op)
	g.reviewAnswered(it)
	writeJSON(w, http.StatusOK, viewItem(it, true))
}

func (g *Gateway) rejectReview(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	op := operatorFrom(r)
	if !jsonBody(w, r) {
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if !decodeStrict(w, r, &body) {
		return
	}
	body.Reason = strings.TrimSpace(body.Reason)
	if body.Reason == "" || utf8.RuneCountInString(body.Reason) > maxReason {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf(`"reason" is required, at most %d characters: why the item gets no answer`, maxReason))
		return
	}
	it, err := g.cfg.Review.Reject(r.Context(), id, op, body.Reason)
	if err != nil {
		g.reviewError(w, r, id, err)
		return
	}
	g.log.InfoContext(r.Context(), "review rejected", "review", id, "task", it.Task, "operator", op)
	g.reviewAnswered(it)
	writeJSON(w, http.StatusOK, viewItem(it, true))
}

// releaseReview gives a claim back: the item is pending again. The claiming operator may
// release it, and so may the admin token whoever holds it; another operator's claim is 409.
// A pending item is answered as it is.
func (g *Gateway) releaseReview(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	op := operatorFrom(r)
	ctx := r.Context()
	holder := op
	if byAdmin(r) {
		it, err := g.cfg.Review.Lookup(ctx, id)
		if err != nil {
			g.reviewError(w, r, id, err)
			return
		}
		if it.Status == review.StatusClaimed {
			// Should the claim change hands in between, the store refuses with 409.
			holder = it.Operator
		}
	}
	if err := g.cfg.Review.Release(ctx, id, holder); err != nil {
		g.reviewError(w, r, id, err)
		return
	}
	it, err := g.cfg.Review.Lookup(ctx, id)
	if err != nil {
		g.reviewError(w, r, id, err)
		return
	}
	g.log.InfoContext(r.Context(), "review released", "review", id, "task", it.Task, "operator", op, "holder", holder)
	writeJSON(w, http.StatusOK, g.view(it, true))
}

// detailedError is an error with the lines that explain it (a schema's validation errors).
type detailedError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Details []string `json:"details"`
}

// reviewError answers a store error with its status: 404, 409, 400, or 503 when the store
// could not answer.
func (g *Gateway) reviewError(w http.ResponseWriter, r *http.Request, id string, err error) {
	var ce *review.ConflictError
	switch {
	case errors.Is(err, review.ErrNotFound):
		writeError(w, http.StatusNotFound, "unknown_review", "no review "+id)
	case errors.As(err, &ce):
		writeError(w, http.StatusConflict, "review_conflict", ce.Error())
	case errors.Is(err, review.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request", strings.TrimPrefix(err.Error(), "review: invalid argument: "))
	case r.Context().Err() != nil:
		// The caller left.
	default:
		g.log.ErrorContext(r.Context(), "review store failed", "review", id, "err", err)
		setRetryAfter(w, 5*time.Second)
		writeError(w, http.StatusServiceUnavailable, "review_unavailable", "the review store cannot answer; retry later")
	}
}

// reviewHealth reports whether the review store commits; nil without a store.
func (g *Gateway) reviewHealth(ctx context.Context) error {
	if g.cfg.Review == nil {
		return nil
	}
	return g.cfg.Review.Ping(ctx)
}

// reviewStoreStatus is the review store's part of /admin/status: its kind, whether it
// commits, and each task's unanswered items.
func (g *Gateway) reviewStoreStatus(ctx context.Context) map[string]any {
	if g.cfg.Review == nil {
		return nil
	}
	kind := "custom"
	if k, ok := g.cfg.Review.(interface{ Kind() string }); ok {
		kind = k.Kind()
	}
	doc := map[string]any{"kind": kind, "healthy": true}
	if err := g.cfg.Review.Ping(ctx); err != nil {
		doc["healthy"], doc["error"] = false, err.Error()
	}
	type taskQueue struct {
		Pending       int        `json:"pending"`
		Claimed       int        `json:"claimed"`
		OldestPending *time.Time `json:"oldest_pending_at"`
	}
	stats, err := g.cfg.Review.Stats(ctx)
	if err != nil {
		doc["healthy"], doc["error"] = false, err.Error()
		return doc
	}
	tasks := map[string]taskQueue{}
	for name, st := range stats {
		tasks[name] = taskQueue{Pending: st.Pending, Claimed: st.Claimed, OldestPending: timePtr(st.Oldest)}
	}
	doc["tasks"] = tasks
	return doc
}
