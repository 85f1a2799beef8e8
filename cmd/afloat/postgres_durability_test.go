package main

import (
	"testing"

	"github.com/afloat-dev/afloat/internal/pgtest"
)

// TestPostgresSurvivesKill9UnderLoad is TestReviewQueueSurvivesKill9UnderLoad over the
// PostgreSQL store: 32 clients queue review items through the HTTP API as fast as the gateway
// takes them; after two seconds the process is killed with SIGKILL in the middle of the load
// and started again on the same database. Every item a client got a 202 for is there,
// exactly once, and a retried call with its Idempotency-Key finds it instead of queueing
// twice.
func TestPostgresSurvivesKill9UnderLoad(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildAfloat(t, "builds and runs the afloat binary over PostgreSQL under load")
	survivesKill9UnderLoad(t, bin, writeConfig(t, postgresConfig(url), testFiles))
}
