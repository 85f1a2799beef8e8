package flags

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
)

// TestMergePatch runs the examples of RFC 7386, appendix A.
func TestMergePatch(t *testing.T) {
	tests := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{``, `{"n":1.50}`, `{"n":1.50}`},
	}
	for _, tt := range tests {
		got, err := MergePatch([]byte(tt.target), []byte(tt.patch))
		if err != nil {
			t.Fatalf("%s + %s: %v", tt.target, tt.patch, err)
		}
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal([]byte(tt.want), &w)
		if !reflect.DeepEqual(g, w) || (tt.target == "" && string(got) != tt.want) {
			t.Errorf("%s + %s = %s, want %s", tt.target, tt.patch, got, tt.want)
		}
	}
	for _, bad := range [][2]string{{`{}`, `{"a":`}, {`{`, `{}`}, {`{}`, `{} {}`}} {
		if _, err := MergePatch([]byte(bad[0]), []byte(bad[1])); err == nil {
			t.Errorf("%s + %s: no error", bad[0], bad[1])
		}
	}
}

// TestMemoryUpdate: concurrent Updates all land; fn's error and an invalid document change
// nothing.
func TestMemoryUpdate(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Update(ctx, func(cur *Document) (*Document, error) {
				next := cur.Clone()
				next.Tasks[string(rune('a'+i%26))+string(rune('a'+i/26))] = TaskFlags{Kill: true}
				return next, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if d, _ := m.Flags(ctx); len(d.Tasks) != 50 {
		t.Fatalf("%d tasks after 50 updates, want 50", len(d.Tasks))
	}
	boom := errors.New("boom")
	if _, err := m.Update(ctx, func(*Document) (*Document, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	bad := 101
	if _, err := m.Update(ctx, func(*Document) (*Document, error) {
		return &Document{Kill: true, Tasks: map[string]TaskFlags{"x": {RolloutPct: &bad}}}, nil
	}); err == nil {
		t.Fatal("an invalid document was stored")
	}
	if d, _ := m.Flags(ctx); d.Kill || len(d.Tasks) != 50 {
		t.Fatalf("a refused update changed the document: %+v", d)
	}
}
