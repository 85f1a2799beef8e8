package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
	"github.com/jonboulle/clockwork"
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in errors and metrics ("claude"). "" means "anthropic".
	Name string
	// BaseURL is the API root; requests go to BaseURL + "/messages". "" means
	// https://api.anthropic.com/v1.
	BaseURL string
	// APIKey is sent as "x-api-key"; required. It prints and logs as "[redacted]".
	APIKey afloat.Secret
	// Model is the model of every request that names none. "" requires each Request to set
	// Model.
	Model string
	// MaxTokens caps an answer whose Request leaves MaxTokens at 0 (the API requires a cap).
	// 0 means 4096.
	MaxTokens int
	// Version is the "anthropic-version" header. "" means 2023-06-01.
	Version string
	// Headers are extra request headers ("anthropic-beta"). They are set last, so they may
	// replace a default header. nil means none.
	Headers map[string]string
	// HTTPClient sends the requests. nil means httpx.NewClient(httpx.Timeouts{}).
	HTTPClient *http.Client
	// Clock turns an HTTP-date Retry-After into a wait. nil means the real clock.
	Clock clockwork.Clock
}

// Defaults of Config's empty fields.
const (
	DefaultBaseURL   = "https://api.anthropic.com/v1"
	DefaultVersion   = "2023-06-01"
	DefaultMaxTokens = 4096
	defaultName      = "anthropic"
)

// Client calls the Messages API. It implements afloat.Provider, afloat.Streamer and
// afloat.Prober, and is safe for concurrent use.
type Client struct {
	name      string
	endpoint  string
	models    string // the models list, for Probe
	apiKey    afloat.Secret
	model     string
	maxTokens int
	version   string
	headers   http.Header
	secrets   []string // the key and every configured header value: never quoted
	http      *http.Client
	clock     clockwork.Clock
}

var (
	_ afloat.Provider = (*Client)(nil)
	_ afloat.Streamer = (*Client)(nil)
	_ afloat.Prober   = (*Client)(nil)
)

// New checks cfg and returns a Client. Its errors never quote the key.
func New(cfg Config) (*Client, error) {
	c := &Client{
		name: cfg.Name, apiKey: cfg.APIKey, model: cfg.Model, maxTokens: cfg.MaxTokens,
		version: cfg.Version, http: cfg.HTTPClient, clock: cfg.Clock,
	}
	if c.name == "" {
		c.name = defaultName
	}
	if c.version == "" {
		c.version = DefaultVersion
	}
	if c.maxTokens == 0 {
		c.maxTokens = DefaultMaxTokens
	}
	if c.maxTokens < 0 {
		return nil, fmt.Errorf("anthropic: %s: max tokens %d is negative", c.name, c.maxTokens)
	}
	base, err := httpx.AbsURL(cfg.BaseURL, DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %s: base url %w", c.name, err)
	}
	c.endpoint = strings.TrimRight(base, "/") + "/messages"
	c.models = strings.TrimRight(base, "/") + "/models"
	switch {
	case cfg.APIKey == "":
		return nil, fmt.Errorf("anthropic: %s: api key is required", c.name)
	case httpx.HasControl(cfg.APIKey.Reveal()):
		return nil, fmt.Errorf("anthropic: %s: api key holds a control character", c.name)
	case httpx.HasControl(c.version):
		return nil, fmt.Errorf("anthropic: %s: version holds a control character", c.name)
	}
	if c.headers, err = httpx.Headers(cfg.Headers); err != nil {
		return nil, fmt.Errorf("anthropic: %s: %w", c.name, err)
	}
	c.secrets = httpx.Secrets(c.headers, c.apiKey.Reveal())
	if c.http == nil {
		c.http = httpx.NewClient(httpx.Timeouts{})
	}
	if c.clock == nil {
		c.clock = clockwork.NewRealClock()
	}
	return c, nil
}

// Name returns the provider's name as it appears in errors.
func (c *Client) Name() string { return c.name }

// Continuation returns "prefill", for the config layer: the Messages API continues a final
// assistant message natively, and answers with what it adds (afloat.Request's Continue).
func (c *Client) Continuation() string { return httpx.ContinuePrefill }

// Complete sends req and returns the answer. Failures are *afloat.ProviderError: a transport
// failure or a cut context is Unavailable (with Timeout when time ran out), an HTTP error is
// classified by status and error type, a 200 that is not a message is Unavailable, a 200
// whose stop reason is refusal is Refused, and a tool input that is not a JSON object is
// Contract.
//
// A final assistant message of text is a prefill: the API continues it, and the answer is
// what the model added. It is sent without its trailing white space, which the API refuses;
// the white space that opens the answer is then cut as well, since the caller's text still
// ends with what was cut. With req.Continue the last message must be such a message
// (Contract otherwise), and a json_schema format is left to the prompt and the contract
// check rather than forced as a tool.
func (c *Client) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	enc, err := c.encode(req, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, enc.body, false)
	if err != nil {
		return nil, err
	}
	body, err := httpx.ReadBody(c.name, resp)
	if err != nil {
		return nil, err
	}
	out, err := decodeResponse(body, enc.answerTool)
	if err != nil {
		return nil, httpx.DecodeError(c.name, resp.StatusCode, err)
	}
	if out.FinishReason == finishReason(stopRefusal) {
		return nil, refusal(c.name, resp.StatusCode)
	}
	if enc.trimmed {
		out.Content = strings.TrimLeftFunc(out.Content, unicode.IsSpace)
	}
	return out, nil
}

// Probe asks for the models list (GET {BaseURL}/models, with the key, the version and the
// configured headers), which bills nothing. Failures are classified as Complete's.
func (c *Client) Probe(ctx context.Context) error {
	hreq, err := httpx.NewGetRequest(ctx, c.models)
	if err != nil {
		return httpx.ContractError(c.name, err)
	}
	c.authorize(hreq)
	resp, err := httpx.Send(c.http, c.name, hreq, c.statusError)
	if err != nil {
		return err
	}
	return httpx.ReadProbe(c.name, resp)
}

// encode renders req, reporting a request that cannot be rendered as Contract.
func (c *Client) encode(req *afloat.Request, stream bool) (encoded, error) {
	if req == nil {
		return encoded{}, httpx.ContractError(c.name, errors.New("nil request"))
	}
	enc, err := encodeRequest(req, c.model, c.maxTokens, stream)
	if err != nil {
		return encoded{}, httpx.ContractError(c.name, err)
	}
	return enc, nil
}

// send posts a rendered request and returns a response with a 2xx status; any other outcome
// is returned as a classified error, with the body already drained and closed.
func (c *Client) send(ctx context.Context, payload []byte, stream bool) (*http.Response, error) {
	hreq, err := httpx.NewJSONRequest(ctx, c.endpoint, payload, stream)
	if err != nil {
		return nil, httpx.ContractError(c.name, err)
	}
	c.authorize(hreq)
	return httpx.Send(c.http, c.name, hreq, c.statusError)
}

// authorize sets the key, the version and the configured headers on a request.
func (c *Client) authorize(hreq *http.Request) {
	hreq.Header.Set("X-Api-Key", c.apiKey.Reveal())
	hreq.Header.Set("Anthropic-Version", c.version)
	for k, v := range c.headers {
		hreq.Header.Set(k, v[0])
	}
}
