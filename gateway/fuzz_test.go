package gateway

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range []string{
		chatBody,
		`{"model":"r","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"model":"r","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
		`{"model":"r","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"stream":true}`,
		`{"model":"r","n":2}`, `[]`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cr, req, err := decodeChatRequest(body)
		if err != nil {
			if _, ok := err.(*paramError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if cr.Model == "" || len(req.Messages) == 0 {
			t.Fatalf("accepted a request without model or messages: %s", body)
		}
		for _, m := range req.Messages {
			switch m.Role {
			case "system", "user", "assistant", "tool":
			default:
				t.Fatalf("role %q passed", m.Role)
			}
		}
	})
}

func FuzzDecodeTaskRequest(f *testing.F) {
	for _, s := range []string{ticketBody, `{"input":{},"budget_ms":5}`, `{"input":null}`, `{"input":{"a":[1,{"b":null}]}}`, `{}`, `1`, `{"input":{}} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeTaskRequest(body)
		if err != nil {
			return
		}
		if req.Input == nil {
			t.Fatalf("accepted a request without input: %s", body)
		}
		if req.BudgetMS != nil && *req.BudgetMS <= 0 {
			t.Fatalf("accepted budget %d", *req.BudgetMS)
		}
	})
}

// nested is a task call whose input nests depth arrays in its value a (the input itself and
// the body are two levels more).
func nested(depth int) string {
	return `{"input":{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`
}

// FuzzDecodeTaskRequestAsEncodingJSON holds decodeTaskRequest's fast parser to encoding/json:
// the same bodies accepted, the same values decoded (numbers as json.Number, invalid UTF-8 as
// U+FFFD, a repeated key's last value), the same error texts.
func FuzzDecodeTaskRequestAsEncodingJSON(f *testing.F) {
	for _, s := range []string{
		ticketBody, string(longTicket), `{"input":{},"budget_ms":5}`, `{"input":null}`, `{"input":{"a":[1,{"b":null}]}}`,
		`{}`, `1`, `{"input":{}} {}`, `{"input":{}} x`, `{"input":{}}   `, ``, ` `, `{"Input":{"a":1}}`, `{"INPUT":{"a":1},"Budget_MS":7}`,
		`{"input":{"a":1},"input":{"b":2}}`, `{"input":{"a":1,"a":2}}`, `{"input":{"n":12345678901234567890123,"f":-1.5e300,"z":-0}}`,
		`{"input":{"s":"\u00e9\ud83d\ude00\ud800x\u0000\"\\\/\b\f\n\r\t"}}`, "{\"input\":{\"s\":\"\xff\xfe bad \xc3\"}}",
		"{\"input\":{\"\xffk\":1}}", `{"input":{"a":tru}}`, `{"input":{"a":01}}`, `{"input":{"a":1.}}`, `{"input":{"a":"x}}`,
		`{"input":[]}`, `{"input":"x"}`, `{"budget_ms":1.5,"input":{}}`, `{"budget_ms":"5","input":{}}`, `{"budget_ms":-3,"input":{}}`,
		`{"budget_ms":99999999999999999999,"input":{}}`, `{"budget_ms":null,"input":{}}`, `{"other":1,"input":{}}`,
		`{"input":{"deep":[[[[[[{"a":[]}]]]]]]}}`, "\ufeff{\"input\":{}}", "{\"input\":{}}\n",
		`{"input":{"s":"a\"[[[[","t":"\\","u":[{"v":"]]}}"}]}}`, nested(fastMaxDepth - 2), nested(fastMaxDepth - 1), nested(10_001),
		`{"input":{"a":` + strings.Repeat("[", 20_000) + `}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotErr := decodeTaskRequest(body)
		var want taskRequest
		wantErr := decodeTaskRequestStd(body, &want)
		// The fast parser on its own, whatever the body's size (decodeTaskRequest gives it
		// only bodies of fastMin bytes or more): what it takes, encoding/json takes the same.
		var fast taskRequest
		if fastDecode(body, &fast) && (wantErr != nil || !reflect.DeepEqual(fast, want)) {
			t.Fatalf("body %q: the fast parser decoded %#v, encoding/json %#v (%v)", body, fast, want, wantErr)
		}
		if wantErr == nil && want.Input == nil {
			wantErr = errors.New(`"input" is required and must be an object`)
		}
		if wantErr == nil && want.BudgetMS != nil && (*want.BudgetMS <= 0 || *want.BudgetMS > maxBudgetMS) {
			wantErr = errors.New("budget")
		}
		switch {
		case (gotErr == nil) != (wantErr == nil):
			t.Fatalf("body %q: error %v, encoding/json's %v", body, gotErr, wantErr)
		case gotErr != nil && wantErr.Error() != "budget" && gotErr.Error() != wantErr.Error():
			t.Fatalf("body %q: error %q, encoding/json's %q", body, gotErr, wantErr)
		case gotErr == nil && !reflect.DeepEqual(got.Input, want.Input):
			t.Fatalf("body %q: input %#v, encoding/json's %#v", body, got.Input, want.Input)
		case gotErr == nil && !reflect.DeepEqual(got.BudgetMS, want.BudgetMS):
			t.Fatalf("body %q: budget %v, encoding/json's %v", body, got.BudgetMS, want.BudgetMS)
		}
	})
}
