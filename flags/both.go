package flags

import (
	"context"
	"slices"
	"sync/atomic"
)

// Both is a Source that turns a task off when either of two sources does: the flags of the
// state backend (the admin API's) and those of a team's flag system (OpenFeature). A global
// or task kill in either kills; the blocklists add up; the smaller rollout wins. The merged
// document is made once per pair of documents the two serve, so that Flags stays cheap.
func Both(a, b Source) Source { return &both{a: a, b: b} }

type both struct {
	a, b Source
	last atomic.Pointer[merged]
}

type merged struct {
	a, b, doc *Document
}

// Flags implements Source: an error of either source is the error.
func (s *both) Flags(ctx context.Context) (*Document, error) {
	da, err := s.a.Flags(ctx)
	if err != nil {
		return nil, err
	}
	db, err := s.b.Flags(ctx)
	if err != nil {
		return nil, err
	}
	if m := s.last.Load(); m != nil && m.a == da && m.b == db {
		return m.doc, nil
	}
	doc := merge2(da, db)
	s.last.Store(&merged{a: da, b: db, doc: doc})
	return doc, nil
}

// merge2 returns the document that is off wherever a or b is.
func merge2(a, b *Document) *Document {
	if a == nil {
		a = &Document{}
	}
	if b == nil {
		b = &Document{}
	}
	out := &Document{Kill: a.Kill || b.Kill, Tasks: make(map[string]TaskFlags, len(a.Tasks)+len(b.Tasks))}
	for name, ta := range a.Tasks {
		out.Tasks[name] = ta
	}
	for name, tb := range b.Tasks {
		ta, ok := out.Tasks[name]
		if !ok {
			out.Tasks[name] = tb
			continue
		}
		t := TaskFlags{Kill: ta.Kill || tb.Kill, Blocklist: slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(ta.Blocklist), tb.Blocklist...))))}
		pct := min(ta.Rollout(), tb.Rollout())
		t.RolloutPct = &pct
		out.Tasks[name] = t
	}
	return out
}
