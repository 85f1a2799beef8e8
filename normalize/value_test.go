package normalize

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestValidateValueAsValidate: a value is refused or passed, with the same details, as its
// JSON encoding is by Validate; JSON's own types are checked as they are, others encoded.
func TestValidateValueAsValidate(t *testing.T) {
	c, err := Compile("input", []byte(`{"type":"object","required":["body"],"properties":{
		"body":{"type":"string","maxLength":12},
		"price":{"type":"number","multipleOf":0.1},
		"count":{"type":"integer","minimum":1},
		"tags":{"type":"array","items":{"type":"string"}},
		"meta":{"type":"object","properties":{"score":{"type":"number","maximum":1}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	type custom struct {
		Body string `json:"body"`
	}
	values := []any{
		map[string]any{"body": "short"},
		map[string]any{"body": "far longer than twelve"},
		map[string]any{"price": 0.3},                     // missing body
		map[string]any{"body": "x", "price": 0.3},        // a multiple of 0.1 as written
		map[string]any{"body": "x", "price": 0.35},       // not one
		map[string]any{"body": "x", "count": float64(2)}, // an integer held as a float
		map[string]any{"body": "x", "count": 2.5},        // not an integer
		map[string]any{"body": "x", "count": 1e21},       // an integer too, in exponent form
		map[string]any{"body": "x", "count": json.Number("3")},
		map[string]any{"body": "x", "tags": []any{"a", 1.5}},
		map[string]any{"body": "x", "meta": map[string]any{"score": 1.5}},
		map[string]any{"body": "x", "meta": map[string]any{"score": 0.5}, "tags": []any{"a"}},
		map[string]any{"body": "x", "tags": []string{"a", "b"}}, // Go types: encoded first
		map[string]any{"body": "x", "count": 0},
		custom{Body: "also far too long"},
		map[string]any{"body": nil},
		map[string]any{"body": true},
	}
	for _, v := range values {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want, got := c.Validate(b), c.ValidateValue(v)
			if (want == nil) != (got == nil) || want != nil && want.Error() != got.Error() {
				t.Fatalf("ValidateValue: %v; Validate of its encoding: %v", got, want)
			}
		})
	}
	// NaN cannot be encoded: refused either way, as json.Marshal refuses it.
	if err := c.ValidateValue(map[string]any{"body": "x", "price": math.NaN()}); err == nil {
		t.Error("NaN passed")
	}
}

// TestValidateValueLeavesTheValue: the caller's maps and slices are as they were.
func TestValidateValueLeavesTheValue(t *testing.T) {
	c, err := Compile("input", []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"a": 0.5, "b": []any{1.5, "x"}, "c": map[string]any{"d": 2.0}}
	was := map[string]any{"a": 0.5, "b": []any{1.5, "x"}, "c": map[string]any{"d": 2.0}}
	if err := c.ValidateValue(in); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, was) {
		t.Fatalf("the value became %v", in)
	}
}

// BenchmarkValidateInput is a task's input check of an 8 KiB ticket: the value as it is
// (ValidateValue) against its encoding decoded again (Validate of json.Marshal, as before).
func BenchmarkValidateInput(b *testing.B) {
	c, err := Compile("input", []byte(`{"type":"object","required":["subject","body"],"properties":{
		"subject":{"type":"string"},"body":{"type":"string","maxLength":20000}}}`))
	if err != nil {
		b.Fatal(err)
	}
	in := map[string]any{"subject": "the site is down", "body": strings.Repeat("Клиент пишет: сайт не открывается. ", 150)}
	b.Run("value", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.ValidateValue(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			doc, err := json.Marshal(in)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Validate(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
