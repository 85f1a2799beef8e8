package faultserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Message is one message of a chat completions request.
type Message struct {
	Role string
	// Content is the message's text: a string content, or its text parts joined.
	Content string
}

// Request is one request the server received, and how the server answered it. The fields
// after Fault are filled in as the answer goes; read them once Server.Settle has returned.
type Request struct {
	// N is the request's number among the server's requests to the same endpoint (chat
	// completions or models), from 1.
	N            int
	Method, Path string
	// At is when the request's body had been read.
	At     time.Time
	Header map[string][]string
	Body   []byte

	// Model, Stream, IncludeUsage and Messages are read from a chat completions body.
	Model        string
	Stream       bool
	IncludeUsage bool
	Messages     []Message
	// ContinueFinalMessage and AddGenerationPrompt are vLLM's continuation parameters: with
	// continue_final_message true (and add_generation_prompt false) the model continues the
	// last, assistant message instead of answering anew.
	ContinueFinalMessage bool
	AddGenerationPrompt  *bool

	// Fault is the answer the server chose.
	Fault Fault
	// Sent is how many tokens of the answer the server wrote.
	Sent int
	// LastWrite is when the server last wrote and flushed a byte of the answer; zero when
	// it wrote none.
	LastWrite time.Time
	// Ended is when the server was done with the request.
	Ended time.Time
	// ClientLeft reports that the client went away while the server still had something
	// to send or was holding the connection.
	ClientLeft bool
}

// Chat reports whether r is a chat completions request.
func (r *Request) Chat() bool { return strings.HasSuffix(r.Path, "/chat/completions") }

// Last returns the request's last message, or the zero Message.
func (r *Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// Continues reports whether the request asks to continue an answer: its last message is the
// assistant's (an assistant prefill).
func (r *Request) Continues() bool { return r.Last().Role == "assistant" }

// Prefill returns the text of the assistant message the request asks to continue, or "".
func (r *Request) Prefill() string {
	if !r.Continues() {
		return ""
	}
	return r.Last().Content
}

// String is a short line of the request for failure messages.
func (r Request) String() string {
	var roles []string
	for _, m := range r.Messages {
		roles = append(roles, m.Role)
	}
	s := fmt.Sprintf("#%d %s %s at %s stream=%v messages=%v fault=%s sent=%d", r.N, r.Method, r.Path,
		r.At.Format("15:04:05.000"), r.Stream, roles, r.Fault.Mode, r.Sent)
	if r.ContinueFinalMessage {
		s += " continue_final_message"
	}
	if r.ClientLeft {
		s += fmt.Sprintf(" client-left-after=%v", r.Ended.Sub(r.At).Round(time.Millisecond))
	}
	return s
}

// chatBody is the part of a chat completions request the server reads.
type chatBody struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	ContinueFinalMessage bool  `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
}

// decodeChat fills r's chat fields from its body.
func (r *Request) decodeChat() error {
	var b chatBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		return err
	}
	r.Model, r.Stream = b.Model, b.Stream
	r.IncludeUsage = b.StreamOptions != nil && b.StreamOptions.IncludeUsage
	r.ContinueFinalMessage, r.AddGenerationPrompt = b.ContinueFinalMessage, b.AddGenerationPrompt
	for _, m := range b.Messages {
		r.Messages = append(r.Messages, Message{Role: m.Role, Content: contentText(m.Content)})
	}
	return nil
}

// contentText reads a message's content: a string, or an array of text parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Log is the requests of a server, in the order they arrived.
type Log []Request

// Chat returns the chat completions requests.
func (l Log) Chat() Log { return l.filter((*Request).Chat) }

// Models returns the models list requests (background probes).
func (l Log) Models() Log { return l.filter(func(r *Request) bool { return !r.Chat() }) }

// Continuations returns the requests that ask to continue an assistant prefill.
func (l Log) Continuations() Log { return l.filter((*Request).Continues) }

func (l Log) filter(keep func(*Request) bool) Log {
	var out Log
	for i := range l {
		if keep(&l[i]) {
			out = append(out, l[i])
		}
	}
	return out
}

// Gaps returns the time between each request's arrival and the next one's.
func (l Log) Gaps() []time.Duration {
	var out []time.Duration
	for i := 1; i < len(l); i++ {
		out = append(out, l[i].At.Sub(l[i-1].At))
	}
	return out
}

// Between returns the requests that arrived in [from, to).
func (l Log) Between(from, to time.Time) Log {
	return l.filter(func(r *Request) bool { return !r.At.Before(from) && r.At.Before(to) })
}

// String lists the requests, one a line, for failure messages.
func (l Log) String() string {
	if len(l) == 0 {
		return "(no requests)"
	}
	var b strings.Builder
	for _, r := range l {
		b.WriteString("\n\t")
		b.WriteString(r.String())
	}
	return b.String()
}
