package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
)

// chatRequest is the part of OpenAI's chat completion request that afloat reads. Fields it
// does not know are ignored; the unsupported ones of unsupportedParams are refused.
type chatRequest struct {
	Model               string              `json:"model"`
	Messages            []chatMessage       `json:"messages"`
	Tools               []chatTool          `json:"tools"`
	ToolChoice          json.RawMessage     `json:"tool_choice"`
	ResponseFormat      *chatResponseFormat `json:"response_format"`
	MaxTokens           *int                `json:"max_tokens"`
	MaxCompletionTokens *int                `json:"max_completion_tokens"`
	Temperature         *float64            `json:"temperature"`
	Stream              bool                `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N          *int            `json:"n"`
	Logprobs   *bool           `json:"logprobs"`
	Functions  json.RawMessage `json:"functions"`
	Modalities []string        `json:"modalities"`
	Audio      json.RawMessage `json:"audio"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type chatResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// paramError is a request afloat cannot serve, naming the parameter.
type paramError struct {
	param string
	msg   string
}

func (e *paramError) Error() string { return e.msg }

func badParam(param, format string, args ...any) error {
	return &paramError{param: param, msg: fmt.Sprintf(format, args...)}
}

// decodeOne decodes the one JSON value of a front door's body into v (unknown fields
// ignored, as the vendors' APIs ignore them), or returns the paramError that says why not.
func decodeOne(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badParam(te.Field, "%s", typeErrorText(te))
		}
		return badParam("", "invalid JSON: %v", err)
	}
	if dec.More() {
		return badParam("", "invalid JSON: more than one value in the body")
	}
	return nil
}

// decodeChatRequest reads and checks an OpenAI chat completion request and turns it into
// afloat's canonical form. Ignored parameters: top_p, frequency_penalty, presence_penalty,
// seed, stop, user, metadata, store, service_tier, logit_bias, parallel_tool_calls and any
// unknown field. Refused: n > 1, logprobs, functions (use tools), modalities other than
// text, audio, and content parts other than text.
func decodeChatRequest(body []byte) (*chatRequest, *afloat.Request, error) {
	var cr chatRequest
	if err := decodeOne(body, &cr); err != nil {
		return nil, nil, err
	}
	switch {
	case cr.Model == "":
		return nil, nil, badParam("model", "model is required: it names an afloat route or an alias of one")
	case len(cr.Messages) == 0:
		return nil, nil, badParam("messages", "messages must hold at least one message")
	case cr.N != nil && *cr.N != 1:
		return nil, nil, badParam("n", "n must be 1: afloat returns one choice")
	case cr.Logprobs != nil && *cr.Logprobs:
		return nil, nil, badParam("logprobs", "logprobs are not supported")
	case len(cr.Functions) > 0 && string(cr.Functions) != "null":
		return nil, nil, badParam("functions", "functions are not supported: use tools")
	case len(cr.Audio) > 0 && string(cr.Audio) != "null":
		return nil, nil, badParam("audio", "audio output is not supported")
	}
	for _, m := range cr.Modalities {
		if m != "text" {
			return nil, nil, badParam("modalities", "modality %q is not supported: only text", m)
		}
	}
	req := &afloat.Request{}
	for i, m := range cr.Messages {
		msg, err := canonicalMessage(i, m)
		if err != nil {
			return nil, nil, err
		}
		req.Messages = append(req.Messages, msg)
	}
	tools := map[string]bool{}
	for i, t := range cr.Tools {
		if t.Type != "function" {
			return nil, nil, badParam(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported: only function", t.Type)
		}
		if t.Function.Name == "" {
			return nil, nil, badParam(fmt.Sprintf("tools[%d].function.name", i), "a tool needs a name")
		}
		params := t.Function.Parameters
		if len(params) > 0 && !json.Valid(params) {
			return nil, nil, badParam(fmt.Sprintf("tools[%d].function.parameters", i), "parameters must be a JSON Schema object")
		}
		tools[t.Function.Name] = true
		req.Tools = append(req.Tools, afloat.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
	}
	if len(cr.ToolChoice) > 0 && string(cr.ToolChoice) != "null" {
		tc, err := toolChoice(cr.ToolChoice, tools)
		if err != nil {
			return nil, nil, err
		}
		req.ToolChoice = tc
	}
	if rf := cr.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			req.ResponseFormat = &afloat.ResponseFormat{Type: "json_object"}
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || string(rf.JSONSchema.Schema) == "null" {
				return nil, nil, badParam("response_format.json_schema.schema", "a json_schema response format needs a schema")
			}
			name := rf.JSONSchema.Name
			if name == "" {
				name = "result"
			}
			req.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Name: name, Schema: rf.JSONSchema.Schema,
				Strict: rf.JSONSchema.Strict != nil && *rf.JSONSchema.Strict}
		default:
			return nil, nil, badParam("response_format.type", "response format %q is not supported: text, json_object or json_schema", rf.Type)
		}
	}
	switch {
	case cr.MaxCompletionTokens != nil:
		req.MaxTokens, req.MaxTokensParam = *cr.MaxCompletionTokens, "max_completion_tokens"
	case cr.MaxTokens != nil:
		req.MaxTokens, req.MaxTokensParam = *cr.MaxTokens, "max_tokens"
	}
	if req.MaxTokens < 0 {
		return nil, nil, badParam(req.MaxTokensParam, "%s must not be negative", req.MaxTokensParam)
	}
	if t := cr.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, nil, badParam("temperature", "temperature must be between 0 and 2")
		}
		req.Temperature = t
	}
	return &cr, req, nil
}

func canonicalMessage(i int, m chatMessage) (afloat.Message, error) {
	param := func(field string) string { return fmt.Sprintf("messages[%d].%s", i, field) } // only on an error
	role := m.Role
	switch role {
	case "developer":
		role = afloat.RoleSystem
	case afloat.RoleSystem, afloat.RoleUser, afloat.RoleAssistant, afloat.RoleTool:
	default:
		return afloat.Message{}, badParam(param("role"), "role %q is not supported", m.Role)
	}
	text, err := messageText(m.Content)
	if err != nil {
		return afloat.Message{}, badParam(param("content"), "%v", err)
	}
	msg := afloat.Message{Role: role, Content: text, ToolCallID: m.ToolCallID, Name: m.Name}
	if role == afloat.RoleTool && m.ToolCallID == "" {
		return afloat.Message{}, badParam(param("tool_call_id"), "a tool message needs tool_call_id")
	}
	for j, tc := range m.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) {
			return afloat.Message{}, badParam(param(fmt.Sprintf("tool_calls[%d].function.arguments", j)), "arguments must be a JSON string")
		}
		msg.ToolCalls = append(msg.ToolCalls, afloat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return msg, nil
}

// messageText reads a message's content: a string, null, or an array of text parts.
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part %q is not supported: only text", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func toolChoice(raw json.RawMessage, tools map[string]bool) (*afloat.ToolChoice, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "none", "auto", "required":
			if s != "none" && len(tools) == 0 {
				return nil, badParam("tool_choice", "tool_choice %q needs tools", s)
			}
			return &afloat.ToolChoice{Mode: s}, nil
		}
		return nil, badParam("tool_choice", "tool_choice %q: want none, auto, required or a function", s)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" {
		return nil, badParam("tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}")
	}
	if !tools[obj.Function.Name] {
		return nil, badParam("tool_choice.function.name", "tool_choice names %q, which is not among the tools", obj.Function.Name)
	}
	return &afloat.ToolChoice{Mode: "tool", Name: obj.Function.Name}, nil
}

func (g *Gateway) chat(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSON(w, r)
	if !ok {
		return
	}
	cr, req, err := decodeChatRequest(body)
	if err != nil {
		var pe *paramError
		errors.As(err, &pe)
		writeChatError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error(), pe.param)
		return
	}
	name, route, ok := g.served().route(cr.Model)
	if !ok {
		writeChatError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("no route %q: the model field names an afloat route or an alias of one", cr.Model), "model")
		return
	}
	w.Header().Set("X-Afloat-Route", name)
	if cr.Stream {
		g.chatStream(w, r, cr, req, name, route)
		return
	}
	rep, err := route.Complete(r.Context(), req)
	noteReply(r.Context(), route.Name(), rep)
	if rep != nil && rep.Degraded {
		g.logDegraded(r, route.Name(), rep.Attempts)
	}
	if g.chatFailed(w, r, rep, err) {
		return
	}
	setAfloatHeaders(w.Header(), rep.Source, rep.Provider, rep.Degraded)
	setCachedAt(w.Header(), rep)
	setCost(w.Header(), rep.Response.Usage)
	writeJSON(w, http.StatusOK, chatCompletion(name, rep, g.clock.Now()))
}

// answerModel is the model to report: the upstream model that answered, or the route's name
// when the provider did not say.
func answerModel(upstream, route string) string {
	if upstream != "" {
		return upstream
	}
	return route
}

// chatFailed answers a route call that produced no answer and reports whether it did.
func (g *Gateway) chatFailed(w http.ResponseWriter, r *http.Request, rep *cascade.Reply, err error) bool {
	if err == nil {
		return false // before the targets of errors.As below, which escape
	}
	var re *cascade.RequestError
	var refused *cascade.RefusalError
	switch {
	case errors.As(err, &re):
		writeChatError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", re.Error(), re.Field)
	case errors.As(err, &refused):
		// The provider declined the content: the client gets its reason, as from the
		// provider itself, and no retry will change it.
		setAfloatHeaders(w.Header(), afloat.SourceUnavailable, refused.Provider, true)
		w.Header().Set("X-Should-Retry", "false")
		code := refused.Code
		if code == "" {
			code = "content_policy_violation"
		}
		writeChatError(w, http.StatusBadRequest, "invalid_request_error", code, refused.Reason, "")
	case errors.Is(err, cascade.ErrExhausted):
		reason := ""
		if rep != nil {
			reason = string(rep.Reason)
		}
		setAfloatHeaders(w.Header(), afloat.SourceUnavailable, "", true)
		setRetryAfter(w, g.retryAfter(r.Context(), rep))
		// OpenAI's SDKs retry a 503 twice, waiting out Retry-After each time: a client would
		// hang for a minute before it sees that the feature is off. This header stops that.
		w.Header().Set("X-Should-Retry", "false")
		writeChatError(w, http.StatusServiceUnavailable, "afloat_unavailable", "afloat_unavailable",
			fmt.Sprintf("no model of this route could answer (reason %s); retry later", reason), "")
	case r.Context().Err() != nil:
		// The client left.
	default:
		g.log.ErrorContext(r.Context(), "route failed", "err", err)
		writeChatError(w, http.StatusInternalServerError, "server_error", "internal", "the route failed", "")
	}
	return true
}

// maxRetryAfter is the longest Retry-After of an exhausted route, and the one it gives when
// no breaker of the route is open (its providers failed but may answer the next call).
const maxRetryAfter = 30 * time.Second

// retryAfter is how long a client should wait before it calls an exhausted route again:
// until the first breaker among the providers the call tried may admit a probe, between 1 s
// and maxRetryAfter. The Reply's attempts name those providers, breakers that were open
// included (their attempts are the skips). An upstream's own Retry-After counts only through
// its breaker, whose open period a throttled answer lengthens to the hint; a hint shorter
// than the period is not in the Reply.
func (g *Gateway) retryAfter(ctx context.Context, rep *cascade.Reply) time.Duration {
	wait := maxRetryAfter
	switch {
	case rep == nil:
		return wait
	case rep.Reason == afloat.ReasonShed:
		return time.Second // afloat's own overload: it passes as soon as the burst does
	}
	now := g.clock.Now()
	seen := map[string]bool{}
	for _, a := range rep.Attempts {
		if seen[a.Provider] {
			continue
		}
		seen[a.Provider] = true
		br := g.served().engine.Breaker(a.Provider)
		if br == nil {
			continue
		}
		if snap := br.Snapshot(ctx); snap.State == breaker.StateOpen && !snap.Until.IsZero() {
			wait = min(wait, max(snap.Until.Sub(now), time.Second))
		}
	}
	return wait
}

func setAfloatHeaders(h http.Header, source afloat.Source, provider string, degraded bool) {
	h["X-Afloat-Source"] = headerValue(string(source))
	if provider != "" {
		h.Set("X-Afloat-Provider", provider)
	}
	h["X-Afloat-Degraded"] = headerValue(strconv.FormatBool(degraded))
}

// setCachedAt sets X-Afloat-Cached-At, when the model gave the cached answer a reply carries
// (RFC 3339): a streamed answer has no afloat extension to say it in.
func setCachedAt(h http.Header, rep *cascade.Reply) {
	if !rep.CachedAt.IsZero() {
		h.Set("X-Afloat-Cached-At", rep.CachedAt.UTC().Format(time.RFC3339))
	}
}

// headerValues are the values of afloat's headers that come from a small fixed set, each
// allocated once; a header is set to one by assignment (the key is already canonical), as
// net/http itself does for Content-Type. Nothing appends to a response's header values.
var headerValues = func() map[string][]string {
	m := map[string][]string{}
	for _, v := range []string{"true", "false", "application/json", "text/event-stream",
		string(afloat.SourceModel), string(afloat.SourceCache), string(afloat.SourceHeuristic), string(afloat.SourceHuman),
		string(afloat.SourceUnavailable)} {
		m[v] = []string{v}
	}
	return m
}()

// headerValue is v as a header's values: the shared copy for a fixed value, else a new one.
func headerValue(v string) []string {
	if vs, ok := headerValues[v]; ok {
		return vs
	}
	return []string{v}
}

type completion struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []choice   `json:"choices"`
	Usage   *usageJSON `json:"usage,omitempty"`
	// Afloat is afloat's extension: an *afloatJSON on a completion, a *continuedJSON on the
	// chunks of a stream another provider took over.
	Afloat any `json:"afloat,omitempty"`
}

// afloatJSON is afloat's extension of a completion: who answered and how. Its fields are in
// the order of their names, as they were when this was a map.
type afloatJSON struct {
	Attempts []afloat.Attempt `json:"attempts"`
	CachedAt *time.Time       `json:"cached_at,omitempty"`
	Degraded bool             `json:"degraded"`
	Provider string           `json:"provider"`
	Reason   *afloat.Reason   `json:"reason"`
	Source   afloat.Source    `json:"source"`
	Tier     int              `json:"tier"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      *choiceDelta `json:"message,omitempty"`
	Delta        *choiceDelta `json:"delta,omitempty"`
	FinishReason *string      `json:"finish_reason"`
	Logprobs     *struct{}    `json:"logprobs"`
}

type choiceDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

// usageJSON is OpenAI's usage block with afloat's extension: the answer's cost from its
// provider's price, and the price's currency (absent when it names none).
type usageJSON struct {
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	TotalTokens      int     `json:"total_tokens"`
	Cost             float64 `json:"cost"`
	Currency         string  `json:"currency,omitempty"`
}

func usageOf(u afloat.Usage) *usageJSON {
	return &usageJSON{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens,
		Cost: u.Cost, Currency: u.Currency}
}

// newID returns a random id for an answer: prefix ("chatcmpl-", "msg_", "toolu_", as the
// vendor's own ids start) then 24 hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func toolCallsJSON(calls []afloat.ToolCall, indexed bool) []chatToolCall {
	var out []chatToolCall
	for i, c := range calls {
		tc := chatToolCall{ID: c.ID, Type: "function"}
		if indexed {
			idx := i
			tc.Index = &idx
		}
		tc.Function.Name = c.Name
		tc.Function.Arguments = string(c.Arguments)
		out = append(out, tc)
	}
	return out
}

func chatCompletion(model string, rep *cascade.Reply, now time.Time) completion {
	resp := rep.Response
	finish := resp.FinishReason
	if finish == "" {
		finish = "stop"
		if len(resp.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	msg := &choiceDelta{Role: afloat.RoleAssistant, ToolCalls: toolCallsJSON(resp.ToolCalls, false)}
	if resp.Content != "" || len(resp.ToolCalls) == 0 {
		c := resp.Content
		msg.Content = &c
	}
	// usage is the answer's: failed attempts are not billed to the caller (their cost is in
	// afloat_wasted_cost_total).
	return completion{
		ID: newID("chatcmpl-"), Object: "chat.completion", Created: now.Unix(), Model: answerModel(resp.Model, model),
		Choices: []choice{{Index: 0, Message: msg, FinishReason: &finish}},
		Usage:   usageOf(resp.Usage),
		Afloat:  afloatOf(rep),
	}
}

// afloatOf is afloat's extension of a reply: who answered and how.
func afloatOf(rep *cascade.Reply) *afloatJSON {
	a := &afloatJSON{Source: rep.Source, Provider: rep.Provider, Tier: rep.Tier, Degraded: rep.Degraded, Reason: reasonOrNull(rep.Reason), Attempts: publicAttempts(rep.Attempts)}
	if !rep.CachedAt.IsZero() {
		at := rep.CachedAt.UTC()
		a.CachedAt = &at
	}
	return a
}

// continuedJSON is afloat's extension of a chunk after another provider took the stream over.
type continuedJSON struct {
	ContinuedBy string `json:"continued_by"`
}

// reasonOrNull is a reason for JSON: null when there is none.
func reasonOrNull(r afloat.Reason) *afloat.Reason {
	if r == "" {
		return nil
	}
	return &r
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// chatStream answers with server-sent events in OpenAI's chunk format (streamRoute runs the
// route). A stream cut after its first chunk ends with an error event and no [DONE].
func (g *Gateway) chatStream(w http.ResponseWriter, r *http.Request, cr *chatRequest, req *afloat.Request, name string, route *cascade.Route) {
	s := newSSE(w)
	f := &chatEvents{s: s, id: newID("chatcmpl-"), created: g.clock.Now().Unix(), route: name,
		usage: cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage}
	g.streamRoute(r, route, req, s, f, func(rep *cascade.Reply, err error) bool { return g.chatFailed(w, r, rep, err) })
}

// chatEvents writes a streamed route answer as OpenAI's chat completion chunks.
type chatEvents struct {
	s       *sse
	id      string
	created int64
	route   string
	usage   bool // stream_options.include_usage: a last chunk with the usage
	// finished: the finish chunk went out.
	finished bool
	// out, its one choice, and delta and text, are the chunk being written: the stream's
	// every chunk reuses them, as each is encoded before the next is built.
	out    completion
	choice [1]choice
	delta  choiceDelta
	text   string
}

// chunkOf is the stream's next chunk, of delta d and finish reason finish.
func (f *chatEvents) chunkOf(d *choiceDelta, finish *string) *completion {
	f.choice[0] = choice{Index: 0, Delta: d, FinishReason: finish}
	f.out = completion{ID: f.id, Object: "chat.completion.chunk", Created: f.created, Model: answerModel(f.s.model, f.route),
		Choices: f.choice[:]}
	if f.s.continuedBy != "" {
		// An afloat extension on every chunk after another provider took the stream over.
		f.out.Afloat = &continuedJSON{ContinuedBy: f.s.continuedBy}
	}
	return &f.out
}

func (f *chatEvents) begin() error {
	empty := ""
	return f.s.event("", f.chunkOf(&choiceDelta{Role: afloat.RoleAssistant, Content: &empty}, nil))
}

func (f *chatEvents) chunk(c afloat.Chunk) error {
	if c.Delta != "" || len(c.ToolCalls) > 0 {
		f.delta = choiceDelta{ToolCalls: toolCallsJSON(c.ToolCalls, true)}
		if c.Delta != "" {
			f.text = c.Delta
			f.delta.Content = &f.text
		}
		if err := f.s.event("", f.chunkOf(&f.delta, nil)); err != nil {
			return err
		}
	}
	if c.FinishReason != "" {
		f.finished = true
		reason := c.FinishReason
		return f.s.event("", f.chunkOf(&choiceDelta{}, &reason))
	}
	return nil
}

func (f *chatEvents) end(rep *cascade.Reply, how streamEnd) error {
	switch how {
	case streamRefused:
		return f.s.event("", map[string]apiError{"error": {Code: "content_filter", Type: "afloat_stream_error",
			Message: "the provider stopped the answer under its content policy; the answer is incomplete"}})
	case streamCut:
		return f.s.event("", map[string]apiError{"error": {Code: "stream_interrupted", Type: "afloat_stream_error",
			Message: "the model's stream was cut before it finished; the answer is incomplete"}})
	}
	if !f.finished {
		reason := "stop"
		if len(rep.Response.ToolCalls) > 0 {
			reason = "tool_calls"
		}
		if err := f.s.event("", f.chunkOf(&choiceDelta{}, &reason)); err != nil {
			return err
		}
	}
	if f.usage {
		last := f.chunkOf(nil, nil)
		last.Choices, last.Usage = []choice{}, usageOf(rep.Response.Usage)
		if err := f.s.event("", last); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprint(f.s.w, "data: [DONE]\n\n"); err != nil {
		return err
	}
	f.s.flush()
	return nil
}

// modelJSON is one entry of GET /v1/models: a route or an alias of one, in OpenAI's model
// shape.
type modelJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Afloat names the route an alias leads to (an afloat extension); absent on a route.
	Afloat *modelRoute `json:"afloat,omitempty"`
}

type modelRoute struct {
	Route string `json:"route"`
}

// modelOf is a route, or an alias of route, as a model. A route has no date of its own:
// Created is now.
func (g *Gateway) modelOf(id, route string) modelJSON {
	m := modelJSON{ID: id, Object: "model", Created: g.clock.Now().Unix(), OwnedBy: "afloat"}
	if id != route {
		m.Afloat = &modelRoute{Route: route}
	}
	return m
}

// models answers GET /v1/models: the routes and their aliases, by name, in OpenAI's list
// shape. Every tenant sees every route, as every tenant may call them.
func (g *Gateway) models(w http.ResponseWriter, r *http.Request) {
	s := g.served()
	ids := make([]string, 0, len(s.routes)+len(s.models))
	for name := range s.routes {
		ids = append(ids, name)
	}
	for alias := range s.models {
		ids = append(ids, alias)
	}
	slices.Sort(ids)
	data := make([]modelJSON, 0, len(ids))
	for _, id := range ids {
		data = append(data, g.modelOf(id, s.routeOf(id)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// model answers GET /v1/models/{model}: one route or alias, or 404 in OpenAI's shape. The
// default route does not make every name a model: only those the list shows are.
func (g *Gateway) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("model")
	route := g.served().routeOf(id)
	if route == "" {
		writeChatError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("no route %q: a model is an afloat route or an alias of one", id), "model")
		return
	}
	writeJSON(w, http.StatusOK, g.modelOf(id, route))
}
