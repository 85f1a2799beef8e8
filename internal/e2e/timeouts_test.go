package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/jonboulle/clockwork"
)

// initialRead is the read timeout before any latency was measured (defaults.timeouts.initial):
// the cascade's bound on the wait for a stream's first chunk. streamIdle bounds the gaps
// between chunks (timeouts.stream_idle's default).
const (
	initialRead = 2 * time.Second
	streamIdle  = 10 * time.Second
)

// stall is a GigaChat stream that sends the events, then nothing until the call is cut; it
// tells arrived when it stalls.
func stall(arrived chan<- struct{}, events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			fmt.Fprint(w, e)
		}
		w.(http.Flusher).Flush()
		arrived <- struct{}{}
		<-r.Context().Done()
	}
}

type streamed struct {
	rep *cascade.Reply
	err error
}

// TestStreamTimeoutsOverRealAdapters drives the cascade's stream timeouts on a fake clock:
// a GigaChat stream that never sends its first chunk is cut after the read timeout and
// YandexGPT answers; one that stalls after its first chunk is cut after the stream's idle
// timeout, and ends in a *cascade.StreamError.
func TestStreamTimeoutsOverRealAdapters(t *testing.T) {
	const first = `data: {"choices":[{"delta":{"content":"Пере","role":"assistant"},"index":0}],"model":"GigaChat-Pro","object":"chat.completion"}` + "\n\n"
	tests := []struct {
		name     string
		events   []string
		wantCut  bool // the stream is cut after its first chunk
		provider string
	}{
		{name: "no first chunk: falls back", provider: "yandexgpt"},
		{name: "stalls after the first chunk: cut", events: []string{first}, wantCut: true, provider: "gigachat-pro"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clockwork.NewFakeClock()
			s := newServers(t)
			arrived := make(chan struct{}, 1)
			s.gigachat.HandleFunc(gigachatChat, stall(arrived, tt.events...))
			s.yandex.Handle(yandexPath, fixtureOf(t, "yandex/stream_ok.http"))
			rt := s.runtimeOn(t, clk)

			chunks := make(chan string, 100)
			done := make(chan streamed, 1)
			go func() {
				rep, err := rt.Routes["support-agent"].Stream(t.Context(), chatRequest, func(p string, _ int, c afloat.Chunk) error {
					chunks <- p + ":" + c.Delta
					return nil
				})
				done <- streamed{rep, err}
			}()
			within(t, arrived)
			if tt.wantCut {
				if got := within(t, chunks); got != "gigachat-pro:Пере" {
					t.Fatalf("first chunk = %q", got)
				}
			}
			// The call's budget and the stream's own timer are armed: let its timeout pass.
			if err := clk.BlockUntilContext(t.Context(), 2); err != nil {
				t.Fatal(err)
			}
			if tt.wantCut {
				clk.Advance(streamIdle)
			} else {
				clk.Advance(initialRead)
			}
			res := within(t, done)

			var se *cascade.StreamError
			switch {
			case tt.wantCut && (!errors.As(res.err, &se) || !afloat.IsTimeout(se.Err)):
				t.Fatalf("stream = %v, want a *cascade.StreamError that timed out", res.err)
			case !tt.wantCut && res.err != nil:
				t.Fatalf("stream = %v, want YandexGPT's answer", res.err)
			}
			if res.rep.Provider != tt.provider || res.rep.Attempts[0].Outcome != afloat.OutcomeTimeout {
				t.Errorf("reply from %s, attempts %+v; want %s after a gigachat-pro timeout", res.rep.Provider, res.rep.Attempts, tt.provider)
			}
		})
	}
}

// within receives from ch, failing t if nothing comes for a long while: a guard against a
// hang, never a wait for a state.
func within[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("nothing came for a minute")
		panic("unreachable")
	}
}
