// Package review is the human review queue of shared/DESIGN.md §7: where a critical task's
// call goes when no tier answered, so that an operator answers it instead of a guess.
//
// A Queue commits an item before Enqueue returns; the caller answers 202 only then:
//
//	q := review.NewMemory(nil)
//	id, err := q.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: in})
//	if err != nil { /* answer 503: never fail open */ }
//
// Memory keeps items in process (tests, demos); durable stores live beside it.
package review
