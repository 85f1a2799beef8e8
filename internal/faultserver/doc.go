// Package faultserver is a scripted OpenAI-compatible upstream for tests: POST
// /v1/chat/completions (a JSON answer, or server-sent events ending with [DONE]) and GET
// /v1/models, on 127.0.0.1, where each request meets the fault its script names — an error
// status with or without Retry-After, a TCP reset before the headers, no answer at all, a
// slow first token, a stream cut or stalled after N tokens, a malformed chunk, a stream
// without [DONE], the 400s of a context too long, of a content policy and of an assistant
// prefill the server cannot continue — or a healthy answer whose "model" names the server's
// model. It records every request (when it came, its body, whether it streamed, its messages,
// how its answer went), so that a test can assert what each upstream saw: attempt counts,
// their spacing, a continuation's prefill.
//
//	primary := faultserver.New(t, faultserver.Config{
//		Model:  "primary-model",
//		Tokens: faultserver.Tokens("p", 1, 60),
//		Script: faultserver.Sequence(
//			faultserver.Fault{Mode: faultserver.Status, Status: 429, RetryAfter: "1"},
//			faultserver.Fault{}, // then healthy
//		),
//	})
//	// point a provider at primary.URL + "/v1", make a call, then:
//	calls := primary.Settle(t, 5*time.Second).Chat()
//	if len(calls) != 2 || calls[1].At.Sub(calls[0].At) < time.Second { ... }
//
// Every wait of the server (a hang, a stall, a slow token) ends when the client leaves, and
// at the latest after Config.MaxHold, so a test never hangs on it. The server is closed when
// the test ends.
package faultserver
