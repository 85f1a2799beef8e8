package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	chatBody   = `{"model": "%s", "messages": [{"role": "user", "content": "Where is my order?"}]}`
	streamBody = `{"model": "%s", "stream": true, "messages": [{"role": "user", "content": "Tell me a long story."}]}`
	taskBody   = `{"input": {"subject": "Login page down", "message": "The site does not open since this morning."}}`
)

// chatCall posts a chat completion to url for the route (the mock ignores the model) and
// reads the whole answer; wantProvider, when set, must be the X-Afloat-Provider of the answer.
func chatCall(c *http.Client, url, route, wantProvider string) Call {
	body := []byte(fmt.Sprintf(chatBody, route))
	return func(ctx context.Context, _ time.Time) Outcome {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return Outcome{Err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return Outcome{Err: err}
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		o := Outcome{Source: resp.Header.Get("X-Afloat-Source"), Provider: resp.Header.Get("X-Afloat-Provider")}
		switch {
		case err != nil:
			o.Err = err
		case resp.StatusCode != http.StatusOK:
			o.Err = fmt.Errorf("status %d", resp.StatusCode)
		case wantProvider != "" && o.Provider != wantProvider:
			o.Err = fmt.Errorf("%w: answered by %q, not %q", errBody, o.Provider, wantProvider)
		}
		return o
	}
}

// envelope is the part of a task answer the scenarios read.
type envelope struct {
	Source   string `json:"source"`
	Provider string `json:"provider"`
	Tier     *int   `json:"tier"`
	Attempts []struct {
		Provider  string `json:"provider"`
		Outcome   string `json:"outcome"`
		LatencyMS int64  `json:"latency_ms"`
	} `json:"attempts"`
}

// taskCall calls the triage task on the gateway at base and reads who answered and how
// long the call spent on the provider named primary.
func taskCall(c *http.Client, base string) Call {
	url := base + "/v1/tasks/triage"
	return func(ctx context.Context, _ time.Time) Outcome {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(taskBody)))
		if err != nil {
			return Outcome{Err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return Outcome{Err: err}
		}
		defer resp.Body.Close()
		var env envelope
		err = json.NewDecoder(resp.Body).Decode(&env)
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return Outcome{Err: fmt.Errorf("status %d", resp.StatusCode)}
		}
		if err != nil {
			return Outcome{Err: err}
		}
		o := Outcome{Source: env.Source, Provider: env.Provider, Tier: -1}
		if env.Tier != nil {
			o.Tier = *env.Tier
		}
		for _, a := range env.Attempts {
			if a.Provider == "primary" {
				o.Primary += time.Duration(a.LatencyMS) * time.Millisecond
				o.PrimaryOutcome = a.Outcome
			}
		}
		return o
	}
}

// streamCall posts a streamed chat completion and reads it to its end: TTFB is the time
// from the intended send time to the first content chunk, Chunks the content chunks, and a
// stream that does not end with [DONE] after want chunks is an error.
func streamCall(c *http.Client, url, route string, want int) Call {
	body := []byte(fmt.Sprintf(streamBody, route))
	return func(ctx context.Context, intended time.Time) Outcome {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return Outcome{Err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return Outcome{Err: err}
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return Outcome{Err: fmt.Errorf("status %d", resp.StatusCode)}
		}
		var o Outcome
		br := bufio.NewReader(resp.Body)
		done := false
		for {
			line, err := br.ReadSlice('\n')
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				switch {
				case bytes.HasPrefix(data, []byte("[DONE]")):
					done = true
				case bytes.Contains(data, []byte(`"content":"tok`)):
					if o.Chunks == 0 {
						o.TTFB = time.Since(intended)
					}
					o.Chunks++
				case bytes.Contains(data, []byte("afloat_stream_error")):
					o.Err = fmt.Errorf("%w: %s", errBody, bytes.TrimSpace(data))
				}
			}
			if err != nil {
				if err != io.EOF && o.Err == nil {
					o.Err = err
				}
				break
			}
		}
		if o.Err == nil && (!done || o.Chunks != want) {
			o.Err = fmt.Errorf("%w: %d chunks of %d, [DONE] %v", errBody, o.Chunks, want, done)
		}
		return o
	}
}
