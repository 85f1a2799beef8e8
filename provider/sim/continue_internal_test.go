package sim

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCloseJSONEveryPrefix: every prefix of a valid document (cut at a rune, as a stream is)
// is completed into a valid document, and a whole one gets nothing added.
func TestCloseJSONEveryPrefix(t *testing.T) {
	docs := []string{
		`{"department":"billing","is_urgent":true,"score":-1.5e+3,"tags":["a","b\"c"],"note":null}`,
		`[{"a":{"b":[1,2,{"c":false}]}},"\u0416\n",[],{}]`,
		`{"summary":"Не работает оплата","steps":[{"n":1,"text":"проверить карту"}],"empty":""}`,
		` { "spaced" : [ 1 , 2 ] , "x" : { } } `,
	}
	r := rand.New(rand.NewPCG(1, 2))
	root, err := parseSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"object",
		"properties":{"s":{"type":"string"},"n":{"type":"number"},"b":{"type":"boolean"}},"required":["s","n","b"]}},"z":{"type":"null"}},
		"required":["a","z"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b, err := generate(root, r)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, doc := range docs {
		for i := 1; i <= len(doc); i++ {
			if i < len(doc) && !utf8.RuneStart(doc[i]) {
				continue
			}
			prefix := doc[:i]
			if strings.TrimSpace(prefix) == "" {
				continue // not yet a document
			}
			end := closeJSON(strings.TrimLeft(prefix, " "))
			if !json.Valid([]byte(prefix + end)) {
				t.Fatalf("%q + %q is not valid JSON", prefix, end)
			}
		}
		if end := closeJSON(strings.TrimLeft(doc, " ")); end != "" {
			t.Errorf("whole document %q got %q added", doc, end)
		}
	}
}
