package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// attackLadder is a client schema of levels that each accept what the next accepts, through
// two $ref to it, down to a string: an answer that is no string fails all 2^levels paths.
func attackLadder(levels int) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"$ref": "#/$defs/l0", "$defs": {`)
	for i := range levels {
		fmt.Fprintf(&b, `"l%d": {"anyOf": [{"$ref": "#/$defs/l%d"}, {"$ref": "#/$defs/l%d"}]}, `, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"l%d": {"type": "string"}}}`, levels)
	return json.RawMessage(b.String())
}

// TestServeSchemaAttacks sends, eight at once, chat requests whose client schemas made the
// gateway's work explode: a response format of 16 levels sharing subschemas through $ref
// (validating an answer took time and memory exponential in the levels), and a tool whose
// parameters nest 5,000 arrays (compiling took minutes). Each must be answered 400 naming its
// field, within 5s, with the gateway's heap (in this process) growing less than 100 MiB.
func TestServeSchemaAttacks(t *testing.T) {
	mock := newMock(t, func(int, chatCall) upstreamReply { return upstreamReply{content: `{"x": 1}`} })
	yaml := fmt.Sprintf("server:\n  admin_token: %s\nproviders:\n  mock: {type: openai, base_url: %q, model: mock}\n"+
		"routes:\n  chat:\n    criticality: assistance\n    budget: 60s\n    cascade: [mock]\n", scenarioAdmin, mock.URL+"/v1")
	g := startServe(t, yaml)
	g.client.Timeout = time.Minute

	messages := []any{map[string]any{"role": "user", "content": "answer"}}
	nested := strings.Repeat(`{"items": `, 5000) + `{"type": "string"}` + strings.Repeat(`}`, 5000)
	attacks := []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"16-level $ref ladder", map[string]any{"model": "chat", "messages": messages, "response_format": map[string]any{
			"type": "json_schema", "json_schema": map[string]any{"name": "ladder", "schema": attackLadder(16)}}},
			"response_format.json_schema.schema"},
		{"5000 nested items", map[string]any{"model": "chat", "messages": messages, "tools": []any{map[string]any{
			"type": "function", "function": map[string]any{"name": "f", "parameters": json.RawMessage(nested)}}}},
			"tools[0].parameters"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			body, err := json.Marshal(a.body)
			if err != nil {
				t.Fatal(err)
			}
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse
			peak := base
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() { // HeapInuse peaks while the requests run: sample it until they end
				defer close(sampled)
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for {
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			}()
			type result struct {
				status int
				body   []byte
				err    error
				took   time.Duration
			}
			results := make([]result, 8)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() {
					start := time.Now()
					status, b, err := g.do("POST", "/v1/chat/completions", "", string(body))
					results[i] = result{status, b, err, time.Since(start)}
				})
			}
			wg.Wait()
			close(stop)
			<-sampled
			for i, r := range results {
				switch {
				case r.err != nil:
					t.Errorf("request %d: %v", i, r.err)
				case r.status != http.StatusBadRequest || !strings.Contains(string(r.body), a.field):
					t.Errorf("request %d: status %d %s, want 400 naming %s", i, r.status, r.body, a.field)
				}
				if r.took > 5*time.Second {
					t.Errorf("request %d took %v", i, r.took)
				}
			}
			grew := int64(peak) - int64(base)
			t.Logf("8 requests: heap in use grew %d KiB at most", grew>>10)
			if grew > 100<<20 {
				t.Errorf("heap in use grew %d MiB", grew>>20)
			}
		})
	}
}
