package flags

import (
	"context"
	"fmt"
	"testing"
)

func pct(p int) *int { return &p }

func TestAllow(t *testing.T) {
	tests := []struct {
		name   string
		doc    *Document
		task   string
		tenant string
		want   bool
	}{
		{"nil document", nil, "triage", "acme", true},
		{"empty document", &Document{}, "triage", "acme", true},
		{"global kill", &Document{Kill: true}, "triage", "acme", false},
		{"task kill", &Document{Tasks: map[string]TaskFlags{"triage": {Kill: true}}}, "triage", "acme", false},
		{"other task killed", &Document{Tasks: map[string]TaskFlags{"moderation": {Kill: true}}}, "triage", "acme", true},
		{"blocklisted tenant", &Document{Tasks: map[string]TaskFlags{"triage": {Blocklist: []string{"acme"}}}}, "triage", "acme", false},
		{"other tenant", &Document{Tasks: map[string]TaskFlags{"triage": {Blocklist: []string{"acme"}}}}, "triage", "globex", true},
		{"rollout 0", &Document{Tasks: map[string]TaskFlags{"triage": {RolloutPct: pct(0)}}}, "triage", "acme", false},
		{"rollout 100", &Document{Tasks: map[string]TaskFlags{"triage": {RolloutPct: pct(100)}}}, "triage", "acme", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.doc.Allow(tt.task, tt.tenant); got != tt.want {
				t.Fatalf("Allow = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRolloutIsStableAndMonotonic(t *testing.T) {
	on := func(p int) map[string]bool {
		d := &Document{Tasks: map[string]TaskFlags{"t": {RolloutPct: pct(p)}}}
		m := map[string]bool{}
		for i := range 1000 {
			id := fmt.Sprintf("tenant-%d", i)
			if d.Allow("t", id) {
				m[id] = true
			}
		}
		return m
	}
	at30, at60 := on(30), on(60)
	for id := range at30 {
		if !at60[id] {
			t.Fatalf("%s is on at 30%% but off at 60%%", id)
		}
	}
	if n := len(at30); n < 240 || n > 360 {
		t.Fatalf("30%% rollout turned on %d of 1000 tenants", n)
	}
	if Bucket("acme") != Bucket("acme") {
		t.Fatal("bucket is not stable")
	}
}

func TestMemorySetCopiesAndValidates(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	doc := &Document{Tasks: map[string]TaskFlags{"triage": {Blocklist: []string{"acme"}}}}
	if err := m.Set(ctx, doc); err != nil {
		t.Fatal(err)
	}
	doc.Tasks["triage"].Blocklist[0] = "globex"
	got, _ := m.Flags(ctx)
	if got.Allow("triage", "acme") {
		t.Fatal("a change to the caller's document leaked into the flags in force")
	}
	if err := m.Set(ctx, &Document{Tasks: map[string]TaskFlags{"triage": {RolloutPct: pct(101)}}}); err == nil {
		t.Fatal("rollout 101 accepted")
	}
}
