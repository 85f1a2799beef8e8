package flags

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// MergePatch applies patch to target as JSON Merge Patch (RFC 7386) and returns the result:
// an object in patch merges into the object in target key by key, a null removes the key,
// any other value replaces what target holds. Both must be JSON; target may be empty (null).
// Numbers keep the digits they were written with.
func MergePatch(target, patch []byte) ([]byte, error) {
	p, err := decodeAny(patch)
	if err != nil {
		return nil, fmt.Errorf("merge patch: %w", err)
	}
	var t any
	if len(bytes.TrimSpace(target)) > 0 {
		if t, err = decodeAny(target); err != nil {
			return nil, fmt.Errorf("merge target: %w", err)
		}
	}
	return json.Marshal(mergeValue(t, p))
}

func mergeValue(target, patch any) any {
	po, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	to, ok := target.(map[string]any)
	if !ok {
		to = map[string]any{}
	}
	for k, v := range po {
		if v == nil {
			delete(to, k)
			continue
		}
		to[k] = mergeValue(to[k], v)
	}
	return to
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// Update replaces the document by what fn makes of the one in force, atomically: should
// another Set or Update land meanwhile, fn runs again on the newer document. fn must not
// modify its argument; its error is returned and changes nothing, and so does an invalid
// document. Update returns the document now in force.
func (m *Memory) Update(ctx context.Context, fn func(cur *Document) (*Document, error)) (*Document, error) {
	for {
		cur := m.doc.Load()
		next, err := fn(cur)
		if err != nil {
			return nil, err
		}
		if err := next.Validate(); err != nil {
			return nil, err
		}
		cp := next.Clone()
		if m.doc.CompareAndSwap(cur, cp) {
			return cp, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
