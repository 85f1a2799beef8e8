package normalize

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// duplicateKey walks a valid JSON text and returns the detail of the first object that holds
// the same key twice ("at /customer: duplicate key 'name'"), or "". Decoding keeps only one
// of the two values (encoding/json the last, other readers the first), so readers of the text
// disagree on what it says: such an answer is refused, never settled by picking one. Keys are
// compared as encoding/json decodes them, so "a" and "\u0061" are the same key.
//
// It reads the text byte by byte rather than with a json.Decoder's tokens, which allocate for
// every one: it runs on every answer, the valid ones included. The text must be JSON (every
// caller has parsed it); on anything else the result means nothing.
func duplicateKey(text string) string {
	const maxScan = 16 // keys compared one by one; a larger object gets a set
	var buf [8]keyFrame
	stack := buf[:0]
	var kbuf [32]string
	keys := kbuf[:0] // the keys of the open objects, outermost first
	expectKey := false
	for i := 0; i < len(text); {
		switch text[i] {
		case '{':
			stack = append(stack, keyFrame{object: true, start: len(keys)})
			expectKey = true
			i++
		case '[':
			stack = append(stack, keyFrame{})
			i++
		case '}', ']':
			top := stack[len(stack)-1]
			if top.object {
				keys = keys[:top.start]
			}
			stack = stack[:len(stack)-1]
			i++
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				expectKey = true
			} else {
				top.index++
			}
			i++
		case '"':
			end := stringEnd(text, i+1)
			if end < 0 {
				return ""
			}
			if expectKey {
				expectKey = false
				top := &stack[len(stack)-1]
				key := decodeKey(text[i:end])
				dup := false
				if top.set != nil {
					_, dup = top.set[key]
					top.set[key] = struct{}{}
				} else {
					for _, k := range keys[top.start:] {
						if k == key {
							dup = true
							break
						}
					}
					keys = append(keys, key)
					if len(keys)-top.start > maxScan {
						top.set = make(map[string]struct{}, 2*maxScan)
						for _, k := range keys[top.start:] {
							top.set[k] = struct{}{}
						}
						keys = keys[:top.start]
					}
				}
				if dup {
					return "at " + location(stack[:len(stack)-1]) + ": duplicate key '" + key + "'"
				}
				top.key = key
			}
			i = end
		default:
			i++
		}
	}
	return ""
}

// decodeKey returns the key a quoted JSON string holds: itself, unquoted, unless it has an
// escape or bytes that are not UTF-8 (which encoding/json turns into U+FFFD).
func decodeKey(quoted string) string {
	raw := quoted[1 : len(quoted)-1]
	if !strings.Contains(raw, `\`) && utf8.ValidString(raw) {
		return raw
	}
	var s string
	if json.Unmarshal([]byte(quoted), &s) != nil {
		return raw
	}
	return s
}

// keyFrame is an open container of duplicateKey's walk: an object's current key and where its
// keys start in the walk's list (or its set, once it holds many), an array's current index.
type keyFrame struct {
	object bool
	start  int
	set    map[string]struct{}
	key    string
	index  int
}

// location writes the place of the container below frames as the validator's details do:
// "/" for the top, "/customer" or "/tags/1" below it.
func location(frames []keyFrame) string {
	if len(frames) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, f := range frames {
		b.WriteByte('/')
		if f.object {
			b.WriteString(f.key)
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
}
