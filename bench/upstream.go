package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// answerText is every completion's content: a valid answer of the triage task, so that the
// same mock serves the chat routes and the task API.
const answerText = `{"department": "technical", "is_urgent": 0.8, "urgency_score": 2.0}`

// Upstream is a fast OpenAI-compatible mock on 127.0.0.1: POST /v1/chat/completions answers
// a small completion, or streams one (a chunk at once, then one every ChunkEvery); GET
// /v1/models lists one model. Its latency and failure can be changed while it serves, and it
// counts the chat requests it gets. It is safe for concurrent use.
type Upstream struct {
	// URL is the server's base URL, without /v1.
	URL string

	srv    *http.Server
	body   []byte // the non-streamed answer
	chunk  []byte // one streamed content chunk
	finish []byte // the finish chunk

	chunks     int
	chunkEvery time.Duration

	latency atomic.Int64 // base latency, ns; each call takes it ±jitter
	jitter  float64
	// tailEvery and tail: every tailEvery-th call takes tail instead (0: none).
	tailEvery int64
	tail      time.Duration
	fail      atomic.Int32 // status answered to chat calls; 0 answers them

	calls  atomic.Int64 // chat requests
	failed atomic.Int64 // of them, answered with the failure status

	mu       sync.Mutex
	failedAt []time.Time // when each failed call came
}

// upstreamOptions configure a mock; the zero value answers at once.
type upstreamOptions struct {
	// Latency is the base latency of each chat answer (of a stream's first chunk).
	Latency time.Duration
	// Jitter spreads each latency uniformly over ±Jitter of it. 0 means none.
	Jitter float64
	// Chunks is how many content chunks a stream carries. 0 means 5.
	Chunks int
	// ChunkEvery is the gap between two chunks after the first. 0 sends them at once.
	ChunkEvery time.Duration
	// TailEvery and Tail make a long tail: every TailEvery-th chat call takes Tail instead of
	// the latency. 0 means none.
	TailEvery int
	Tail      time.Duration
}

// startUpstream starts a mock whose answers name model.
func startUpstream(model string, o upstreamOptions) (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &Upstream{URL: "http://" + ln.Addr().String(), jitter: o.Jitter,
		chunks: o.Chunks, chunkEvery: o.ChunkEvery, tailEvery: int64(o.TailEvery), tail: o.Tail}
	if u.chunks <= 0 {
		u.chunks = 5
	}
	u.latency.Store(int64(o.Latency))
	u.body, _ = json.Marshal(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answerText}}},
		"usage": map[string]int{"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32},
	})
	u.chunk = sse(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "tok "}, "finish_reason": nil}}})
	u.finish = sse(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", u.chat)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"bench"}]}`, model)
	})
	u.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func sse(v any) []byte {
	b, _ := json.Marshal(v)
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// ChatURL is the mock's chat completions endpoint.
func (u *Upstream) ChatURL() string { return u.URL + "/v1/chat/completions" }

// SetLatency changes the base latency of the calls that come from now on.
func (u *Upstream) SetLatency(d time.Duration) { u.latency.Store(int64(d)) }

// SetFail makes every chat call from now on answer status (503: an outage); 0 heals it.
func (u *Upstream) SetFail(status int) { u.fail.Store(int32(status)) }

// Calls is the number of chat requests so far; Failed of them those answered with the
// failure status, and FailedAt when each of those came.
func (u *Upstream) Calls() int64  { return u.calls.Load() }
func (u *Upstream) Failed() int64 { return u.failed.Load() }
func (u *Upstream) FailedAt() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.failedAt...)
}

// Close stops the mock and cuts its connections.
func (u *Upstream) Close() { _ = u.srv.Close() }

func (u *Upstream) chat(w http.ResponseWriter, r *http.Request) {
	n := u.calls.Add(1)
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	if st := int(u.fail.Load()); st != 0 {
		u.failed.Add(1)
		u.mu.Lock()
		u.failedAt = append(u.failedAt, time.Now())
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		_, _ = io.WriteString(w, `{"error":{"message":"the mock is down","type":"server_error"}}`)
		return
	}
	d := u.delay()
	if u.tailEvery > 0 && n%u.tailEvery == 0 {
		d = u.tail
	}
	if !u.wait(r, d) {
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(u.body)))
		_, _ = w.Write(u.body)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	var tick *time.Ticker
	if u.chunkEvery > 0 {
		tick = time.NewTicker(u.chunkEvery)
		defer tick.Stop()
	}
	for i := range u.chunks {
		if i > 0 && tick != nil {
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
		if _, err := w.Write(u.chunk); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	out := append([]byte(nil), u.finish...)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		out = fmt.Appendf(out, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
			u.chunks, 20+u.chunks)
	}
	_, _ = w.Write(append(out, "data: [DONE]\n\n"...))
}

// delay is one call's latency: the base latency spread by the jitter.
func (u *Upstream) delay() time.Duration {
	d := time.Duration(u.latency.Load())
	if d <= 0 || u.jitter == 0 {
		return d
	}
	return time.Duration(float64(d) * (1 - u.jitter + 2*u.jitter*rand.Float64()))
}

// wait holds the answer for d, or until the client leaves (false).
func (u *Upstream) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
