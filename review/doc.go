// Package review is the human review queue of shared/DESIGN.md §7: where a critical task's
// call goes when no tier answered, so that an operator answers it instead of a guess.
//
// A Queue commits an item before Enqueue returns; the caller answers 202 only then. A Store
// is a Queue that operators work: list, claim, resolve (with an answer the caller validated
// against the task's schema) or reject (with a reason):
//
//	q, err := review.OpenSQLite(ctx, "afloat.db", review.Options{ClaimTTL: 15 * time.Minute})
//	id, err := q.Enqueue(ctx, &review.Item{Task: "moderation", Tenant: "acme", Input: in})
//	if err != nil { /* answer 503: never fail open */ }
//	it, err := q.Claim(ctx, id, "alice")            // *ConflictError if bob holds it
//	it, err = q.Resolve(ctx, id, "alice", answer)   // GET /v1/reviews/{id} now shows it
//
// SQLite is the durable default (WAL, synced commits, schema migrated at open); Postgres is
// the store a fleet of gateways shares (OpenPostgres, claims held across gateways); Memory
// keeps items in process for tests and demos. All apply the same state machine (state.go)
// and are safe for concurrent use.
//
// With Options.Outbox a store keeps each answer's webhook delivery (outbox.go), which
// package review/webhook works through DueDeliveries and RecordDelivery. SLAWatch counts the
// items that outlive their task's review SLA unanswered (sla.go).
package review
