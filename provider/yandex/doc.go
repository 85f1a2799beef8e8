// Package yandex is the adapter for Yandex Cloud Foundation Models' native text generation
// API: POST {BaseURL}/foundationModels/v1/completion with a model URI
// ("gpt://<folder>/yandexgpt/latest").
//
// It authenticates with an API key ("Authorization: Api-Key …") or an IAM token
// ("Authorization: Bearer …" with the x-folder-id header), renders messages as text,
// toolCallList and toolResultList, tools as functions, and a json_schema response format as
// jsonSchema. The answer comes back from its "result" wrapper with token counts sent as
// strings; tool calls get synthetic ids (Yandex has none) and their results go back by
// function name. A stream is Yandex's JSON lines, each holding the whole text so far: they
// are turned into deltas. Failures are *afloat.ProviderError classified by HTTP status (and
// for a 429 the period of the quota it names), never by message text; an alternative of
// status ALTERNATIVE_STATUS_CONTENT_FILTER is Refused, with Yandex's text as the reason.
// There is no assistant prefill (Client.Continuation is "none": a request with Continue is
// refused unsent) and no probe: the API has no call that bills nothing.
//
// For Yandex's OpenAI-compatible endpoint use provider/openai with Dialect "yandex".
//
//	ygpt, err := yandex.New(yandex.Config{
//		Name:     "yandexgpt",
//		ModelURI: "gpt://" + folder + "/yandexgpt/latest",
//		APIKey:   afloat.Secret(os.Getenv("YANDEX_API_KEY")), // prints as [redacted]
//	})
//	if err != nil { ... }
//	resp, err := ygpt.Complete(ctx, &afloat.Request{
//		Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Привет"}},
//	})
package yandex
