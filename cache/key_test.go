package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"
)

func TestKeyOfFieldSeparation(t *testing.T) {
	type fields struct {
		scope, tenant, input string
	}
	pairs := []struct{ a, b fields }{
		{fields{"a", "bc", "{}"}, fields{"ab", "c", "{}"}},
		{fields{"", "a", "{}"}, fields{"a", "", "{}"}},
		{fields{"t", "a", "b{}"}, fields{"t", "ab", "{}"}},
		{fields{"t\x00", "a", "{}"}, fields{"t", "\x00a", "{}"}},
		{fields{"t", "", "{}"}, fields{"t", "", "{} "}},
		{fields{"", "", ""}, fields{"", "", "\x00"}},
	}
	for _, p := range pairs {
		ka := KeyOf(p.a.scope, p.a.tenant, []byte(p.a.input))
		kb := KeyOf(p.b.scope, p.b.tenant, []byte(p.b.input))
		if ka == kb {
			t.Errorf("KeyOf%q == KeyOf%q", p.a, p.b)
		}
	}
}

// The layout is shared by a fleet through Redis; this pins it to the one KeyOf documents.
func TestKeyOfLayout(t *testing.T) {
	long := strings.Repeat("s", 150) // longer than KeyOf's buffer
	for _, f := range []struct{ scope, tenant, input string }{
		{"triage", "acme", `{"subject":"Refund"}`},
		{"", "", ""},
		{long, long + "t", `{}`},
	} {
		var b []byte
		b = binary.BigEndian.AppendUint64(b, uint64(len(f.scope)))
		b = append(b, f.scope...)
		b = binary.BigEndian.AppendUint64(b, uint64(len(f.tenant)))
		b = append(b, f.tenant...)
		b = append(b, f.input...)
		if got, want := KeyOf(f.scope, f.tenant, []byte(f.input)), Key(sha256.Sum256(b)); got != want {
			t.Errorf("KeyOf(%.20q, %.20q, %.20q) = %x, want %x", f.scope, f.tenant, f.input, got, want)
		}
	}
}

func TestKeyOfAllocates(t *testing.T) {
	scope, tenant := strings.Repeat("s", 100), strings.Repeat("t", 100)
	input := []byte(strings.Repeat("x", 200))
	if n := testing.AllocsPerRun(100, func() { KeyOf(scope, tenant, input) }); n != 0 {
		t.Errorf("KeyOf allocates %v times", n)
	}
}
