package review

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/afloat-dev/afloat"
)

// The state machine of an item, shared by every store: a store loads the item, applies one
// of these at its clock's now, and writes the item back in the same transaction.
//
//	pending --claim--> claimed --resolve--> resolved
//	   |                 |   \--reject---> rejected
//	   |                 \--(claim TTL lapses, or release)--> pending
//	   \--resolve/reject (claims in the same step)--> resolved/rejected

// settle brings the item to now: a claim whose TTL lapsed is pending again.
func (it *Item) settle(now time.Time) {
	if it.Status == StatusClaimed && !it.ClaimExpiresAt.IsZero() && !now.Before(it.ClaimExpiresAt) {
		it.Status, it.Operator = StatusPending, ""
		it.ClaimedAt, it.ClaimExpiresAt = time.Time{}, time.Time{}
	}
}

func (it *Item) conflict() error {
	return &ConflictError{ID: it.ID, Status: it.Status, Operator: it.Operator, Until: it.ClaimExpiresAt}
}

// claim gives the item to operator at now, for ttl (0: no lapse).
func (it *Item) claim(operator string, now time.Time, ttl time.Duration) error {
	if operator == "" {
		return fmt.Errorf("%w: an operator is required", ErrInvalid)
	}
	it.settle(now)
	switch {
	case it.Status == StatusPending:
		it.Status, it.Operator, it.ClaimedAt = StatusClaimed, operator, now
	case it.Status == StatusClaimed && it.Operator == operator:
		// Claiming again renews the claim.
	default:
		return it.conflict()
	}
	it.ClaimExpiresAt = time.Time{}
	if ttl > 0 {
		it.ClaimExpiresAt = now.Add(ttl)
	}
	return nil
}

// release gives back operator's claim at now: the item is pending again.
func (it *Item) release(operator string, now time.Time) error {
	if operator == "" {
		return fmt.Errorf("%w: an operator is required", ErrInvalid)
	}
	it.settle(now)
	switch {
	case it.Status == StatusPending:
	case it.Status == StatusClaimed && it.Operator == operator:
		it.Status, it.Operator = StatusPending, ""
		it.ClaimedAt, it.ClaimExpiresAt = time.Time{}, time.Time{}
	default:
		return it.conflict()
	}
	return nil
}

// answer closes the item as status by operator at now, claiming it first when pending.
func (it *Item) answer(status Status, operator string, now time.Time) error {
	if err := it.claim(operator, now, 0); err != nil {
		return err
	}
	it.Status, it.ResolvedAt, it.ClaimExpiresAt = status, now, time.Time{}
	return nil
}

func (it *Item) resolve(operator string, result json.RawMessage, now time.Time) error {
	compact, err := compactJSON(result)
	if err != nil {
		return err
	}
	if err := it.answer(StatusResolved, operator, now); err != nil {
		return err
	}
	it.Result = compact
	return nil
}

func (it *Item) reject(operator, reason string, now time.Time) error {
	if reason == "" {
		return fmt.Errorf("%w: a reason is required to reject", ErrInvalid)
	}
	if err := it.answer(StatusRejected, operator, now); err != nil {
		return err
	}
	it.Reason = reason
	return nil
}

func compactJSON(v json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if len(v) == 0 || json.Compact(&buf, v) != nil {
		return nil, fmt.Errorf("%w: the result is not valid JSON", ErrInvalid)
	}
	return buf.Bytes(), nil
}

// clone returns a deep copy of the item, so that a store's copy never aliases the caller's.
func (it *Item) clone() *Item {
	cp := *it
	cp.Input = bytes.Clone(it.Input)
	cp.Result = bytes.Clone(it.Result)
	if it.Attempts != nil {
		cp.Attempts = append([]afloat.Attempt(nil), it.Attempts...)
	}
	if it.PromptVersions != nil {
		cp.PromptVersions = append([]string(nil), it.PromptVersions...)
	}
	return &cp
}
