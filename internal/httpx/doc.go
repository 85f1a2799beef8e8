// Package httpx holds the HTTP plumbing shared by every provider adapter: a client tuned for
// calls to model APIs (with extra trusted roots where a provider needs them), the reading of
// Retry-After, of server-sent events and JSON lines, the quoting of a provider's text into an
// error without its credentials, and the classification of a transport failure (no response
// at all) as an unavailable provider.
//
// An adapter builds its client once and turns every error of http.Client.Do into a
// *afloat.ProviderError:
//
//	client, err := httpx.NewTLSClient(httpx.Timeouts{Connect: time.Second},
//		httpx.TLS{CAFile: "certs/russian_trusted_root_ca.pem"})
//	if err != nil { ... }
//	resp, err := client.Do(req)
//	if err != nil {
//		return nil, httpx.TransportError("gigachat-pro", err)
//	}
//	wait := httpx.RetryAfter(resp.Header, clock.Now())
package httpx
