package faultserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// post sends a chat completions request and returns the response (nil with the error when
// there is none).
func post(t *testing.T, ctx context.Context, s *Server, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return (&http.Transport{}).RoundTrip(req)
}

const (
	plain    = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	streamed = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	prefill  = `{"model":"m","stream":true,"continue_final_message":true,"add_generation_prompt":false,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"p01 p02 "}]}`
)

// sse reads a stream's data payloads and reports whether it ended with [DONE], and the
// read error that ended it, if any.
func sse(body io.Reader) (datas []string, done bool, err error) {
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		datas = append(datas, d)
	}
	return datas, done, sc.Err()
}

// text joins the content deltas of well-formed chunks and counts the malformed ones.
func text(datas []string) (string, int) {
	var b strings.Builder
	bad := 0
	for _, d := range datas {
		var c struct {
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(d), &c) != nil {
			bad++
			continue
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String(), bad
}

func TestModes(t *testing.T) {
	toks := Tokens("p", 1, 6)
	cases := []struct {
		name   string
		fault  Fault
		body   string
		status int
		text   string // the streamed or answered text
		done   bool
		bad    int
		cut    bool // the body ends with a read error
	}{
		{"ok", Fault{}, plain, 200, Text(toks), false, 0, false},
		{"ok streamed", Fault{}, streamed, 200, Text(toks), true, 0, false},
		{"429 with Retry-After", Fault{Mode: Status, Status: 429, RetryAfter: "2"}, plain, 429, "", false, 0, false},
		{"cut after 4", Fault{Mode: Cut, After: 4}, streamed, 200, Text(toks[:4]), false, 0, true},
		{"malformed after 3", Fault{Mode: Malformed, After: 3}, streamed, 200, Text(toks), true, 1, false},
		{"no [DONE]", Fault{Mode: NoDone}, streamed, 200, Text(toks), false, 0, false},
		{"context length", Fault{Mode: ContextLength}, plain, 400, "", false, 0, false},
		{"content policy", Fault{Mode: ContentPolicy, Message: "reason-42"}, plain, 400, "", false, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(t, Config{Model: "fs-model", Tokens: toks, Script: Always(c.fault)})
			resp, err := post(t, context.Background(), s, c.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			switch {
			case c.status != 200:
				var e struct {
					Error struct {
						Message string `json:"message"`
						Code    string `json:"code"`
					} `json:"error"`
				}
				b, _ := io.ReadAll(resp.Body)
				if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
					t.Fatalf("error body %s: %v", b, err)
				}
				if c.fault.Mode == ContentPolicy && (e.Error.Code != "content_policy_violation" || e.Error.Message != "reason-42") {
					t.Errorf("error %+v", e.Error)
				}
				if c.fault.Mode == ContextLength && e.Error.Code != "context_length_exceeded" {
					t.Errorf("error %+v", e.Error)
				}
				if got := resp.Header.Get("Retry-After"); got != c.fault.RetryAfter {
					t.Errorf("Retry-After %q, want %q", got, c.fault.RetryAfter)
				}
			case strings.Contains(c.body, `"stream":true`):
				datas, done, err := sse(resp.Body)
				got, bad := text(datas)
				if got != c.text || done != c.done || bad != c.bad || (err != nil) != c.cut {
					t.Errorf("text %q done %v malformed %d err %v, want %q %v %d cut %v", got, done, bad, err, c.text, c.done, c.bad, c.cut)
				}
			default:
				var m struct {
					Model   string `json:"model"`
					Choices []struct {
						Message struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
				}
				b, _ := io.ReadAll(resp.Body)
				if err := json.Unmarshal(b, &m); err != nil || len(m.Choices) != 1 || m.Choices[0].Message.Content != c.text || m.Model != "fs-model" {
					t.Errorf("answer %s (%v), want %q from fs-model", b, err, c.text)
				}
			}
			log := s.Settle(t, 5*time.Second)
			if len(log) != 1 || log[0].Fault.Mode != c.fault.Mode || log[0].N != 1 {
				t.Errorf("log %v, want one request answered %s", log, c.fault.Mode)
			}
		})
	}
}

func TestResetBeforeHeaders(t *testing.T) {
	s := New(t, Config{Model: "m", Script: Sequence(Fault{Mode: Reset}, Fault{})})
	_, err := post(t, context.Background(), s, plain)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("first request: %v, want a connection reset", err)
	}
	resp, err := post(t, context.Background(), s, plain)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("second request: %v %v, want 200", resp, err)
	}
	resp.Body.Close()
	if log := s.Settle(t, 5*time.Second); len(log.Chat()) != 2 || log[1].N != 2 {
		t.Errorf("log %v", log)
	}
}

// TestHoldsEndWithTheClient: a hang and a stall end when the client leaves, and say so.
func TestHoldsEndWithTheClient(t *testing.T) {
	for _, f := range []Fault{{Mode: Hang}, {Mode: Stall, After: 2}, {Mode: SlowFirstToken, Delay: time.Minute}} {
		t.Run(f.Mode.String(), func(t *testing.T) {
			s := New(t, Config{Model: "m", Script: Always(f)})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			resp, err := post(t, ctx, s, streamed)
			if err == nil {
				_, _, err = sse(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("the request ended without an error")
			}
			log := s.Settle(t, 5*time.Second)
			if len(log) != 1 || !log[0].ClientLeft || log[0].Ended.Sub(log[0].At) > 2*time.Second {
				t.Errorf("log %v, want one request the client left after about 200ms", log)
			}
		})
	}
}

func TestPrefill(t *testing.T) {
	s := New(t, Config{Model: "m", RejectPrefill: true})
	resp, err := post(t, context.Background(), s, prefill)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("status %d, want 400", resp.StatusCode)
	}
	log := s.Settle(t, 5*time.Second)
	if len(log.Continuations()) != 1 || log[0].Prefill() != "p01 p02 " || !log[0].ContinueFinalMessage ||
		log[0].AddGenerationPrompt == nil || *log[0].AddGenerationPrompt {
		t.Errorf("log %v, want one continuation of %q", log, "p01 p02 ")
	}
}

func TestModelsProbe(t *testing.T) {
	s := New(t, Config{Model: "m", Models: Sequence(Fault{Mode: Status, Status: 503}, Fault{})})
	for i, want := range []int{503, 200} {
		resp, err := http.Get(s.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("probe %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if log := s.Settle(t, 5*time.Second); len(log.Models()) != 2 || len(log.Chat()) != 0 {
		t.Errorf("log %v", log)
	}
}
