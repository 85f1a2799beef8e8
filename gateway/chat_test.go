package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const chatBody = `{"model": "support-agent", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Где мой заказ?"}]}`

func TestChatCompletion(t *testing.T) {
	e := newEnv(t)
	e.primary.answer = "Ваш заказ в пути."
	status, hdr, body := e.do("POST", "/v1/chat/completions", clientKey, chatBody)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	if hdr.Get("X-Afloat-Source") != "model" || hdr.Get("X-Afloat-Provider") != "primary" || hdr.Get("X-Afloat-Degraded") != "false" {
		t.Fatalf("headers %v", hdr)
	}
	var c struct {
		Object  string
		Model   string
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	// The model is the upstream's that answered; the route is in its header.
	if hdr.Get("X-Afloat-Route") != "support-agent" {
		t.Fatalf("X-Afloat-Route %q", hdr.Get("X-Afloat-Route"))
	}
	if c.Object != "chat.completion" || c.Model != "m" || len(c.Choices) != 1 || c.Choices[0].Message.Content != "Ваш заказ в пути." || c.Choices[0].FinishReason != "stop" || c.Usage.TotalTokens != 19 {
		t.Fatalf("completion %s", body)
	}
	// The client's system message reached the primary unchanged.
	if !strings.Contains(string(e.primary.bodies[0]), `"Be brief."`) {
		t.Fatalf("upstream body %s", e.primary.bodies[0])
	}
}

func TestChatFallsBackWithTheBackupsOwnSystemPrompt(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	e.backup.answer = "backup here"
	status, hdr, body := e.do("POST", "/v1/chat/completions", clientKey, chatBody)
	if status != 200 || hdr.Get("X-Afloat-Provider") != "backup" || hdr.Get("X-Afloat-Degraded") != "true" {
		t.Fatalf("status %d headers %v %s", status, hdr, body)
	}
	var up struct {
		Messages []struct{ Role, Content string }
	}
	_ = json.Unmarshal(e.backup.bodies[0], &up)
	if up.Messages[0].Role != "system" || up.Messages[0].Content != "You are the backup support agent. Be brief." || len(up.Messages) != 2 {
		t.Fatalf("backup got messages %+v", up.Messages)
	}
}

func TestChatExhaustedIsOpenAIStyle503(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	e.backup.set("fail")
	status, hdr, body := e.do("POST", "/v1/chat/completions", clientKey, chatBody)
	if status != 503 || hdr.Get("Retry-After") == "" || hdr.Get("X-Afloat-Source") != "unavailable" {
		t.Fatalf("status %d headers %v", status, hdr)
	}
	var eb struct {
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Type != "afloat_unavailable" || eb.Error.Message == "" {
		t.Fatalf("body %s", body)
	}
}

func TestChatBadRequests(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, body string
		status     int
		param      string
	}{
		{"unknown route", `{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`, 404, "model"},
		{"no model", `{"messages": [{"role": "user", "content": "hi"}]}`, 400, "model"},
		{"no messages", `{"model": "support-agent", "messages": []}`, 400, "messages"},
		{"bad role", `{"model": "support-agent", "messages": [{"role": "wizard", "content": "hi"}]}`, 400, "messages[0].role"},
		{"image part", `{"model": "support-agent", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, 400, "messages[0].content"},
		{"n=2", `{"model": "support-agent", "n": 2, "messages": [{"role": "user", "content": "hi"}]}`, 400, "n"},
		{"named tool not in tools", `{"model": "support-agent", "messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "function", "function": {"name": "x"}}}`, 400, "tool_choice.function.name"},
		{"bad schema", `{"model": "support-agent", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 7}}}}`, 400, "response_format.json_schema.schema"},
		{"malformed", `{"model": `, 400, ""},
		{"temperature of the wrong type", `{"model": "support-agent", "temperature": "hot", "messages": [{"role": "user", "content": "hi"}]}`, 400, "temperature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := e.do("POST", "/v1/chat/completions", clientKey, tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			var eb struct {
				Error struct {
					Type    string
					Message string
					Param   *string
				}
			}
			if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Type != "invalid_request_error" {
				t.Fatalf("body %s", body)
			}
			if strings.Contains(eb.Error.Message, "Go ") || strings.Contains(eb.Error.Message, "chatRequest") {
				t.Errorf("message %q names Go types", eb.Error.Message)
			}
			if tt.param != "" && (eb.Error.Param == nil || *eb.Error.Param != tt.param) {
				t.Fatalf("param %v, want %q: %s", eb.Error.Param, tt.param, body)
			}
		})
	}
	// Ignored parameters do not break a call.
	if status, _, body := e.do("POST", "/v1/chat/completions", clientKey, `{"model": "support-agent", "top_p": 0.9, "seed": 3, "user": "u1", "messages": [{"role": "user", "content": "hi"}]}`); status != 200 {
		t.Fatalf("ignored params: %d %s", status, body)
	}
}

func TestChatJSONSchemaIsValidatedAndReasked(t *testing.T) {
	e := newEnv(t)
	e.primary.answer = "Sorry, I cannot produce JSON."
	e.backup.answer = "```json\n" + triageAnswer + "\n```"
	body := `{"model": "support-agent", "messages": [{"role": "user", "content": "triage this"}], "response_format": {"type": "json_schema", "json_schema": {"name": "triage", "schema": ` + triageSchema + `}}}`
	status, hdr, out := e.do("POST", "/v1/chat/completions", clientKey, body)
	if status != 200 || hdr.Get("X-Afloat-Provider") != "backup" {
		t.Fatalf("status %d provider %q: %s", status, hdr.Get("X-Afloat-Provider"), out)
	}
	if n := e.primary.calls.Load(); n != 2 {
		t.Fatalf("primary called %d times, want 2 (one re-ask)", n)
	}
	var c struct {
		Choices []struct{ Message struct{ Content string } }
	}
	_ = json.Unmarshal(out, &c)
	if c.Choices[0].Message.Content != triageAnswer {
		t.Fatalf("content %q, want the located JSON", c.Choices[0].Message.Content)
	}
}

// readSSE reads the data lines of an event stream.
func readSSE(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func postStream(t *testing.T, e *env, body string) (*http.Response, []string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp, readSSE(t, resp)
}

const streamBody = `{"model": "support-agent", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hi"}]}`

func TestChatStream(t *testing.T) {
	e := newEnv(t)
	e.primary.answer = "Hello there, friend"
	resp, events := postStream(t, e, streamBody)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Afloat-Provider") != "primary" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", events)
	}
	var text strings.Builder
	var finish string
	var usage int
	for _, ev := range events[:len(events)-1] {
		var c struct {
			Object  string
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				TotalTokens int `json:"total_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("event %s", ev)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = c.Usage.TotalTokens
		}
	}
	if text.String() != "Hello there, friend" || finish != "stop" || usage != 19 {
		t.Fatalf("text %q finish %q usage %d", text.String(), finish, usage)
	}
}

func TestChatStreamFallsBackBeforeTheFirstByte(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	e.backup.answer = "from the backup"
	resp, events := postStream(t, e, streamBody)
	if resp.StatusCode != 200 || resp.Header.Get("X-Afloat-Provider") != "backup" || resp.Header.Get("X-Afloat-Degraded") != "true" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	if events[len(events)-1] != "[DONE]" || streamedText(t, events) != "from the backup" {
		t.Fatalf("events %v", events)
	}
}

func TestChatStreamCutAfterTheFirstByteEndsWithAnError(t *testing.T) {
	e := newEnv(t)
	e.primary.set("cut")
	e.primary.answer = "a long answer that never ends"
	resp, events := postStream(t, e, streamBody)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	last := events[len(events)-1]
	if last == "[DONE]" || !strings.Contains(last, `"error"`) || !strings.Contains(last, "afloat_stream_error") {
		t.Fatalf("a cut stream ended %q; want an error event and no [DONE]: %v", last, events)
	}
	if e.backup.calls.Load() != 0 {
		t.Fatal("the backup answered after bytes reached the client")
	}
}

func TestChatStreamExhaustedBeforeAnyByteIs503(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	e.backup.set("fail")
	resp, _ := postStream(t, e, streamBody)
	if resp.StatusCode != 503 || resp.Header.Get("X-Afloat-Source") != "unavailable" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
}

// TestOpenAISDK points the official OpenAI Go SDK at the gateway.
func TestOpenAISDK(t *testing.T) {
	e := newEnv(t)
	e.primary.answer = "Привет от afloat"
	client := openai.NewClient(option.WithBaseURL(e.srv.URL+"/v1"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "support-agent",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("hi")},
	}
	c, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Привет от afloat" || c.Usage.TotalTokens != 19 {
		t.Fatalf("completion %+v", c)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "Привет от afloat" {
		t.Fatalf("streamed %q", got)
	}

	// A cut stream is an error for the SDK, never a clean finish.
	e.primary.set("cut")
	stream = client.Chat.Completions.NewStreaming(ctx, params)
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Fatal("the SDK took a cut stream for a whole answer")
	}

	// An exhausted route is a familiar API error.
	e.primary.set("fail")
	e.backup.set("fail")
	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errorsAs(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Type != "afloat_unavailable" {
		t.Fatalf("exhausted route: %v", err)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// streamedText joins the content deltas of a stream's events.
func streamedText(t *testing.T, events []string) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %s", ev)
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String()
}

// TestChatLogsFailedAttempts: a chat call that fell back logs its failed attempts, as a task
// call does.
func TestChatLogsFailedAttempts(t *testing.T) {
	e := newEnv(t)
	e.primary.set("fail")
	if status, _, body := e.do("POST", "/v1/chat/completions", clientKey, chatBody); status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `"msg":"attempt failed"`) || !strings.Contains(logs, `"provider":"primary"`) || !strings.Contains(logs, `"task":"support-agent"`) {
		t.Errorf("no failed attempt logged:\n%s", logs)
	}
}

// TestStatusNamesRoutesOnly: a route's first-token estimate shows under the route in
// /admin/status, so that every key of a provider's "tasks" is a task's or route's name.
func TestStatusNamesRoutesOnly(t *testing.T) {
	e := newEnv(t)
	if status, _, body := e.do("POST", "/v1/chat/completions", clientKey, streamBody); status != 200 {
		t.Fatalf("stream: %d %s", status, body)
	}
	type status struct {
		Providers map[string]struct {
			Tasks map[string]latencyState `json:"tasks"`
		} `json:"providers"`
	}
	doc := decode[status](t, must(e.do("GET", "/admin/status", adminToken, "")))
	tasks := doc.Providers["primary"].Tasks
	for name := range tasks {
		if strings.Contains(name, "/") {
			t.Errorf("key %q in primary's tasks: %v", name, tasks)
		}
	}
	route, ok := tasks["support-agent"]
	if !ok || route.ReadTimeoutMS == 0 || route.FirstToken == nil || route.FirstToken.ReadTimeoutMS == 0 {
		t.Errorf("support-agent: %+v (first token %+v); want both read timeouts", route, route.FirstToken)
	}
	if tr, ok := tasks["triage"]; !ok || tr.FirstToken != nil {
		t.Errorf("triage: %+v; want a task's estimate without first_token", tr)
	}
}
