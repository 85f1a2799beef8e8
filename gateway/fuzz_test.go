package gateway

import (
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
