package httpx

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestObjectArguments(t *testing.T) {
	tests := []struct {
		in, want, errHas string
	}{
		{in: `{"x":1}`, want: `{"x":1}`},
		{in: ` {"x":1} `, want: `{"x":1}`},
		{in: `"{\"x\":1}"`, want: `{"x":1}`},
		{in: ``, want: `{}`},
		{in: `null`, want: `{}`},
		{in: `"  "`, want: `{}`},
		{in: `[1]`, errHas: "not an object"},
		{in: `"[1]"`, errHas: "not an object"},
		{in: `{"x"`, errHas: "invalid json"},
		{in: `"{} x"`, errHas: "invalid json"},
		{in: `"unterminated`, errHas: "unexpected end"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ObjectArguments(json.RawMessage(tt.in))
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("ObjectArguments(%s) = %s, %v; want an error saying %q", tt.in, got, err, tt.errHas)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("ObjectArguments(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestAppendArguments(t *testing.T) {
	var dst []byte
	for _, frag := range []string{`"{\"x\":"`, `null`, ``, ` "1" `, `"}"`} {
		dst = AppendArguments(dst, json.RawMessage(frag))
	}
	if got := AppendArguments(dst, json.RawMessage(`{"y":2}`)); string(got) != `{"x":1}{"y":2}` {
		t.Errorf("fragments add up to %s", got)
	}
}
