package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// POST /v1/messages: Anthropic's Messages API over afloat's routes, so that an app built on
// Anthropic's SDKs needs only a new base URL. The request is mapped to afloat's canonical
// form (as chat.go maps OpenAI's), runs over the route's cascade like a chat call, whatever
// the providers of its tiers, and the answer and every error are written in Anthropic's
// shapes (shared/reference/providers.md §4).

// messagesRequest is the part of Anthropic's Messages request that afloat reads. Fields it
// does not know (metadata, top_p, top_k, service_tier, thinking, …) are ignored.
type messagesRequest struct {
	Model         string              `json:"model"`
	MaxTokens     *int                `json:"max_tokens"`
	System        json.RawMessage     `json:"system"`
	Messages      []messagesTurn      `json:"messages"`
	Tools         []messagesTool      `json:"tools"`
	ToolChoice    *messagesToolChoice `json:"tool_choice"`
	Temperature   *float64            `json:"temperature"`
	StopSequences []string            `json:"stop_sequences"`
	Stream        bool                `json:"stream"`
}

type messagesTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messagesBlock is a content block of a request: text, tool_use (an assistant's call) or
// tool_result (the user's answer to one).
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

type messagesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type messagesToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// decodeMessagesRequest reads and checks an Anthropic Messages request and turns it into
// afloat's canonical form: system (a string or text blocks) becomes the system message,
// tool_use blocks an assistant's tool calls, and each tool_result block a tool message
// (before the text of its turn, as OpenAI-style providers need them right after the call).
// Parameters are named as Anthropic names them ("messages.0.content.1.tool_use_id").
func decodeMessagesRequest(body []byte) (*messagesRequest, *afloat.Request, error) {
	var mr messagesRequest
	if err := decodeOne(body, &mr); err != nil {
		return nil, nil, err
	}
	switch {
	case mr.Model == "":
		return nil, nil, badParam("model", "field required: it names an afloat route or an alias of one")
	case mr.MaxTokens == nil:
		return nil, nil, badParam("max_tokens", "field required")
	case *mr.MaxTokens < 1:
		return nil, nil, badParam("max_tokens", "must be at least 1")
	case len(mr.Messages) == 0:
		return nil, nil, badParam("messages", "at least one message is required")
	case mr.Temperature != nil && (*mr.Temperature < 0 || *mr.Temperature > 1):
		return nil, nil, badParam("temperature", "must be between 0 and 1")
	}
	req := &afloat.Request{MaxTokens: *mr.MaxTokens, MaxTokensParam: "max_tokens", Temperature: mr.Temperature}
	if len(mr.System) > 0 && string(mr.System) != "null" {
		text, err := systemText(mr.System)
		if err != nil {
			return nil, nil, err
		}
		req.Messages = append(req.Messages, afloat.Message{Role: afloat.RoleSystem, Content: text})
	}
	called := map[string]string{} // tool_use id → the tool's name
	for i, m := range mr.Messages {
		msgs, err := turnMessages(i, m, called)
		if err != nil {
			return nil, nil, err
		}
		req.Messages = append(req.Messages, msgs...)
	}
	tools := map[string]bool{}
	for i, t := range mr.Tools {
		p := fmt.Sprintf("tools.%d", i)
		switch {
		case t.Type != "" && t.Type != "custom":
			return nil, nil, badParam(p+".type", "tool type %q is not supported: only client tools with an input_schema", t.Type)
		case t.Name == "":
			return nil, nil, badParam(p+".name", "field required")
		case len(t.InputSchema) == 0 || string(t.InputSchema) == "null":
			return nil, nil, badParam(p+".input_schema", "field required")
		case !jsonObject(t.InputSchema):
			return nil, nil, badParam(p+".input_schema", "must be a JSON Schema object")
		}
		tools[t.Name] = true
		req.Tools = append(req.Tools, afloat.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if tc := mr.ToolChoice; tc != nil {
		choice, err := messagesChoice(tc, tools)
		if err != nil {
			return nil, nil, err
		}
		req.ToolChoice = choice
	}
	for i, s := range mr.StopSequences {
		if s == "" {
			return nil, nil, badParam(fmt.Sprintf("stop_sequences.%d", i), "must not be empty")
		}
	}
	return &mr, req, nil
}

// systemText reads the system prompt: a string or an array of text blocks.
func systemText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var blocks []messagesBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badParam("system", "must be a string or an array of text blocks")
	}
	var b strings.Builder
	for i, bl := range blocks {
		if bl.Type != "text" {
			return "", badParam(fmt.Sprintf("system.%d.type", i), "block type %q is not supported here: only text", bl.Type)
		}
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// turnMessages maps one turn to canonical messages: a user turn's tool_result blocks to tool
// messages, then its text to a user message; an assistant turn to one message holding its
// text and its tool_use blocks as calls. called gathers the calls' ids, so that a result
// names its tool (providers without call ids match results by name).
func turnMessages(i int, m messagesTurn, called map[string]string) ([]afloat.Message, error) {
	p := fmt.Sprintf("messages.%d", i)
	if m.Role != afloat.RoleUser && m.Role != afloat.RoleAssistant {
		return nil, badParam(p+".role", "role %q is not supported: user or assistant (the system prompt goes in system)", m.Role)
	}
	var blocks []messagesBlock
	var s string
	switch {
	case len(m.Content) == 0 || string(m.Content) == "null":
		return nil, badParam(p+".content", "field required")
	case json.Unmarshal(m.Content, &s) == nil:
		return []afloat.Message{{Role: m.Role, Content: s}}, nil
	case json.Unmarshal(m.Content, &blocks) != nil:
		return nil, badParam(p+".content", "must be a string or an array of content blocks")
	}
	var out []afloat.Message
	var text strings.Builder
	msg := afloat.Message{Role: m.Role}
	for j, b := range blocks {
		bp := fmt.Sprintf("%s.content.%d", p, j)
		switch {
		case b.Type == "text":
			text.WriteString(b.Text)
		case b.Type == "tool_use" && m.Role == afloat.RoleAssistant:
			switch {
			case b.ID == "":
				return nil, badParam(bp+".id", "field required")
			case b.Name == "":
				return nil, badParam(bp+".name", "field required")
			}
			args := b.Input
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			var compact bytes.Buffer
			if !jsonObject(args) || json.Compact(&compact, args) != nil {
				return nil, badParam(bp+".input", "must be an object")
			}
			args = compact.Bytes()
			called[b.ID] = b.Name
			msg.ToolCalls = append(msg.ToolCalls, afloat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case b.Type == "tool_result" && m.Role == afloat.RoleUser:
			name, ok := called[b.ToolUseID]
			if !ok {
				return nil, badParam(bp+".tool_use_id", "%q answers no tool_use block of an earlier assistant turn", b.ToolUseID)
			}
			result, err := resultText(bp, b.Content)
			if err != nil {
				return nil, err
			}
			out = append(out, afloat.Message{Role: afloat.RoleTool, Content: result, ToolCallID: b.ToolUseID, Name: name})
		case (b.Type == "thinking" || b.Type == "redacted_thinking") && m.Role == afloat.RoleAssistant:
			// An earlier answer's reasoning, which afloat never writes: nothing to send on.
		default:
			return nil, badParam(bp+".type", "content block %q is not supported in a %s turn: text, tool_use (assistant) or tool_result (user)", b.Type, m.Role)
		}
	}
	msg.Content = text.String()
	if msg.Content != "" || len(msg.ToolCalls) > 0 || len(out) == 0 {
		out = append(out, msg)
	}
	return out, nil
}

// resultText reads a tool_result's content: absent, a string, or text blocks.
func resultText(p string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var blocks []messagesBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badParam(p+".content", "must be a string or an array of text blocks")
	}
	var b strings.Builder
	for k, bl := range blocks {
		if bl.Type != "text" {
			return "", badParam(fmt.Sprintf("%s.content.%d.type", p, k), "block type %q is not supported in a tool_result: only text", bl.Type)
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// messagesChoice maps tool_choice: auto, any (afloat's required), tool (with its name) or
// none.
func messagesChoice(tc *messagesToolChoice, tools map[string]bool) (*afloat.ToolChoice, error) {
	mode := tc.Type
	switch tc.Type {
	case "none":
		return &afloat.ToolChoice{Mode: "none"}, nil
	case "auto":
	case "any":
		mode = "required"
	case "tool":
		if !tools[tc.Name] {
			return nil, badParam("tool_choice.name", "%q is not among the tools", tc.Name)
		}
		return &afloat.ToolChoice{Mode: "tool", Name: tc.Name}, nil
	default:
		return nil, badParam("tool_choice.type", "tool_choice %q: want auto, any, tool or none", tc.Type)
	}
	if len(tools) == 0 {
		return nil, badParam("tool_choice", "tool_choice %q needs tools", tc.Type)
	}
	return &afloat.ToolChoice{Mode: mode}, nil
}

func jsonObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// messages answers POST /v1/messages.
func (g *Gateway) messages(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSON(w, r)
	if !ok {
		return
	}
	mr, req, err := decodeMessagesRequest(body)
	if err != nil {
		var pe *paramError
		errors.As(err, &pe)
		msg := err.Error()
		if pe.param != "" {
			msg = pe.param + ": " + msg
		}
		writeAnthropicError(w, r, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	name, route, ok := g.served().route(mr.Model)
	if !ok {
		writeAnthropicError(w, r, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("model: no route %q: the model names an afloat route or an alias of one", mr.Model))
		return
	}
	w.Header().Set("X-Afloat-Route", name)
	stop := newStopper(mr.StopSequences)
	if mr.Stream {
		g.messagesStream(w, r, req, name, route, stop)
		return
	}
	rep, err := route.Complete(r.Context(), req)
	noteReply(r.Context(), route.Name(), rep)
	if rep != nil && rep.Degraded {
		g.logDegraded(r, route.Name(), rep.Attempts)
	}
	var refused *cascade.RefusalError
	switch {
	case errors.As(err, &refused):
		// Anthropic's own answer to a request its policy declines: a message that stops
		// for refusal. No retry will change it.
		setAfloatHeaders(w.Header(), afloat.SourceUnavailable, refused.Provider, true)
		w.Header().Set("X-Should-Retry", "false")
		writeJSON(w, http.StatusOK, refusalMessage(name, rep))
		return
	case g.messagesFailed(w, r, rep, err):
		return
	}
	setAfloatHeaders(w.Header(), rep.Source, rep.Provider, rep.Degraded)
	setCachedAt(w.Header(), rep)
	setCost(w.Header(), rep.Response.Usage)
	writeJSON(w, http.StatusOK, messageOf(name, rep, stop))
}

// exhaustedStatus is the status of an exhausted route on /v1/messages: 529, with which
// Anthropic answers overloaded_error and which its SDKs raise as OverloadedError. Their
// default retries (twice, on 529 and on 503 alike) are turned off by X-Should-Retry, which
// they obey: a retry would come back to a cascade that just failed, and a fleet of clients
// each retrying twice would triple the load on providers that are down.
const exhaustedStatus = 529

// messagesFailed answers a route call that produced no answer, in Anthropic's shape, and
// reports whether it did. A refusal is answered by the caller.
func (g *Gateway) messagesFailed(w http.ResponseWriter, r *http.Request, rep *cascade.Reply, err error) bool {
	var re *cascade.RequestError
	switch {
	case err == nil:
		return false
	case errors.As(err, &re):
		writeAnthropicError(w, r, http.StatusBadRequest, "invalid_request_error", re.Error())
	case errors.Is(err, cascade.ErrExhausted):
		reason := ""
		if rep != nil {
			reason = string(rep.Reason)
		}
		setAfloatHeaders(w.Header(), afloat.SourceUnavailable, "", true)
		setRetryAfter(w, g.retryAfter(r.Context(), rep))
		w.Header().Set("X-Should-Retry", "false")
		writeAnthropicError(w, r, exhaustedStatus, "overloaded_error",
			fmt.Sprintf("no model of this route could answer (reason %s); retry later", reason))
	case r.Context().Err() != nil:
		// The client left.
	default:
		g.log.ErrorContext(r.Context(), "route failed", "err", err)
		writeAnthropicError(w, r, http.StatusInternalServerError, "api_error", "the route failed")
	}
	return true
}

// messageJSON is Anthropic's Message, the answer of /v1/messages, with afloat's extension.
type messageJSON struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Model        string        `json:"model"`
	Content      []blockJSON   `json:"content"`
	StopReason   *string       `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        messagesUsage `json:"usage"`
	Afloat       *afloatJSON   `json:"afloat,omitempty"`
}

// blockJSON is a content block of an answer: text or tool_use.
type blockJSON struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type messagesUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

func textBlock(s string) blockJSON { return blockJSON{Type: "text", Text: &s} }

// toolUseBlock is a tool call as a tool_use block; a call without an id (a provider that
// has none) gets one, as Anthropic's API always gives one.
func toolUseBlock(c afloat.ToolCall, input json.RawMessage) blockJSON {
	id := c.ID
	if id == "" {
		id = newID("toolu_")
	}
	return blockJSON{Type: "tool_use", ID: id, Name: c.Name, Input: input}
}

// stopReason is Anthropic's stop_reason for a provider's finish reason (in OpenAI's words):
// whether the answer calls tools decides where the provider did not say.
func stopReason(finish string, tools bool) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "content_filter":
		return "refusal"
	case "tool_calls":
		return "tool_use"
	}
	if tools {
		return "tool_use"
	}
	return "end_turn"
}

// messageOf is a route's answer as a Message. Its usage is the answer's: failed attempts are
// not billed to the caller. A stop sequence ends the text there, and drops what followed it.
func messageOf(route string, rep *cascade.Reply, stop *stopper) messageJSON {
	resp := rep.Response
	text, hit := stop.cut(resp.Content)
	calls := resp.ToolCalls
	if hit != "" {
		calls = nil
	}
	var content []blockJSON
	if text != "" || len(calls) == 0 {
		content = append(content, textBlock(text))
	}
	for _, c := range calls {
		content = append(content, toolUseBlock(c, c.Arguments))
	}
	reason := stopReason(resp.FinishReason, len(calls) > 0)
	var sequence *string
	if hit != "" {
		reason, sequence = "stop_sequence", &hit
	}
	return messageJSON{ID: newID("msg_"), Type: "message", Role: afloat.RoleAssistant, Model: answerModel(resp.Model, route),
		Content: content, StopReason: &reason, StopSequence: sequence,
		Usage:  messagesUsage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens},
		Afloat: afloatOf(rep),
	}
}

// refusalMessage is the answer to a request a provider declined under its content policy:
// no text, stop_reason refusal.
func refusalMessage(route string, rep *cascade.Reply) messageJSON {
	reason := "refusal"
	m := messageJSON{ID: newID("msg_"), Type: "message", Role: afloat.RoleAssistant, Model: route,
		Content: []blockJSON{textBlock("")}, StopReason: &reason}
	if rep != nil {
		m.Afloat = &afloatJSON{Source: rep.Source, Provider: rep.Provider, Tier: rep.Tier, Degraded: true, Reason: reasonOrNull(rep.Reason), Attempts: publicAttempts(rep.Attempts)}
	}
	return m
}

// messagesStream answers with Anthropic's event stream (streamRoute runs the route).
func (g *Gateway) messagesStream(w http.ResponseWriter, r *http.Request, req *afloat.Request, name string, route *cascade.Route, stop *stopper) {
	s := newSSE(w)
	f := &messageEvents{s: s, id: newID("msg_"), route: name, stop: stop}
	g.streamRoute(r, route, req, s, f, func(rep *cascade.Reply, err error) bool {
		var refused *cascade.RefusalError
		if errors.As(err, &refused) {
			s.open(afloat.SourceUnavailable, refused.Provider, true)
			w.Header().Set("X-Should-Retry", "false")
			if f.begin() == nil {
				_ = f.end(rep, streamRefused)
			}
			return true
		}
		return g.messagesFailed(w, r, rep, err)
	})
}

// messageEvents writes a streamed route answer as Anthropic's events: message_start, then
// for each content block content_block_start, its content_block_delta events (text_delta,
// input_json_delta) and content_block_stop, with one ping after the first start, then
// message_delta (stop_reason, usage) and message_stop. A stream cut after its first chunk
// ends with an error event instead.
type messageEvents struct {
	s     *sse
	id    string
	route string
	stop  *stopper
	// blocks counts the content blocks started; textOpen says the last one is a text block
	// still open.
	blocks   int
	textOpen bool
	pinged   bool
	// finish is the provider's finish reason; tools says a tool_use block went out.
	finish string
	tools  bool
}

func (f *messageEvents) begin() error {
	return f.s.event("message_start", map[string]any{"type": "message_start", "message": messageJSON{
		ID: f.id, Type: "message", Role: afloat.RoleAssistant, Model: answerModel(f.s.model, f.route), Content: []blockJSON{},
	}})
}

func (f *messageEvents) chunk(c afloat.Chunk) error {
	if c.FinishReason != "" {
		f.finish = c.FinishReason
	}
	if err := f.text(f.stop.feed(c.Delta)); err != nil {
		return err
	}
	if len(c.ToolCalls) == 0 || f.stop.hit != "" {
		return nil
	}
	// The text is over: what the stop sequences held back is the end of it.
	if err := f.text(f.stop.flush()); err != nil {
		return err
	}
	if err := f.closeText(); err != nil {
		return err
	}
	for _, call := range c.ToolCalls {
		if err := f.startBlock(toolUseBlock(call, json.RawMessage("{}"))); err != nil {
			return err
		}
		delta := map[string]string{"type": "input_json_delta", "partial_json": string(call.Arguments)}
		if err := f.s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": f.blocks - 1, "delta": delta}); err != nil {
			return err
		}
		if err := f.s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": f.blocks - 1}); err != nil {
			return err
		}
		f.tools = true
	}
	return nil
}

// text writes t in the open text block, opening one first when none is.
func (f *messageEvents) text(t string) error {
	if t == "" {
		return nil
	}
	if !f.textOpen {
		if err := f.startBlock(textBlock("")); err != nil {
			return err
		}
		f.textOpen = true
	}
	delta := map[string]string{"type": "text_delta", "text": t}
	return f.s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": f.blocks - 1, "delta": delta})
}

func (f *messageEvents) startBlock(b blockJSON) error {
	if err := f.s.event("content_block_start", map[string]any{"type": "content_block_start", "index": f.blocks, "content_block": b}); err != nil {
		return err
	}
	f.blocks++
	if f.pinged {
		return nil
	}
	f.pinged = true
	return f.s.event("ping", map[string]string{"type": "ping"})
}

func (f *messageEvents) closeText() error {
	if !f.textOpen {
		return nil
	}
	f.textOpen = false
	return f.s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": f.blocks - 1})
}

func (f *messageEvents) end(rep *cascade.Reply, how streamEnd) error {
	if how == streamCut {
		return f.s.event("error", anthropicErrorBody("api_error",
			"the model's stream was cut before it finished; the answer is incomplete", ""))
	}
	reason := stopReason(f.finish, f.tools)
	var sequence *string
	switch {
	case how == streamRefused:
		reason = "refusal"
	case f.stop.hit != "":
		reason, sequence = "stop_sequence", &f.stop.hit
	default:
		if err := f.text(f.stop.flush()); err != nil {
			return err
		}
	}
	if err := f.closeText(); err != nil {
		return err
	}
	if f.blocks == 0 {
		// An answer with no content still has its one (empty) text block, as the
		// non-streamed answer does.
		if err := f.startBlock(textBlock("")); err != nil {
			return err
		}
		if err := f.s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}); err != nil {
			return err
		}
	}
	var u messagesUsage
	if rep != nil && rep.Response != nil {
		u = messagesUsage{InputTokens: rep.Response.Usage.InputTokens, OutputTokens: rep.Response.Usage.OutputTokens}
	}
	if err := f.s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]*string{"stop_reason": &reason, "stop_sequence": sequence}, "usage": u}); err != nil {
		return err
	}
	return f.s.event("message_stop", map[string]string{"type": "message_stop"})
}

// stopper applies a request's stop_sequences to the answer's text, on every tier alike
// (the providers are not told them): the text ends before the first sequence it completes.
// A streamed answer holds back its last bytes, which may be the start of a sequence, until
// the next delta says they are not. It is used by one goroutine.
type stopper struct {
	seqs    []string
	longest int
	pending string // text held back
	hit     string // the sequence that ended the text; "" while none has
}

func newStopper(seqs []string) *stopper {
	s := &stopper{seqs: seqs}
	for _, q := range seqs {
		s.longest = max(s.longest, len(q))
	}
	return s
}

// find returns where the first sequence text completes starts (the one that ends first,
// the longest of those that end together), or -1.
func (s *stopper) find(text string) (int, string) {
	at, end, hit := -1, 0, ""
	for _, q := range s.seqs {
		i := strings.Index(text, q)
		if i < 0 {
			continue
		}
		if e := i + len(q); at < 0 || e < end || e == end && i < at {
			at, end, hit = i, e, q
		}
	}
	return at, hit
}

// cut ends a whole text at its first stop sequence and returns it with the sequence ("" for
// none).
func (s *stopper) cut(text string) (string, string) {
	if i, hit := s.find(text); i >= 0 {
		s.hit = hit
		return text[:i], hit
	}
	return text, ""
}

// feed takes the next delta of a stream and returns the text that may go out now.
func (s *stopper) feed(delta string) string {
	switch {
	case s.hit != "":
		return ""
	case s.longest == 0:
		return delta
	}
	buf := s.pending + delta
	if i, hit := s.find(buf); i >= 0 {
		s.hit, s.pending = hit, ""
		return buf[:i]
	}
	// A sequence not yet complete can only start in the last longest-1 bytes.
	n := len(buf) - (s.longest - 1)
	for n > 0 && n < len(buf) && !utf8.RuneStart(buf[n]) {
		n--
	}
	if n <= 0 {
		s.pending = buf
		return ""
	}
	s.pending = buf[n:]
	return buf[:n]
}

// flush returns the text held back, at the end of the answer's text.
func (s *stopper) flush() string {
	p := s.pending
	s.pending = ""
	return p
}

// anthropicErrorBody is an error in Anthropic's shape, {"type": "error", "error": {"type",
// "message"}, "request_id"}.
func anthropicErrorBody(typ, msg, requestID string) map[string]any {
	body := map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
	if requestID != "" {
		body["request_id"] = requestID
	}
	return body
}

// writeAnthropicError writes an error in Anthropic's shape.
func writeAnthropicError(w http.ResponseWriter, r *http.Request, status int, typ, msg string) {
	id := afloat.RequestID(r.Context())
	if id != "" { // also where no handler of /v1/messages ran (a 405), as anthropicRequestID does
		w.Header().Set("Request-Id", id)
	}
	writeJSON(w, status, anthropicErrorBody(typ, msg, id))
}

// anthropicPath reports whether path belongs to the Anthropic-compatible API, whose every
// error is in Anthropic's shape.
func anthropicPath(path string) bool { return path == "/v1/messages" }

// anthropicType is Anthropic's error type for a status.
func anthropicType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusServiceUnavailable, status == exhaustedStatus:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}

// anthropicRequestID also names the request's id as Anthropic's API does (request-id), where
// its SDKs read it (an error's requestID, a message's _request_id).
func anthropicRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-Id", afloat.RequestID(r.Context()))
		next.ServeHTTP(w, r)
	})
}

// callerKey returns the client key a call carries: Authorization: Bearer, or on the
// Anthropic API x-api-key, where Anthropic's SDKs send it. A call that sends two different
// keys, or x-api-key twice, is an error: which one names the caller would be a guess.
func callerKey(r *http.Request) (string, bool, error) {
	key, ok := bearer(r)
	if !anthropicPath(r.URL.Path) {
		return key, ok, nil
	}
	switch vs := r.Header.Values("X-Api-Key"); {
	case len(vs) > 1:
		return "", false, errors.New("more than one x-api-key header: send one")
	case len(vs) == 0:
		return key, ok, nil
	case ok && vs[0] != key:
		return "", false, errors.New("x-api-key and Authorization carry different keys: send one")
	default:
		k := strings.TrimSpace(vs[0])
		return k, k != "", nil
	}
}

// keyHint says how to send a client key on the API r calls.
func keyHint(r *http.Request) string {
	if anthropicPath(r.URL.Path) {
		return "send x-api-key: <key> or Authorization: Bearer <key>"
	}
	return "send Authorization: Bearer <key>"
}
