package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/afloat-dev/afloat"
)

const (
	// MaxBody bounds a whole answer read into memory; a larger one is treated as broken.
	MaxBody = 16 << 20
	// MaxErrorBody bounds what is read of an error response: its class needs only the head.
	MaxErrorBody = 64 << 10
)

// AbsURL returns raw, or def when raw is empty, checked to be an absolute http(s) URL. The
// error quotes the URL, which must therefore hold no credentials.
func AbsURL(raw, def string) (string, error) {
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute http(s) url", raw)
	}
	return raw, nil
}

// NewJSONRequest builds a POST of a JSON payload to url, accepting server-sent events when
// stream is set and JSON otherwise. The caller adds its credentials.
func NewJSONRequest(ctx context.Context, url string, payload []byte, stream bool) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	// Room for these, the credentials, a request id and a trace context without growing.
	req.Header = make(http.Header, 6)
	req.Header["Content-Type"] = jsonValue
	injectTrace(ctx, req.Header)
	if stream {
		req.Header["Accept"] = eventStreamValue
	} else {
		req.Header["Accept"] = jsonValue
	}
	return req, nil
}

// jsonValue and eventStreamValue are header values set by assignment (the keys are
// canonical), allocated once: nothing on the way to the wire changes a value in place.
var (
	jsonValue        = []string{"application/json"}
	eventStreamValue = []string{"text/event-stream"}
)

// NewGetRequest builds a GET of url accepting JSON, for a probe of a provider (its models
// list). The caller adds its credentials.
func NewGetRequest(ctx context.Context, url string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	injectTrace(ctx, req.Header)
	return req, nil
}

// errProbeBody: a probe's 2xx answer that is not JSON (a proxy's or portal's page).
var errProbeBody = errors.New("probe: response is not json")

// ReadProbe reads and closes the 2xx answer of a probe. A JSON body (whatever it lists) says
// the provider answers: nil. A failed read is a TransportError, and a body that is not JSON
// an Unavailable BodyError: what answered is not the provider.
func ReadProbe(provider string, resp *http.Response) error {
	body, err := ReadBody(provider, resp)
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return BodyError(provider, resp.StatusCode, errProbeBody)
	}
	return nil
}

// Send makes hreq on client and returns the response when its status is 2xx; a transport
// failure is TransportError's, any other status statusError's (see CheckStatus).
func Send(client *http.Client, provider string, hreq *http.Request, statusError func(status int, h http.Header, body []byte) *afloat.ProviderError) (*http.Response, error) {
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, TransportError(provider, err)
	}
	return CheckStatus(resp, statusError)
}

// CheckStatus returns resp when its status is 2xx, for the caller to read and close. Any
// other response is drained of its head (at most MaxErrorBody bytes), closed, and returned
// as the error statusError makes of its status, headers and head.
func CheckStatus(resp *http.Response, statusError func(status int, h http.Header, body []byte) *afloat.ProviderError) (*http.Response, error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	return nil, statusError(resp.StatusCode, resp.Header, body)
}

// ReadBody reads and closes the body of a 2xx response. A read that fails is a
// TransportError; a body over MaxBody bytes is a BodyError.
func ReadBody(provider string, resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, TransportError(provider, err)
	}
	if len(body) > MaxBody {
		return nil, BodyError(provider, resp.StatusCode, fmt.Errorf("response body exceeds %d bytes", MaxBody))
	}
	return body, nil
}

// EncodeBody renders a request body as JSON. <, > and & are written as they are, not escaped
// for HTML: the text goes to a model, which should read what the user wrote. An error (a
// value that cannot be JSON, such as tool parameters that are not) says "encode request".
func EncodeBody(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return buf.Bytes(), nil
}
