// Package e2e holds black-box tests of afloat over its real provider adapters: a config
// whose providers point at local servers replaying each provider's wire formats, built into
// a runtime and driven through the cascade and the gateway's HTTP handler, in process.
//
//	go test ./internal/e2e
//
// They show what no adapter's own test can: a GigaChat outage answered by YandexGPT with a
// normalized result marked degraded, a stream that fails before its first byte falling back
// to the next tier, and a stream cut after it ending with an error event, never a clean
// finish. The package has no code of its own.
package e2e
