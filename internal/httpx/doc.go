// Package httpx holds the HTTP plumbing shared by every provider adapter: a client tuned for
// calls to model APIs, the reading of Retry-After, and the classification of a transport
// failure (no response at all) as an unavailable provider.
//
// An adapter builds its client once and turns every error of http.Client.Do into a
// *afloat.ProviderError:
//
//	client := httpx.NewClient(httpx.Timeouts{Connect: time.Second})
//	resp, err := client.Do(req)
//	if err != nil {
//		return nil, httpx.TransportError("t-lite", err)
//	}
//	wait := httpx.RetryAfter(resp.Header, clock.Now())
package httpx
