package normalize

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// refLadder is the schema of the attack: levels that each accept anything the next level
// accepts, through two $ref to it, down to a string. An answer that is no string fails every
// one of the 2^levels paths, and the library keeps each path's errors.
func refLadder(levels int) []byte {
	var b strings.Builder
	b.WriteString(`{"$ref": "#/$defs/l0", "$defs": {`)
	for i := range levels {
		fmt.Fprintf(&b, `"l%d": {"anyOf": [{"$ref": "#/$defs/l%d"}, {"$ref": "#/$defs/l%d"}]}, `, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"l%d": {"type": "string"}}}`, levels)
	return []byte(b.String())
}

// nestedItems is an array schema n arrays deep.
func nestedItems(n int) []byte {
	return []byte(strings.Repeat(`{"items": `, n) + `{"type": "string"}` + strings.Repeat(`}`, n))
}

func TestFromClientLimits(t *testing.T) {
	props := make([]string, MaxClientSubschemas)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d": {"type": "string"}`, i)
	}
	wide := `{"type": "object", "properties": {` + strings.Join(props, ", ") + `}}`
	manyRefs := make([]string, MaxClientRefs+1)
	for i := range manyRefs {
		manyRefs[i] = fmt.Sprintf(`"p%d": {"$ref": "#/$defs/s"}`, i)
	}
	tests := []struct {
		name   string
		schema string
		limit  string // "" when the schema is accepted
	}{
		{"ref ladder of 16 levels", string(refLadder(16)), "subschemas"},
		{"ref ladder of 26 levels", string(refLadder(26)), "subschemas"},
		{"ref ladder of 6 levels", string(refLadder(6)), ""},
		{"5000 nested items", string(nestedItems(5000)), "nesting"},
		{"33 nested items", string(nestedItems(MaxClientDepth + 1)), "depth"},
		{"32 nested items", string(nestedItems(MaxClientDepth)), ""},
		{"over the subschemas", wide, "subschemas"},
		{"over the refs", `{"$defs": {"s": {"type": "string"}}, "properties": {` + strings.Join(manyRefs, ", ") + `}}`, "refs"},
		{"over the size", `{"description": "` + strings.Repeat("x", MaxClientSize) + `"}`, "size"},
		{"dynamic ref", `{"$dynamicAnchor": "a", "items": {"$dynamicRef": "#a"}}`, "$dynamicRef"},
		{"a tree: one recursive ref", `{"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}`, ""},
		{"a linked list through $defs", `{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}}}`, ""},
		{"two recursive refs to one level", `{"anyOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}, {"type": "string"}]}`, "recursion"},
		{"a binary tree: left and right", `{"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "properties": {"v": {"type": "number"}, "left": {"$ref": "#/$defs/n"}, "right": {"$ref": "#/$defs/n"}}}}}`, ""},
		{"a recursive type used by two properties", `{"properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}}, "$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}}}`, ""},
		{"a named member and any member reach one value", `{"properties": {"x": {"$ref": "#"}}, "additionalProperties": {"$ref": "#"}, "patternProperties": {"^x$": {"$ref": "#"}}}`, "recursion"},
		{"items and contains reach one element", `{"type": "array", "items": {"$ref": "#"}, "contains": {"$ref": "#"}}`, "recursion"},
		{"a ref into a keyword it does not know", `{"x": {"anyOf": [` + strings.TrimSuffix(strings.Repeat(`{"type": "string"}, `, MaxClientSubschemas+1), ", ") + `]}, "$ref": "#/x"}`, "subschemas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := Compile("client", []byte(tt.schema), FromClient())
			if took := time.Since(start); took > time.Second {
				t.Errorf("compiling took %v", took)
			}
			var le *LimitError
			switch {
			case tt.limit == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.limit == "":
			case !errors.As(err, &le) || !errors.Is(err, ErrClientSchema):
				t.Fatalf("got %v, want a limit error on %s", err, tt.limit)
			case le.Limit != tt.limit:
				t.Fatalf("limit %q (%v), want %q", le.Limit, err, tt.limit)
			}
		})
	}
}

// TestFromClientOperatorSchemas checks that an operator's schema is not limited.
func TestFromClientOperatorSchemas(t *testing.T) {
	if _, err := Compile("task", nestedItems(MaxClientDepth+1)); err != nil {
		t.Fatal(err)
	}
}

// TestFromClientBoundsValidation validates a failing answer against the largest ref ladder a
// client may send and against the ladder of the attack compiled as an operator's, measuring
// both: the first must stay small, the second shows the limit matters.
func TestFromClientBoundsValidation(t *testing.T) {
	levels := 0
	for ; ; levels++ {
		if _, err := Compile("client", refLadder(levels+1), FromClient()); err != nil {
			break
		}
	}
	c, err := Compile("client", refLadder(levels), FromClient())
	if err != nil {
		t.Fatal(err)
	}
	took, heap := measure(func() { c.Normalize(`{"x": 1}`) })
	t.Logf("ladder of %d levels, the most a client may send: %v, %d KiB allocated", levels, took, heap>>10)
	if took > 100*time.Millisecond || heap > 50<<20 {
		t.Fatalf("validation took %v and %d MiB", took, heap>>20)
	}
	out := c.Normalize(`{"x": 1}`)
	if out.Err == nil || len(out.Err.Details) != MaxDetails {
		t.Fatalf("got %v, want %d details", out.Err, MaxDetails)
	}
}

// measure runs f once and returns its wall time and the bytes it allocated.
func measure(f func()) (time.Duration, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return took, after.TotalAlloc - before.TotalAlloc
}

// TestRefLadderUnlimited measures the attack as it was, against a schema compiled without
// FromClient. It is slow: run it with AFLOAT_ATTACK=1.
func TestRefLadderUnlimited(t *testing.T) {
	if os.Getenv("AFLOAT_ATTACK") != "1" {
		t.Skip("set AFLOAT_ATTACK=1 to measure the attack without limits")
	}
	for _, levels := range []int{10, 12, 14, 16} {
		c, err := Compile("operator", refLadder(levels))
		if err != nil {
			t.Fatal(err)
		}
		took, heap := measure(func() { c.Normalize(`{"x": 1}`) })
		t.Logf("ladder of %d levels without limits: %v, %d MiB allocated", levels, took, heap>>20)
	}
	start := time.Now()
	_, err := Compile("operator", nestedItems(5000))
	t.Logf("5000 nested items without limits: compiled in %v (%v)", time.Since(start), err)
}
