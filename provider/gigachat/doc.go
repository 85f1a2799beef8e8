// Package gigachat is the adapter for Sber's GigaChat REST API v1: an OAuth token exchange
// (Basic authorization key, RqUID, scope) and POST {BaseURL}/chat/completions with the
// token as a bearer.
//
// The token is fetched on the first call, shared by every call, and refreshed before its
// expires_at (Unix milliseconds); concurrent callers wait for one exchange. A 401 from the
// chat endpoint refreshes the token once and repeats the call; a second 401 is Unusable.
// Failures of the token endpoint are classified as its own: 5xx and timeouts Unavailable,
// 429 Throttled, a rejected key or scope Unusable. Neither the key nor a token ever reaches
// an error or a log line.
//
// Tools are rendered as GigaChat functions with function_call "auto"; a call comes back
// with its arguments as an object and a synthetic id (GigaChat has none), and goes back as
// one assistant function_call per turn, each followed by its {"role":"function"} result.
// A json_schema response format is sent (GigaChat's flat, beta form) only with
// Config.StructuredOutput; otherwise the prompt and the task's contract check carry it.
// There is no assistant prefill (Client.Continuation is "none": a request with Continue is
// refused unsent). Client.Probe reads GET {BaseURL}/models with the shared token.
//
//	giga, err := gigachat.New(gigachat.Config{
//		Name:    "gigachat-pro",
//		AuthKey: afloat.Secret(os.Getenv("GIGACHAT_AUTH_KEY")), // prints as [redacted]
//		Scope:   "GIGACHAT_API_PERS",
//		Model:   "GigaChat-Pro",
//		HTTPClient: client, // httpx.NewTLSClient with the Russian root CA
//	})
//	if err != nil { ... }
//	resp, err := giga.Complete(ctx, &afloat.Request{
//		Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Привет"}},
//	})
package gigachat
