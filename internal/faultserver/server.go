package faultserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Config is a server's model and script.
type Config struct {
	// Model is the model every answer names in its "model" field; required.
	Model string
	// Tokens is the healthy answer, one stream chunk per token; nil means Tokens("t", 1, 10).
	Tokens []string
	// Script answers chat completions requests; nil answers every one healthily.
	Script Script
	// Models answers GET /v1/models (an open breaker's background probe); nil lists Model.
	// Of its faults only OK, Status, Reset and Hang apply; any other lists Model.
	Models Script
	// RejectPrefill answers PrefillUnsupported to every request whose last message is the
	// assistant's, before Script is asked: a server that cannot continue an answer.
	RejectPrefill bool
	// PromptTokens is the usage's prompt_tokens; 0 means 10. completion_tokens counts the
	// tokens of the answer.
	PromptTokens int
	// MaxHold bounds every wait of the server (Hang, Stall, slow tokens, NoDone's hold): a
	// guard against a test that hangs, never a wait for a state. 0 means 30s.
	MaxHold time.Duration
}

// Server is a running fault server on 127.0.0.1. It is safe for concurrent use.
type Server struct {
	// URL is the server's root ("http://127.0.0.1:port"); the API is under URL + "/v1".
	URL string

	cfg  Config
	srv  *httptest.Server
	quit chan struct{} // closed when the server closes: every wait ends

	mu       sync.Mutex
	reqs     []*Request
	count    map[bool]int // requests per endpoint: true is chat completions
	inFlight int
	changed  chan struct{} // closed and replaced whenever a request starts or ends
}

// New starts a server; it is closed when the test ends (after a gateway started later,
// since cleanups run last-in first-out).
func New(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	if cfg.Model == "" {
		tb.Fatal("faultserver: Config.Model is required")
	}
	if cfg.Tokens == nil {
		cfg.Tokens = Tokens("t", 1, 10)
	}
	if cfg.PromptTokens == 0 {
		cfg.PromptTokens = 10
	}
	if cfg.MaxHold == 0 {
		cfg.MaxHold = 30 * time.Second
	}
	s := &Server{cfg: cfg, quit: make(chan struct{}), count: map[bool]int{}, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	tb.Cleanup(s.Close)
	return s
}

// Close ends every wait of the server, drops its connections and stops it.
func (s *Server) Close() {
	select {
	case <-s.quit:
		return
	default:
	}
	close(s.quit)
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Model returns the model the server's answers name.
func (s *Server) Model() string { return s.cfg.Model }

// Log returns a copy of the requests received so far; those still being answered may change
// after it returns.
func (s *Server) Log() Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(Log, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
		out[i].Messages = append([]Message(nil), r.Messages...)
	}
	return out
}

// Settle waits until no request is being answered, at most timeout (failing the test when
// it runs out), and returns the log.
func (s *Server) Settle(tb testing.TB, timeout time.Duration) Log {
	tb.Helper()
	guard := time.NewTimer(timeout)
	defer guard.Stop()
	for {
		s.mu.Lock()
		n, ch := s.inFlight, s.changed
		s.mu.Unlock()
		if n == 0 {
			return s.Log()
		}
		select {
		case <-ch:
		case <-guard.C:
			tb.Errorf("faultserver %s: %d requests still being answered after %v", s.cfg.Model, n, timeout)
			return s.Log()
		}
	}
}

// update changes a request's record under the server's lock.
func (s *Server) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// notify wakes Settle's waiters; s.mu must be held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	chat := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions")
	models := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models")
	if !chat && !models {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "faultserver: no such endpoint "+r.Method+" "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return
	}
	rec := &Request{Method: r.Method, Path: r.URL.Path, At: time.Now(), Header: r.Header.Clone(), Body: body}
	var decodeErr error
	if chat {
		decodeErr = rec.decodeChat()
	}
	s.mu.Lock()
	s.count[chat]++
	rec.N = s.count[chat]
	s.reqs = append(s.reqs, rec)
	s.inFlight++
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		rec.Ended = time.Now()
		s.inFlight--
		s.notify()
		s.mu.Unlock()
	}()

	if decodeErr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "faultserver: "+decodeErr.Error())
		return
	}
	a := &answer{s: s, w: w, r: r, rec: rec}
	if !chat {
		a.models()
		return
	}
	var f Fault
	switch {
	case s.cfg.RejectPrefill && rec.Continues():
		f = Fault{Mode: PrefillUnsupported}
	case s.cfg.Script != nil:
		f = s.cfg.Script(rec)
	}
	s.update(func() { rec.Fault = f })
	a.chat(f)
}

// answer is one request being answered.
type answer struct {
	s   *Server
	w   http.ResponseWriter
	r   *http.Request
	rec *Request
}

// hold waits d (at most MaxHold) and reports whether the client is still there; d <= 0 holds
// for MaxHold.
func (a *answer) hold(d time.Duration) bool {
	if d <= 0 || d > a.s.cfg.MaxHold {
		d = a.s.cfg.MaxHold
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.r.Context().Done():
		a.s.update(func() { a.rec.ClientLeft = true })
		return false
	case <-a.s.quit:
		return false
	}
}

// pause is hold for a pause that may be zero.
func (a *answer) pause(d time.Duration) bool {
	if d <= 0 {
		return a.r.Context().Err() == nil
	}
	return a.hold(d)
}

// write writes and flushes p, and reports whether the client took it.
func (a *answer) write(p []byte) bool {
	if _, err := a.w.Write(p); err != nil {
		a.s.update(func() { a.rec.ClientLeft = true })
		return false
	}
	if err := http.NewResponseController(a.w).Flush(); err != nil {
		a.s.update(func() { a.rec.ClientLeft = true })
		return false
	}
	a.s.update(func() { a.rec.LastWrite = time.Now() })
	return true
}

// abort drops the connection without ending the body: the client sees a cut answer.
func (a *answer) abort() { panic(http.ErrAbortHandler) }

// reset closes the connection with a TCP reset, before any byte of an answer.
func (a *answer) reset() {
	conn, _, err := http.NewResponseController(a.w).Hijack()
	if err != nil {
		a.abort()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST, not FIN
	}
	_ = conn.Close()
}

func (a *answer) models() {
	f := Fault{}
	if a.s.cfg.Models != nil {
		f = a.s.cfg.Models(a.rec)
	}
	a.s.update(func() { a.rec.Fault = f })
	switch f.Mode {
	case Status:
		a.status(f)
	case Reset:
		a.reset()
	case Hang:
		a.hang()
	default:
		writeJSON(a.w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": a.s.cfg.Model, "object": "model", "created": 0, "owned_by": "faultserver"},
		}})
	}
}

func (a *answer) chat(f Fault) {
	switch f.Mode {
	case Status:
		a.status(f)
	case Reset:
		a.reset()
	case Hang:
		a.hang()
	case ContextLength:
		msg := orDefault(f.Message, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9731 tokens. Please reduce the length of the messages.")
		writeErrorParam(a.w, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", msg, "messages")
	case ContentPolicy:
		msg := orDefault(f.Message, "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.")
		writeError(a.w, http.StatusBadRequest, "invalid_request_error", "content_policy_violation", msg)
	case PrefillUnsupported:
		msg := orDefault(f.Message, "continue_final_message is not supported by this server: the last message must not be an assistant prefill")
		writeError(a.w, http.StatusBadRequest, "invalid_request_error", "prefill_not_supported", msg)
	default:
		if a.rec.Stream {
			a.stream(f)
		} else {
			a.complete(f)
		}
	}
}

func (a *answer) status(f Fault) {
	code := f.Status
	if code == 0 {
		code = http.StatusServiceUnavailable
	}
	if f.RetryAfter != "" {
		a.w.Header().Set("Retry-After", f.RetryAfter)
	}
	typ, errCode := "server_error", ""
	msg := fmt.Sprintf("faultserver: scripted %d", code)
	switch {
	case code == http.StatusTooManyRequests:
		typ, errCode = "requests", "rate_limit_exceeded"
		msg = "Rate limit reached for requests. Please try again later."
	case code < 500:
		typ = "invalid_request_error"
	}
	writeError(a.w, code, typ, errCode, orDefault(f.Message, msg))
}

// hang holds the connection without a byte until the client leaves, or MaxHold: then it
// answers 504, so that a client that waited that long sees it.
func (a *answer) hang() {
	if a.hold(0) {
		writeError(a.w, http.StatusGatewayTimeout, "server_error", "", "faultserver: hung for MaxHold and gave up")
	}
}

func (a *answer) tokens(f Fault) []string {
	if f.Tokens != nil {
		return f.Tokens
	}
	return a.s.cfg.Tokens
}

func (a *answer) usage(f Fault, completion int) map[string]any {
	prompt := f.PromptTokens
	if prompt == 0 {
		prompt = a.s.cfg.PromptTokens
	}
	return map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
}

func (a *answer) id() string { return fmt.Sprintf("chatcmpl-fs-%s-%d", a.s.cfg.Model, a.rec.N) }

// complete answers without streaming.
func (a *answer) complete(f Fault) {
	toks := a.tokens(f)
	if f.Mode == SlowFirstToken && !a.pause(f.Delay) {
		return
	}
	body, _ := json.Marshal(map[string]any{
		"id": a.id(), "object": "chat.completion", "created": time.Now().Unix(), "model": a.s.cfg.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": Text(toks)}}},
		"usage": a.usage(f, len(toks)),
	})
	a.w.Header().Set("Content-Type", "application/json")
	switch f.Mode {
	case Cut, Stall:
		a.w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		a.w.WriteHeader(http.StatusOK)
		a.write(body[:len(body)/2])
		if f.Mode == Stall {
			a.hold(f.Delay)
		}
		a.abort()
	case Malformed:
		a.w.WriteHeader(http.StatusOK)
		a.write([]byte(`{"id": "chatcmpl-fs", "choices": [{"message": {"content": "broken`))
		return
	}
	a.w.WriteHeader(http.StatusOK)
	if a.write(body) {
		a.s.update(func() { a.rec.Sent = len(toks) })
	}
}

// stream answers with server-sent events.
func (a *answer) stream(f Fault) {
	toks := a.tokens(f)
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
	created := time.Now().Unix()
	event := func(delta map[string]any, finish any) []byte {
		b, _ := json.Marshal(map[string]any{
			"id": a.id(), "object": "chat.completion.chunk", "created": created, "model": a.s.cfg.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		})
		return []byte("data: " + string(b) + "\n\n")
	}
	if !a.write(event(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	if f.Mode == SlowFirstToken && !a.pause(f.Delay) {
		return
	}
	for i, tok := range toks {
		if i == f.After {
			switch f.Mode {
			case Cut:
				a.abort()
			case Stall:
				a.hold(f.Delay)
				a.abort()
			case Malformed:
				if !a.write([]byte("data: {\"id\": \"" + a.id() + "\", \"choices\": [{\"index\": 0, \"delta\": {\"content\": \"BROKEN\n\n")) {
					return
				}
			}
		}
		if i > 0 && !a.pause(f.Gap) {
			return
		}
		if !a.write(event(map[string]any{"content": tok}, nil)) {
			return
		}
		a.s.update(func() { a.rec.Sent = i + 1 })
	}
	if f.Mode == Cut || f.Mode == Stall {
		// After is past the last token: the fault comes before the finish chunk.
		if f.Mode == Stall {
			a.hold(f.Delay)
		}
		a.abort()
	}
	if !a.write(event(map[string]any{}, "stop")) {
		return
	}
	if a.rec.IncludeUsage {
		b, _ := json.Marshal(map[string]any{
			"id": a.id(), "object": "chat.completion.chunk", "created": created, "model": a.s.cfg.Model,
			"choices": []any{}, "usage": a.usage(f, len(toks)),
		})
		if !a.write([]byte("data: " + string(b) + "\n\n")) {
			return
		}
	}
	if f.Mode == NoDone {
		if f.Hold > 0 {
			a.hold(f.Hold)
		}
		return
	}
	a.write([]byte("data: [DONE]\n\n"))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeErrorParam(w, status, typ, code, msg, "")
}

func writeErrorParam(w http.ResponseWriter, status int, typ, code, msg, param string) {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": e})
}
