package gateway

import (
	"time"

	"github.com/afloat-dev/afloat/review"
)

// deliveryView is where the webhook of an answered item stands (review.webhook): in GET
// /v1/reviews/{id} and the operators' items; null (absent for the caller) while there is
// none: no webhook, or no answer yet.
type deliveryView struct {
	// State is pending (waiting for its attempt at next_at), delivered or failed.
	State    review.DeliveryState `json:"state"`
	Attempts int                  `json:"attempts"`
	// LastAttempt is when the last POST was made, LastStatus its HTTP status (null: no
	// answer, a transport error) and LastError what went wrong; null before the first.
	LastAttempt *time.Time `json:"last_attempt"`
	LastStatus  *int       `json:"last_status"`
	LastError   *string    `json:"last_error"`
	// NextAt is when the next attempt is due; null unless pending.
	NextAt *time.Time `json:"next_at"`
}

func viewDelivery(d review.Delivery) *deliveryView {
	if d.State == review.DeliveryNone {
		return nil
	}
	v := &deliveryView{State: d.State, Attempts: d.Attempts, LastAttempt: timePtr(d.LastAttempt), LastError: strPtr(d.LastError)}
	if d.LastStatus != 0 {
		v.LastStatus = &d.LastStatus
	}
	if d.State == review.DeliveryPending {
		v.NextAt = timePtr(d.NextAt)
	}
	return v
}

// view is the operators' view of it, flagged overdue when it has outlived its task's
// review_sla unanswered (a task this gateway does not know has no SLA here).
func (g *Gateway) view(it *review.Item, full bool) reviewItem {
	v := viewItem(it, full)
	if t, ok := g.served().tasks[it.Task]; ok {
		v.Overdue = it.Overdue(t.ReviewSLA(), g.clock.Now())
	}
	return v
}

// reviewAnswered tells Config.ReviewAnswered that an operator answered it.
func (g *Gateway) reviewAnswered(it *review.Item) {
	if g.cfg.ReviewAnswered != nil {
		g.cfg.ReviewAnswered(it)
	}
}
