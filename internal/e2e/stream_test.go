package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

var chatRequest = &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Привет"}}}

// emitted is what a route's stream passed to its client.
type emitted struct {
	providers []string
	text      strings.Builder
	finish    string
}

func (e *emitted) emit(provider string, _ int, c afloat.Chunk) error {
	e.providers = append(e.providers, provider)
	e.text.WriteString(c.Delta)
	if c.FinishReason != "" {
		e.finish = c.FinishReason
	}
	return nil
}

// postStream asks the gateway's chat route for a stream and returns the response and its
// whole body.
func postStream(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	body := `{"model":"support-agent","stream":true,"messages":[{"role":"user","content":"Привет"}]}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// sseText joins the content deltas of an SSE body of chat.completion.chunk events.
func sseText(t *testing.T, body string) string {
	t.Helper()
	var text strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &c) == nil {
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
	}
	return text.String()
}

// TestStreamFailingBeforeItsFirstByteFallsBack: GigaChat's stream fails before any text
// reaches the client; YandexGPT answers the whole stream, marked degraded.
func TestStreamFailingBeforeItsFirstByteFallsBack(t *testing.T) {
	tests := []struct {
		name  string
		serve func(*fixture.Server)
	}{
		{"error event first", func(s *fixture.Server) {
			s.Handle(gigachatChat, fixtureOf(t, "gigachat_stream_error_first.http"))
		}},
		{"connection cut before a chunk", func(s *fixture.Server) { s.HandleFunc(gigachatChat, cut()) }},
		{"503 before the stream", func(s *fixture.Server) { s.Handle(gigachatChat, fixtureOf(t, "gigachat/err_503_unavailable.http")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServers(t)
			tt.serve(s.gigachat)
			s.yandex.Handle(yandexPath, fixtureOf(t, "yandex/stream_ok.http"))
			rt := s.runtime(t)
			const want = "Привет! Чем могу помочь?"

			var got emitted
			rep, err := rt.Routes["support-agent"].Stream(t.Context(), chatRequest, got.emit)
			if err != nil {
				t.Fatalf("route stream: %v", err)
			}
			if got.text.String() != want || got.finish != "stop" || got.providers[0] != "yandexgpt" {
				t.Errorf("client got %q (finish %q) from %v, want %q from yandexgpt only", got.text.String(), got.finish, got.providers, want)
			}
			if !rep.Degraded || rep.Provider != "yandexgpt" || rep.Attempts[0].Provider != "gigachat-pro" ||
				rep.Attempts[0].Outcome != afloat.OutcomeUnavailable {
				t.Errorf("reply = %+v", rep)
			}

			resp, body := postStream(t, gatewayOf(t, rt).URL)
			if resp.StatusCode != 200 || resp.Header.Get("X-Afloat-Provider") != "yandexgpt" || resp.Header.Get("X-Afloat-Degraded") != "true" {
				t.Errorf("gateway: %d, provider %q, degraded %q", resp.StatusCode, resp.Header.Get("X-Afloat-Provider"), resp.Header.Get("X-Afloat-Degraded"))
			}
			if sseText(t, body) != want || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Contains(body, "afloat_stream_error") {
				t.Errorf("gateway body does not stream YandexGPT's answer cleanly:\n%s", body)
			}
			if n := len(s.yandex.Requests(yandexPath)); n != 2 {
				t.Errorf("yandex asked %d times, want 2 (route, gateway)", n)
			}
		})
	}
}

// TestStreamCutAfterItsFirstByteEndsWithAnError: GigaChat's stream sends text, then fails;
// no other tier may answer, and the client is told the answer is cut: an error event, never
// [DONE].
func TestStreamCutAfterItsFirstByteEndsWithAnError(t *testing.T) {
	const first = `data: {"choices":[{"delta":{"content":"Пере","role":"assistant"},"index":0}],"created":1741569700,"model":"GigaChat-Pro","object":"chat.completion"}` + "\n\n"
	tests := []struct {
		name  string
		serve func(*fixture.Server)
	}{
		{"error event", func(s *fixture.Server) { s.Handle(gigachatChat, fixtureOf(t, "gigachat/stream_error.http")) }},
		{"connection cut", func(s *fixture.Server) { s.HandleFunc(gigachatChat, cut(first)) }},
		{"body ends before [DONE]", func(s *fixture.Server) { s.Handle(gigachatChat, fixtureOf(t, "gigachat/stream_truncated.http")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServers(t)
			tt.serve(s.gigachat)
			s.yandex.Handle(yandexPath, fixtureOf(t, "yandex/stream_ok.http"))
			rt := s.runtime(t)

			var got emitted
			rep, err := rt.Routes["support-agent"].Stream(t.Context(), chatRequest, got.emit)
			var se *cascade.StreamError
			if !errors.As(err, &se) || se.Provider != "gigachat-pro" || afloat.KindOf(se.Err) != afloat.Unavailable {
				t.Fatalf("route stream = %v, want a *cascade.StreamError from gigachat-pro", err)
			}
			if got.text.Len() == 0 || got.finish != "" || rep == nil || rep.Provider != "gigachat-pro" {
				t.Errorf("client got %q (finish %q), reply %+v; want GigaChat's first text and no finish", got.text.String(), got.finish, rep)
			}

			resp, body := postStream(t, gatewayOf(t, rt).URL)
			if resp.StatusCode != 200 || resp.Header.Get("X-Afloat-Provider") != "gigachat-pro" {
				t.Errorf("gateway: %d, provider %q", resp.StatusCode, resp.Header.Get("X-Afloat-Provider"))
			}
			if sseText(t, body) == "" || !strings.Contains(body, `"type":"afloat_stream_error"`) || strings.Contains(body, "[DONE]") ||
				strings.Contains(body, `"finish_reason":"stop"`) {
				t.Errorf("gateway body does not end with an error event:\n%s", body)
			}
			if n := len(s.yandex.Requests(yandexPath)); n != 0 {
				t.Errorf("yandex asked %d times after the first byte, want never", n)
			}
		})
	}
}

// TestGatewayStreamsEveryAdapter: each adapter's stream reaches an OpenAI client through
// the gateway as one clean chat.completion.chunk stream.
func TestGatewayStreamsEveryAdapter(t *testing.T) {
	tests := []struct {
		name, provider, want string
		serve                func(*servers)
	}{
		{"gigachat", "gigachat-pro", "Здравствуйте! Чем помочь?", func(s *servers) {
			s.gigachat.Handle(gigachatChat, fixtureOf(t, "gigachat/stream_ok.http"))
		}},
		{"yandex", "yandexgpt", "Привет! Чем могу помочь?", func(s *servers) {
			s.gigachat.Handle(gigachatChat, fixtureOf(t, "gigachat/err_401_unauthorized.http"))
			s.yandex.Handle(yandexPath, fixtureOf(t, "yandex/stream_ok.http"))
		}},
		{"openai (vllm)", "t-lite", "Здравствуйте! Чем помочь?", func(s *servers) {
			s.gigachat.Handle(gigachatChat, fixtureOf(t, "gigachat/err_402_payment_required.http"))
			s.yandex.Handle(yandexPath, fixtureOf(t, "yandex/err_429_sessions.http"))
			s.tlite.Handle(tlitePath, fixtureOf(t, "openai/stream_ok.http"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServers(t)
			tt.serve(s)
			resp, body := postStream(t, gatewayOf(t, s.runtime(t)).URL)
			if resp.Header.Get("X-Afloat-Provider") != tt.provider || sseText(t, body) != tt.want || !strings.HasSuffix(body, "data: [DONE]\n\n") {
				t.Errorf("provider %q, body:\n%s\nwant %q from %s", resp.Header.Get("X-Afloat-Provider"), body, tt.want, tt.provider)
			}
		})
	}
}
