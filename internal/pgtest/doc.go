// Package pgtest gives integration tests a PostgreSQL schema of their own, in the database
// of AFLOAT_POSTGRES_URL (which .ci/run sets), and a TCP proxy to cut a store off from it.
//
//	url := pgtest.Schema(t) // skips when AFLOAT_POSTGRES_URL is unset; fails under CI=true
//	s, err := review.OpenPostgres(ctx, url, review.Options{})
package pgtest
