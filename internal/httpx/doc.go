// Package httpx holds the HTTP plumbing shared by every provider adapter: a client tuned for
// calls to model APIs (with extra trusted roots where a provider needs them), the building
// and sending of a JSON request, the reading of Retry-After, of server-sent events and JSON
// lines, the quoting of a provider's text into an error without its credentials, and the
// *afloat.ProviderError of each way a call fails: no response at all (TransportError), a
// status that is not 2xx (StatusKind, StatusCause), a 2xx whose body is no answer
// (BodyError, DecodeError, ArgumentsError), a request that cannot be sent (ContractError),
// a content-policy refusal (RefusedError). Stream runs the Recv loop of a streamed answer
// around an adapter's Decoder, skipping and counting the events it finds Malformed.
// NewGetRequest and ReadProbe serve the adapters' probes (a models list); CheckContinue,
// NoContinuation and the Continue constants their assistant prefill (afloat.Request's
// Continue).
//
// Each vendor's own decisions stay in its adapter: the shape of its error body, its error
// codes, and which of its 429s name a quota that no wait restores. An adapter builds its
// client once and sends each call like this:
//
//	client, err := httpx.NewTLSClient(httpx.Timeouts{Connect: time.Second},
//		httpx.TLS{CAFile: "certs/russian_trusted_root_ca.pem"})
//	if err != nil { ... }
//	req, err := httpx.NewJSONRequest(ctx, endpoint, payload, false)
//	if err != nil {
//		return nil, httpx.ContractError("gigachat-pro", err)
//	}
//	resp, err := client.Do(req)
//	if err != nil {
//		return nil, httpx.TransportError("gigachat-pro", err)
//	}
//	resp, err = httpx.CheckStatus(resp, statusError) // the adapter's reading of a refusal
//	if err != nil {
//		return nil, err
//	}
//	body, err := httpx.ReadBody("gigachat-pro", resp)
package httpx
