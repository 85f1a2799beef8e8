// Package webhook delivers the answers of the human review queue to the caller's URL
// (review.webhook): when an operator resolves or rejects an item, a store opened with
// review.Options.Outbox marks its delivery pending in the same commit, and a Sender POSTs
// it, signed, retrying with a jittered exponential backoff, and records every attempt in the
// store. A delivery is in the store, not in memory: one the process had no time to make, or
// that waits for a retry, is made after a restart.
//
//	store, err := review.OpenSQLite(ctx, "afloat.db", review.Options{Outbox: true})
//	s, err := webhook.New(webhook.Config{Store: store, URL: "https://tickets.example/afloat", Secret: secret})
//	s.Start()       // polls the store every second until Close
//	defer s.Close() // before the store closes
//	// after an answer: s.Wake() delivers it at once instead of at the next poll
//
// The body is Payload as JSON; X-Afloat-Signature is alerts.Sign's "t=<unix>,v1=<hex
// HMAC-SHA256 over "<t>.<body>">" with the secret, each attempt signed at its own time;
// X-Afloat-Delivery is the item's id, the same on every attempt. A 2xx answer delivers it;
// a transport error, 408, 429 and 5xx are tried again; any other answer (a 4xx, a redirect
// not followed) fails it at once. Delivery is at least once: a receiver drops an id it has
// seen answered.
package webhook
