package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/afloat-dev/afloat/review"
)

// reviewView is the caller's view of a review item (shared/DESIGN.md §6): its status and,
// once resolved, the operator's answer, or once rejected, the operator's reason. Who
// answered is the operators' own (GET /admin/reviews/{id}).
type reviewView struct {
	ID        string          `json:"id"`
	Task      string          `json:"task"`
	Status    review.Status   `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
	Result    json.RawMessage `json:"result"`
	// Reason is why the operator rejected the item; absent unless rejected.
	Reason string `json:"reason,omitempty"`
	// ResolvedAt is when the item was resolved or rejected; absent before.
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	// Delivery is where the answer's webhook stands (review.webhook); absent when there is
	// none.
	Delivery *deliveryView `json:"delivery,omitempty"`
}

func (g *Gateway) reviewStatus(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if g.cfg.Review == nil {
		writeError(w, http.StatusNotFound, "unknown_review", "no review "+id)
		return
	}
	it, err := g.cfg.Review.Get(r.Context(), tenantFrom(r), id)
	switch {
	case errors.Is(err, review.ErrNotFound):
		writeError(w, http.StatusNotFound, "unknown_review", "no review "+id)
		return
	case err != nil:
		g.log.ErrorContext(r.Context(), "review store read failed", "err", err)
		setRetryAfter(w, 5*time.Second)
		writeError(w, http.StatusServiceUnavailable, "review_unavailable", "the review store cannot be read; retry later")
		return
	}
	v := reviewView{ID: it.ID, Task: it.Task, Status: it.Status, CreatedAt: it.CreatedAt.UTC(), Result: json.RawMessage("null"),
		ResolvedAt: timePtr(it.ResolvedAt), Delivery: viewDelivery(it.Delivery)}
	if it.Status == review.StatusResolved && len(it.Result) > 0 {
		v.Result = it.Result
	}
	if it.Status == review.StatusRejected {
		v.Reason = it.Reason
	}
	writeJSON(w, http.StatusOK, v)
}
