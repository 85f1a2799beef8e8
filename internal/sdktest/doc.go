// Package sdktest reads afloat's chat completions with the official OpenAI SDKs — openai-go
// and the Node `openai` package — to show that a stream afloat rescued (cut on the primary
// after 40 tokens, continued on the backup from the partial text) is, to a client built on
// them, one normal completion: the whole text, finish reason stop, no exception. The gateway
// runs in process over two local fault servers (internal/faultserver).
//
//	go test ./internal/sdktest
//
// It also shows afloat's front doors to apps written for a vendor, which change only their
// base URL: the Node `openai` package sending an OpenAI model name that is an alias of a
// route, and Anthropic's SDKs — the Node `@anthropic-ai/sdk` package and anthropic-sdk-go —
// against /v1/messages: a plain message, streams, a tool round trip, and the error of an
// exhausted route, raised as the SDKs' overload error after one request (their default
// retries do not come back).
//
// The Node tests install the pinned packages from the npm registry into temporary folders,
// with npm ci from the lockfiles under testdata (every transitive package's version and
// integrity hash; refresh one with npm install --package-lock-only after changing its
// package.json); without node and npm they skip, and under CI=true they fail instead. The
// package has no code of its own.
package sdktest
