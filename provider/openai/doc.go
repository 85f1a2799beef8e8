// Package openai is the adapter for the OpenAI Chat Completions API and every server that
// speaks it: OpenAI itself, vLLM, llama.cpp's llama-server, Ollama's /v1, OpenRouter and
// Yandex's OpenAI-compatible endpoint.
//
// It translates a canonical afloat.Request into POST {BaseURL}/chat/completions, and the
// answer back; it classifies every failure as a *afloat.ProviderError by HTTP status and the
// body's error type or code, never by message text. It does not retry, break or fall back:
// the cascade composes that.
//
// Config.Dialect renders requests around a server's quirks: llama.cpp's json_schema shape,
// Ollama's missing tool_choice, Yandex's tool_choice of auto and none only (see the
// Dialect constants), and whether a cut answer can be continued (Client.Continuation:
// vLLM's continue_final_message and llama.cpp's prefill of a final assistant message; the
// others refuse a request with Continue unsent). A content-policy 400
// (content_policy_violation, content_filter) and a content_filter finish reason are
// Refused. Client.Probe reads GET {BaseURL}/models, which bills nothing.
//
// A self-hosted emergency tier:
//
//	tlite, err := openai.New(openai.Config{
//		Name:    "t-lite",
//		BaseURL: "http://127.0.0.1:8000/v1",
//		Model:   "t-tech/T-lite-it-1.0",
//		Dialect: openai.DialectVLLM,
//	})
//	if err != nil { ... }
//	resp, err := tlite.Complete(ctx, &afloat.Request{
//		Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Привет"}},
//	})
//	if afloat.KindOf(err) == afloat.Throttled { ... }
package openai
