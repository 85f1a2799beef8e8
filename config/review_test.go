package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/review"
)

// TestBuildOpensTheReviewStore: Build opens the SQLite store beside the config file (or at
// review.sqlite.path) with the file's claim TTL, and Close closes it; Check never creates a
// database; a store the host gives is used as it is and left open.
func TestBuildOpensTheReviewStore(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		review  string
		path    string // relative to the config's folder
		claimed time.Duration
	}{
		{"default path", "", "afloat.db", 15 * time.Minute}, // claim_ttl defaults to 15m
		{"claim ttl 0 never lapses", "review: {claim_ttl: 0s}\n", "afloat.db", 0},
		{"path and claim ttl", "review: {sqlite: {path: data/queue.db}, claim_ttl: 15m, retention: 720h}\n", "data/queue.db", 15 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{
				"afloat.yaml": tc.review + minimal, "triage.json": triageSchema,
				"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
				"data/.keep": "",
			})
			if _, err := Check(filepath.Join(dir, "afloat.yaml")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, tc.path)); !os.IsNotExist(err) {
				t.Fatalf("check created %s (%v)", tc.path, err)
			}
			f, err := Load(filepath.Join(dir, "afloat.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			clk := clockwork.NewFakeClock()
			rt, err := f.Build(BuildOptions{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			s, ok := rt.Review.(*review.SQLite)
			if !ok || s.Path() != filepath.Join(dir, tc.path) {
				t.Fatalf("review store %T, want *review.SQLite at %s", rt.Review, tc.path)
			}
			id, err := s.Enqueue(ctx, &review.Item{Task: "triage", Tenant: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			it, err := s.Claim(ctx, id, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if got := it.ClaimExpiresAt; (tc.claimed == 0) != got.IsZero() || (tc.claimed > 0 && !got.Equal(clk.Now().Add(tc.claimed))) {
				t.Errorf("claim expires at %v, want claim_ttl %v from now", got, tc.claimed)
			}
			if err := rt.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Ping(ctx); err == nil {
				t.Fatal("the store still commits after Runtime.Close")
			}
			if err := rt.Close(); err != nil {
				t.Fatalf("second close: %v", err)
			}

			host := &closeCounter{Store: review.NewMemory(clk)}
			rt, err = f.Build(BuildOptions{Clock: clk, Review: host})
			if err != nil {
				t.Fatal(err)
			}
			if rt.Review != review.Store(host) {
				t.Fatalf("review store %T, want the host's", rt.Review)
			}
			if err := rt.Close(); err != nil || host.closed != 0 {
				t.Fatalf("close: %v, host's store closed %d times; want it left open", err, host.closed)
			}
		})
	}
}

type closeCounter struct {
	review.Store
	closed int
}

func (c *closeCounter) Close() error {
	c.closed++
	return nil
}
