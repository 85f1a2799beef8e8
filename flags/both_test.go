package flags_test

import (
	"context"
	"testing"

	"github.com/afloat-dev/afloat/flags"
)

func pct(n int) *int { return &n }

// TestBoth: a task is off when either source turns it off; blocklists add up; the smaller
// rollout wins; a change in either source shows on the next read.
func TestBoth(t *testing.T) {
	ctx := context.Background()
	admin, team := flags.NewMemory(), flags.NewMemory()
	src := flags.Both(admin, team)
	mustSet := func(m *flags.Memory, d *flags.Document) {
		t.Helper()
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	allow := func(task, tenant string) bool {
		t.Helper()
		d, err := src.Flags(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return d.Allow(task, tenant)
	}
	if !allow("triage", "acme") {
		t.Fatal("both empty: triage off")
	}
	mustSet(team, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}})
	if allow("triage", "acme") {
		t.Error("the team's flag system killed triage, and it is on")
	}
	mustSet(team, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Blocklist: []string{"b"}, RolloutPct: pct(100)}}})
	mustSet(admin, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Blocklist: []string{"a"}, RolloutPct: pct(0)}}})
	d, _ := src.Flags(ctx)
	if tf := d.Tasks["triage"]; len(tf.Blocklist) != 2 || tf.Rollout() != 0 {
		t.Errorf("merged %+v, want blocklist [a b] and rollout 0", tf)
	}
	mustSet(admin, &flags.Document{Kill: true})
	if allow("moderation", "") {
		t.Error("the admin's global kill did not apply")
	}
	if d1, _ := src.Flags(ctx); d1 != func() *flags.Document { d2, _ := src.Flags(ctx); return d2 }() {
		t.Error("an unchanged pair of documents was merged again")
	}
}
