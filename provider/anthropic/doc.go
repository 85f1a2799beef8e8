// Package anthropic is the adapter for Anthropic's Messages API (POST {BaseURL}/messages).
//
// It translates a canonical afloat.Request into the Messages format (system messages lifted
// to the top-level system field, tool results sent back as tool_result blocks in a user turn,
// tools as input_schema, a json_schema response format as one forced tool whose input becomes
// the answer's text) and the answer back. Every failure is a *afloat.ProviderError classified
// by HTTP status and the body's error type, never by message text: 529 overloaded is
// Unavailable, a spend limit is Unusable, a stop reason of refusal is Refused. Streams are
// read from Anthropic's events; an error event inside a 200 stream is Unavailable. A final
// assistant message is a prefill the API continues (Client.Continuation is "prefill"): it is
// sent without its trailing white space, and the answer is what the model added.
// Client.Probe reads GET {BaseURL}/models, which bills nothing. It does not retry, break or
// fall back: the cascade composes that.
//
//	claude, err := anthropic.New(anthropic.Config{
//		Name:   "claude",
//		APIKey: afloat.Secret(os.Getenv("ANTHROPIC_API_KEY")), // prints as [redacted]
//		Model:  "claude-sonnet-4-5",
//	})
//	if err != nil { ... }
//	resp, err := claude.Complete(ctx, &afloat.Request{
//		Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Привет"}},
//	})
package anthropic
