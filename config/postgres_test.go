package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/internal/pgtest"
	"github.com/afloat-dev/afloat/review"
)

// TestBuildOpensThePostgresStore: review.store postgres makes Build open the PostgreSQL store
// at review.postgres.url with the file's claim TTL and max_pending, and Close closes it; Check
// never connects.
func TestBuildOpensThePostgresStore(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	config := fmt.Sprintf("review:\n  store: postgres\n  postgres: {url: %q, max_pending: 2}\n  claim_ttl: 10m\n", url) + minimal
	dir := writeTree(t, map[string]string{
		"afloat.yaml": config, "triage.json": triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	if _, err := Check(filepath.Join(dir, "afloat.yaml")); err != nil {
		t.Fatal(err)
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
	s, ok := rt.Review.(*review.Postgres)
	if !ok {
		t.Fatalf("review store %T, want *review.Postgres", rt.Review)
	}
	var ids []string
	for range 2 {
		id, err := s.Enqueue(ctx, &review.Item{Task: "triage", Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := s.Enqueue(ctx, &review.Item{Task: "triage", Tenant: "acme"}); !errors.Is(err, review.ErrFull) {
		t.Errorf("a third item with max_pending 2: %v, want ErrFull", err)
	}
	it, err := s.Claim(ctx, ids[0], "alice")
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(10 * time.Minute); !it.ClaimExpiresAt.Equal(want) {
		t.Errorf("claim expires at %v, want %v", it.ClaimExpiresAt, want)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("the store still commits after Runtime.Close")
	}
}

// TestPostgresSettings: a malformed review.postgres.url and a negative max_pending are errors
// at their line, and the url's password stays out of them; an unset ${VAR} in the url passes
// an offline check.
func TestPostgresSettings(t *testing.T) {
	tests := []struct {
		name, review, path, msg string
	}{
		{"malformed url", `{store: postgres, postgres: {url: "postgres://afloat:s3cret-pw@db:notaport/afloat"}}`, "review.postgres.url", "cannot parse"},
		{"negative max_pending", `{store: postgres, postgres: {url: "postgres://db/afloat", max_pending: -1}}`, "review.postgres.max_pending", "must not be negative"},
		{"no url", `{store: postgres}`, "review.postgres.url", "required with review.store postgres"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{
				"afloat.yaml": "review: " + tc.review + "\n" + minimal, "triage.json": triageSchema,
				"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
			})
			_, err := Check(filepath.Join(dir, "afloat.yaml"))
			if err == nil {
				t.Fatal("checked without error")
			}
			e := findError(asErrors(t, err), tc.path, tc.msg)
			if e == nil || e.Line != 1 {
				t.Fatalf("no error at %s line 1 saying %q; got:\n%v", tc.path, tc.msg, err)
			}
			if strings.Contains(err.Error(), "s3cret-pw") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	t.Run("unset variable offline", func(t *testing.T) {
		dir := writeTree(t, map[string]string{
			"afloat.yaml":             "review: {store: postgres, postgres: {url: \"postgres://afloat:${AFLOAT_TEST_PG_UNSET}@db:5432/afloat\"}}\n" + minimal,
			"triage.json":             triageSchema,
			"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
		})
		if _, placeholders, err := CheckOffline(filepath.Join(dir, "afloat.yaml")); err != nil || len(placeholders) != 1 {
			t.Fatalf("offline check: %v, placeholders %v", err, placeholders)
		}
	})
}
