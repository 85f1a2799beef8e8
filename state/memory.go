package state

import (
	"context"
	"maps"
	"sync"

	"github.com/afloat-dev/afloat/flags"
)

// Memory is a Store in process: nothing survives the process. It is what a host that
// builds a runtime for itself (tests, the demo) gets. It never fails; it is safe for
// concurrent use.
type Memory struct {
	mu       sync.Mutex
	doc      *flags.Document
	version  uint64
	faults   map[string]Fault
	drills   map[string]Drills
	canaries map[string]Canary
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{faults: map[string]Fault{}, drills: map[string]Drills{}, canaries: map[string]Canary{}}
}

// LoadFlags implements Store.
func (m *Memory) LoadFlags(context.Context) (*flags.Document, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.doc, m.version, nil
}

// SwapFlags implements Store. It keeps doc itself: the caller must not modify it.
func (m *Memory) SwapFlags(_ context.Context, version uint64, doc *flags.Document) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version != version {
		return false, nil
	}
	m.doc, m.version = doc, version+1
	return true, nil
}

// LoadFaults implements Store.
func (m *Memory) LoadFaults(context.Context) (map[string]Fault, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Fault, len(m.faults))
	for k, v := range m.faults {
		out[k] = v
	}
	return out, nil
}

// SaveFault implements Store.
func (m *Memory) SaveFault(_ context.Context, provider string, f Fault) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.Fault.Mode == "" {
		delete(m.faults, provider)
		return nil
	}
	m.faults[provider] = f
	return nil
}

// SaveDrill implements Store.
func (m *Memory) SaveDrill(_ context.Context, d Drill) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drills[d.Scope] = m.drills[d.Scope].Add(d)
	return nil
}

// LoadDrills implements Store.
func (m *Memory) LoadDrills(context.Context) (map[string]Drills, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.drills), nil
}

// SaveCanary implements Store.
func (m *Memory) SaveCanary(_ context.Context, c Canary) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if kept, ok := m.canaries[c.Task]; ok && kept.Fingerprint == c.Fingerprint {
		return nil // the first decision of a canary stands
	}
	m.canaries[c.Task] = c
	return nil
}

// LoadCanaries implements Store.
func (m *Memory) LoadCanaries(context.Context) (map[string]Canary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.canaries), nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }
