package flags

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
)

// Document is the whole flag document, as GET, PUT and PATCH /admin/flags carry it.
type Document struct {
	// Kill turns every task and route off.
	Kill bool `json:"kill"`
	// Tasks holds per-task flags by task or route name; a task absent here takes the zero
	// TaskFlags (on, no blocklist, full rollout).
	Tasks map[string]TaskFlags `json:"tasks"`
}

// TaskFlags are the flags of one task or route.
type TaskFlags struct {
	Kill bool `json:"kill"`
	// Blocklist names tenants for which the task is off.
	Blocklist []string `json:"blocklist"`
	// RolloutPct is the share of tenants (0–100, by a stable hash of the tenant id) for whom
	// the task is on; nil means 100.
	RolloutPct *int `json:"rollout_pct"`
}

// Rollout returns the rollout percentage in force.
func (f TaskFlags) Rollout() int {
	if f.RolloutPct == nil {
		return 100
	}
	return *f.RolloutPct
}

// Validate reports the first invalid value.
func (d *Document) Validate() error {
	for name, t := range d.Tasks {
		if p := t.Rollout(); p < 0 || p > 100 {
			return fmt.Errorf("tasks.%s.rollout_pct: %d is outside 0–100", name, p)
		}
	}
	return nil
}

// Allow reports whether the task is on for the tenant. An empty tenant is never blocklisted
// and falls in bucket 0 of the rollout.
func (d *Document) Allow(task, tenant string) bool {
	if d == nil {
		return true
	}
	if d.Kill {
		return false
	}
	t, ok := d.Tasks[task]
	if !ok {
		return true
	}
	if t.Kill {
		return false
	}
	if tenant != "" && slices.Contains(t.Blocklist, tenant) {
		return false
	}
	return Bucket(tenant) < t.Rollout()
}

// Bucket places a tenant id in 0–99 by a stable hash (FNV-1a), so that raising the rollout
// percentage only adds tenants.
func Bucket(tenant string) int {
	if tenant == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(tenant))
	return int(h.Sum32() % 100)
}

// Source serves the flag document in force. Implementations are safe for concurrent use.
type Source interface {
	// Flags returns the document in force. It must be cheap: it is read on every call. An
	// error means the flags could not be read; the caller treats the task as on and logs
	// the error. The returned document must not be modified.
	Flags(ctx context.Context) (*Document, error)
}

// Memory is a Source held in process. It is safe for concurrent use; a Set takes effect on
// the very next Flags.
type Memory struct {
	doc atomic.Pointer[Document]
}

// NewMemory returns a Memory with every flag off (every task on).
func NewMemory() *Memory {
	m := &Memory{}
	m.doc.Store(&Document{Tasks: map[string]TaskFlags{}})
	return m
}

// Flags returns the document in force; it never fails.
func (m *Memory) Flags(context.Context) (*Document, error) { return m.doc.Load(), nil }

// Set replaces the whole document. It keeps its own copy.
func (m *Memory) Set(_ context.Context, d *Document) error {
	if err := d.Validate(); err != nil {
		return err
	}
	m.doc.Store(d.Clone())
	return nil
}

// Clone returns a deep copy of d, with a non-nil Tasks.
func (d *Document) Clone() *Document {
	cp := &Document{Kill: d.Kill, Tasks: make(map[string]TaskFlags, len(d.Tasks))}
	for k, v := range d.Tasks {
		v.Blocklist = slices.Clone(v.Blocklist)
		if v.RolloutPct != nil {
			p := *v.RolloutPct
			v.RolloutPct = &p
		}
		cp.Tasks[k] = v
	}
	return cp
}
