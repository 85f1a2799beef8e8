// Package sdktest reads afloat's chat completions with the official OpenAI SDKs — openai-go
// and the Node `openai` package — to show that a stream afloat rescued (cut on the primary
// after 40 tokens, continued on the backup from the partial text) is, to a client built on
// them, one normal completion: the whole text, finish reason stop, no exception. The gateway
// runs in process over two local fault servers (internal/faultserver).
//
//	go test ./internal/sdktest
//
// The Node test installs the pinned `openai` package from the npm registry into a temporary
// folder; without node and npm it skips, and under CI=true it fails instead. The package has
// no code of its own.
package sdktest
