package webhook

import (
	"encoding/json"
	"time"

	"github.com/afloat-dev/afloat/review"
)

// Payload is the JSON body of a delivery: the answer of one review item. It holds no part
// of the item's input (the caller has it, under ID).
type Payload struct {
	// ID is the review id, the one the 202 of the call gave (review_id).
	ID   string `json:"id"`
	Task string `json:"task"`
	// Tenant is the tenant whose call queued the item, so that one receiver can serve a
	// gateway's tenants; absent under open access (no tenants), where every call has none.
	Tenant string `json:"tenant,omitempty"`
	// Status is resolved or rejected.
	Status review.Status `json:"status"`
	// Result is the operator's answer, in the task's schema (resolved only); Reason why
	// they gave none (rejected only).
	Result json.RawMessage `json:"result,omitempty"`
	Reason string          `json:"reason,omitempty"`
	// Operator is who answered.
	Operator   string    `json:"operator"`
	ResolvedAt time.Time `json:"resolved_at"`
	// DeliveryAttempt counts this POST among the item's deliveries, from 1.
	DeliveryAttempt int `json:"delivery_attempt"`
}

// payloadOf is the body of attempt n of it.
func payloadOf(it *review.Item, n int) ([]byte, error) {
	p := Payload{ID: it.ID, Task: it.Task, Tenant: it.Tenant, Status: it.Status, Operator: it.Operator,
		ResolvedAt: it.ResolvedAt.UTC(), DeliveryAttempt: n}
	switch it.Status {
	case review.StatusResolved:
		p.Result = it.Result
		if len(p.Result) == 0 {
			p.Result = json.RawMessage("null")
		}
	case review.StatusRejected:
		p.Reason = it.Reason
	}
	return json.Marshal(p)
}
