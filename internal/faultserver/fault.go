package faultserver

import (
	"fmt"
	"strings"
	"time"
)

// Mode is how the server answers one request.
type Mode int

const (
	// OK is a healthy answer: the tokens as one JSON message, or streamed one chunk per token,
	// then a finish chunk, a usage chunk when the request asked for it, and [DONE].
	OK Mode = iota
	// Status answers Fault.Status with an OpenAI-style error body, and a Retry-After header
	// when Fault.RetryAfter is set.
	Status
	// Reset reads the request, then closes the connection with a TCP reset before any byte of
	// the answer.
	Reset
	// Hang never answers: it holds the connection, without headers, until the client leaves
	// (or Config.MaxHold).
	Hang
	// SlowFirstToken sends the headers and a role-only chunk at once, and the first token
	// after Fault.Delay; the rest follows as OK's. Unstreamed, the whole answer waits
	// Fault.Delay.
	SlowFirstToken
	// Cut streams Fault.After tokens, then drops the connection mid-body: no finish reason,
	// no [DONE]. Unstreamed, it sends half of the JSON answer and drops the connection.
	Cut
	// Stall streams Fault.After tokens, then holds the connection open without a byte until
	// the client leaves (or Fault.Delay, or Config.MaxHold), and then drops it.
	Stall
	// Malformed streams Fault.After tokens, then a data: line that is not JSON, then the rest
	// as OK's, [DONE] included. Unstreamed, the 200 body is not JSON.
	Malformed
	// NoDone streams every token, the finish chunk and the usage chunk, and ends the body
	// without [DONE]; with Fault.Hold it first holds the connection open that long (or until
	// the client leaves). Unstreamed, it is OK.
	NoDone
	// ContextLength answers 400 with OpenAI's context_length_exceeded error.
	ContextLength
	// ContentPolicy answers 400 with the code content_policy_violation and Fault.Message
	// (a default when empty) as the provider's reason.
	ContentPolicy
	// PrefillUnsupported answers 400: the server cannot continue a final assistant message
	// (vLLM's continue_final_message, an assistant prefill).
	PrefillUnsupported
)

var modeNames = [...]string{"ok", "status", "reset", "hang", "slow_first_token", "cut", "stall",
	"malformed", "no_done", "context_length", "content_policy", "prefill_unsupported"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return fmt.Sprintf("mode(%d)", int(m))
	}
	return modeNames[m]
}

// Fault is the answer to one request. The zero Fault is a healthy answer with the server's
// tokens.
type Fault struct {
	Mode Mode
	// Status is the HTTP status of Mode Status; 0 means 503.
	Status int
	// RetryAfter is the Retry-After header of Mode Status ("2"); "" sends none.
	RetryAfter string
	// Tokens is the answer; nil means Config.Tokens.
	Tokens []string
	// After is how many tokens Cut, Stall and Malformed stream before their fault.
	After int
	// Delay is SlowFirstToken's wait before the first token, and Stall's longest hold.
	// 0 means Config.MaxHold for Stall and none for SlowFirstToken.
	Delay time.Duration
	// Gap is the pause between two tokens of a stream; 0 means none.
	Gap time.Duration
	// Hold is how long NoDone keeps the connection open after its last chunk; 0 means none.
	Hold time.Duration
	// Message is the error message of Status, ContextLength, ContentPolicy and
	// PrefillUnsupported; "" means a default naming the fault.
	Message string
	// PromptTokens is the usage's prompt_tokens; 0 means Config.PromptTokens.
	PromptTokens int
}

// Script decides the answer to each request from the request itself: Request.N is its
// number among the server's requests of the same endpoint, from 1.
type Script func(r *Request) Fault

// Always answers every request with f.
func Always(f Fault) Script { return func(*Request) Fault { return f } }

// Sequence answers request n with fs[n-1]; the last fault answers every request after it.
// With no faults every answer is healthy.
func Sequence(fs ...Fault) Script {
	return func(r *Request) Fault {
		if len(fs) == 0 {
			return Fault{}
		}
		return fs[min(r.N, len(fs))-1]
	}
}

// Tokens returns the tokens prefix+NN+" " for NN from..to ("p01 ", "p02 ", …): an answer
// whose every part says where it came from and which place it holds.
func Tokens(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%02d ", prefix, i))
	}
	return out
}

// Text joins tokens into the text they make.
func Text(tokens []string) string { return strings.Join(tokens, "") }
