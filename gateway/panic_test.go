package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

// panicText is what the user code panics with; it must reach the log and never a client.
const panicText = "user code exploded near sk-live-3f9a"

// panicky is a provider whose calls panic; with late, its stream panics after its first
// chunk instead, once the answer's headers went out.
type panicky struct {
	value any
	late  bool
	calls atomic.Int64
}

func (p *panicky) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	p.calls.Add(1)
	panic(p.value)
}

func (p *panicky) Stream(context.Context, *afloat.Request) (afloat.Stream, error) {
	p.calls.Add(1)
	if !p.late {
		panic(p.value)
	}
	return &panickyStream{value: p.value}, nil
}

type panickyStream struct {
	value any
	n     int
}

func (s *panickyStream) Recv() (afloat.Chunk, error) {
	if s.n++; s.n == 1 {
		return afloat.Chunk{Delta: "Your order "}, nil
	}
	panic(s.value)
}

func (s *panickyStream) Close() error { return nil }

// steady answers every call.
type steady struct{}

func (steady) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	return &afloat.Response{Content: triageAnswer, FinishReason: "stop"}, nil
}

// down fails every call, so that the heuristic or the review queue answers.
type down struct{}

func (down) Complete(context.Context, *afloat.Request) (*afloat.Response, error) {
	return nil, &afloat.ProviderError{Provider: "down", Status: 503, Kind: afloat.Unavailable, Err: errors.New("down")}
}

// panickyQueue is a review store whose Enqueue panics.
type panickyQueue struct {
	review.Store
	calls atomic.Int64
}

func (q *panickyQueue) Enqueue(context.Context, *review.Item) (string, error) {
	q.calls.Add(1)
	panic(panicText)
}

type panicEnv struct {
	t         *testing.T
	srv       *httptest.Server
	logs      *syncBuffer
	serverLog *syncBuffer // net/http's own complaints (a superfluous WriteHeader)
	boom      *panicky
	abort     *panicky
	late      *panicky
	guesses   atomic.Int64
	queue     *panickyQueue
}

// newPanicEnv is a gateway whose user code panics: task "explode" (its provider), "guess"
// (its heuristic), "queue" (the review store), "abort" (its provider, with
// http.ErrAbortHandler); routes "boom" (the provider, before any byte) and "late" (the
// stream, after its first chunk). Task "healthy" and route "support" answer.
func newPanicEnv(t *testing.T) *panicEnv {
	t.Helper()
	e := &panicEnv{t: t, logs: &syncBuffer{}, serverLog: &syncBuffer{},
		boom: &panicky{value: panicText}, abort: &panicky{value: http.ErrAbortHandler}, late: &panicky{value: panicText, late: true},
		queue: &panickyQueue{Store: review.NewMemory(nil)}}
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	registry := prometheus.NewRegistry()
	metrics, err := telemetry.New(registry)
	if err != nil {
		t.Fatal(err)
	}
	var pcs []cascade.ProviderConfig
	for name, p := range map[string]afloat.Provider{"boom": e.boom, "abort": e.abort, "late": e.late, "steady": steady{}, "down": down{}} {
		pcs = append(pcs, cascade.ProviderConfig{Name: name, Provider: p, Retry: cascade.RetryConfig{Max: -1}})
	}
	engine, err := cascade.New(cascade.Config{Providers: pcs, Review: e.queue, Metrics: metrics, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := prompt.Parse("any/v1.tmpl", "--- user\n{{.message}}")
	if err != nil {
		t.Fatal(err)
	}
	guess := cascade.HeuristicFunc(func(afloat.Input) (any, error) {
		e.guesses.Add(1)
		panic(panicText)
	})
	tasks := map[string]*cascade.Task{}
	for _, tc := range []cascade.TaskConfig{
		{Name: "explode", Criticality: afloat.Enrichment, Cascade: []cascade.Tier{{Provider: "boom", Prompt: tmpl}}, Heuristic: guess},
		{Name: "abort", Criticality: afloat.Enrichment, Cascade: []cascade.Tier{{Provider: "abort", Prompt: tmpl}}, Heuristic: guess},
		{Name: "guess", Criticality: afloat.Enrichment, Cascade: []cascade.Tier{{Provider: "down", Prompt: tmpl}}, Heuristic: guess},
		{Name: "queue", Criticality: afloat.Critical, Cascade: []cascade.Tier{{Provider: "down", Prompt: tmpl}}},
		{Name: "healthy", Criticality: afloat.Enrichment, Cascade: []cascade.Tier{{Provider: "steady", Prompt: tmpl}}},
	} {
		tc.Budget, tc.Schema = 2*time.Second, []byte(triageSchema)
		if tasks[tc.Name], err = engine.Task(tc); err != nil {
			t.Fatal(err)
		}
	}
	routes := map[string]*cascade.Route{}
	for name, provider := range map[string]string{"boom": "boom", "late": "late", "support": "steady"} {
		if routes[name], err = engine.Route(cascade.RouteConfig{Name: name, Criticality: afloat.Assistance, Budget: 2 * time.Second,
			Cascade: []cascade.RouteTier{{Provider: provider}}}); err != nil {
			t.Fatal(err)
		}
	}
	gw, err := New(Config{Engine: engine, Tasks: tasks, Routes: routes, Review: e.queue, AdminToken: adminToken,
		Tenants: map[string][]string{"acme": {clientKey}}, Gatherer: registry, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewUnstartedServer(gw.Handler())
	e.srv.Config.ErrorLog = log.New(e.serverLog, "", 0)
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	return e
}

type answer struct {
	status int
	header http.Header
	body   string
}

// call sends a client call and waits at most 5s for its answer: a call that hangs fails
// the test instead of blocking it.
func (e *panicEnv) call(path, body string, hdr ...string) (answer, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+clientKey)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			e.t.Fatalf("POST %s hung: no answer within 5s", path)
		}
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if ctx.Err() != nil {
		e.t.Fatalf("POST %s hung: its body did not end within 5s", path)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// mustCall is call for an answer that must arrive whole.
func (e *panicEnv) mustCall(path, body string, hdr ...string) answer {
	e.t.Helper()
	a, err := e.call(path, body, hdr...)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	return a
}

// checkInternal checks a 500 in the usual error shape that tells nothing of the panic.
func (e *panicEnv) checkInternal(a answer, typ string) {
	e.t.Helper()
	eb := decode[struct {
		Error apiError `json:"error"`
	}](e.t, []byte(a.body))
	if a.status != http.StatusInternalServerError || eb.Error.Code != "internal" || eb.Error.Message == "" || eb.Error.Type != typ ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		e.t.Fatalf("%d %s %s, want a 500 internal error of type %q", a.status, a.header.Get("Content-Type"), a.body, typ)
	}
	e.checkQuiet(a)
}

// checkQuiet checks that nothing of the panic reached the client.
func (e *panicEnv) checkQuiet(a answer) {
	e.t.Helper()
	for _, leak := range []string{panicText, "goroutine", "panic_test.go"} {
		if strings.Contains(a.body, leak) {
			e.t.Errorf("the client sees %q: %s", leak, a.body)
		}
	}
}

// checkLogged checks the error line of a panic, with its stack, and the access line of its
// 500 (or of the 200 a stream had sent).
func (e *panicEnv) checkLogged(path string, status int) {
	e.t.Helper()
	logs := e.logs.String()
	var line string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"msg":"handler panic"`) {
			line = l
		}
	}
	if !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, `"path":"`+path+`"`) ||
		!strings.Contains(line, panicText) || !strings.Contains(line, "panic_test.go") {
		e.t.Errorf("no error line with the panic and its stack:\n%s", logs)
	}
	if !strings.Contains(logs, `"msg":"request","method":"POST","path":"`+path+`","status":`+fmt.Sprint(status)) {
		e.t.Errorf("no access line with status %d for %s:\n%s", status, path, logs)
	}
	if s := e.serverLog.String(); s != "" {
		e.t.Errorf("net/http complained: %s", s)
	}
}

// checkServing checks that the gateway still answers.
func (e *panicEnv) checkServing() {
	e.t.Helper()
	if a := e.mustCall("/v1/tasks/healthy", `{"input": {"message": "hi"}}`); a.status != http.StatusOK || !strings.Contains(a.body, `"source":"model"`) {
		e.t.Fatalf("the healthy task after the panic: %d %s", a.status, a.body)
	}
	chat := `{"model": "support", "messages": [{"role": "user", "content": "where is my order?"}]}`
	if a := e.mustCall("/v1/chat/completions", chat); a.status != http.StatusOK {
		e.t.Fatalf("the healthy route after the panic: %d %s", a.status, a.body)
	}
}

// TestPanicInATask: user code that panics under POST /v1/tasks/{task} answers 500 once and
// frees its Idempotency-Key, so that a retry with the key runs again instead of waiting until
// its context ends; the gateway goes on serving.
func TestPanicInATask(t *testing.T) {
	tests := []struct {
		name, task string
		calls      func(e *panicEnv) int64
	}{
		{"a provider", "explode", func(e *panicEnv) int64 { return e.boom.calls.Load() }},
		{"a heuristic", "guess", func(e *panicEnv) int64 { return e.guesses.Load() }},
		{"a review store", "queue", func(e *panicEnv) int64 { return e.queue.calls.Load() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newPanicEnv(t)
			path, body := "/v1/tasks/"+tc.task, `{"input": {"message": "hi"}}`
			for i := int64(1); i <= 2; i++ {
				a := e.mustCall(path, body, "Idempotency-Key", "key-1")
				e.checkInternal(a, "")
				if a.header.Get("Idempotent-Replayed") != "" {
					t.Fatalf("call %d was replayed: a panic's 500 is no answer to keep", i)
				}
				if got := tc.calls(e); got != i {
					t.Fatalf("after call %d the user code ran %d times: the retry did not run again", i, got)
				}
			}
			// Without a key as well.
			e.checkInternal(e.mustCall(path, body), "")
			e.checkLogged(path, http.StatusInternalServerError)
			e.checkServing()
		})
	}
}

// TestAbortHandlerInATask: http.ErrAbortHandler still cuts the answer as net/http does, is
// not logged as a panic, and frees the Idempotency-Key too.
func TestAbortHandlerInATask(t *testing.T) {
	e := newPanicEnv(t)
	for i := int64(1); i <= 2; i++ {
		a, err := e.call("/v1/tasks/abort", `{"input": {"message": "hi"}}`, "Idempotency-Key", "key-1")
		if err == nil {
			t.Fatalf("call %d: %d %s, want the connection cut", i, a.status, a.body)
		}
		if got := e.abort.calls.Load(); got != i {
			t.Fatalf("after call %d the provider ran %d times: the retry did not run again", i, got)
		}
	}
	if strings.Contains(e.logs.String(), "handler panic") {
		t.Errorf("ErrAbortHandler logged as a panic:\n%s", e.logs.String())
	}
	e.checkServing()
}

// TestPanicInAChat: a route whose provider panics answers 500 in OpenAI's shape, streaming
// or not, as long as no byte went out; once the stream's headers went out, the stream ends
// with an error event and no [DONE] instead of a 500 written into it.
func TestPanicInAChat(t *testing.T) {
	chat := func(model string, stream bool) string {
		return fmt.Sprintf(`{"model": %q, "stream": %t, "messages": [{"role": "user", "content": "where is my order?"}]}`, model, stream)
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("before the first byte, stream %t", stream), func(t *testing.T) {
			e := newPanicEnv(t)
			e.checkInternal(e.mustCall("/v1/chat/completions", chat("boom", stream)), "server_error")
			e.checkLogged("/v1/chat/completions", http.StatusInternalServerError)
			e.checkServing()
		})
	}
	t.Run("after the first chunk", func(t *testing.T) {
		e := newPanicEnv(t)
		a := e.mustCall("/v1/chat/completions", chat("late", true))
		if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %s %s, want the stream that had started", a.status, a.header.Get("Content-Type"), a.body)
		}
		var events []string
		sc := bufio.NewScanner(strings.NewReader(a.body))
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "":
			case strings.HasPrefix(line, "data: "):
				events = append(events, strings.TrimPrefix(line, "data: "))
			default:
				t.Fatalf("a line that is no event in the stream: %q\n%s", line, a.body)
			}
		}
		if len(events) < 2 || !strings.Contains(a.body, `"content":"Your order "`) {
			t.Fatalf("the stream lost its first chunk:\n%s", a.body)
		}
		last := decode[struct {
			Error apiError `json:"error"`
		}](t, []byte(events[len(events)-1]))
		if last.Error.Code != "internal" || last.Error.Type != "afloat_stream_error" || strings.Contains(a.body, "[DONE]") {
			t.Fatalf("the stream does not end with an error event and no [DONE]:\n%s", a.body)
		}
		e.checkQuiet(a)
		e.checkLogged("/v1/chat/completions", http.StatusOK)
		e.checkServing()
	})
}
