package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
	"github.com/jonboulle/clockwork"
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in errors and metrics ("t-lite"). "" means "openai".
	Name string
	// BaseURL is the API root; requests go to BaseURL + "/chat/completions". "" means
	// https://api.openai.com/v1.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". "" sends no Authorization header, for
	// local servers. It prints and logs as "[redacted]".
	APIKey afloat.Secret
	// Model is the model of every request that names none. "" requires each Request to set
	// Model.
	Model string
	// Headers are extra request headers ("OpenAI-Project" for Yandex, "api-key" for Azure
	// OpenAI). They are set last, so they may replace a default header. Their values are
	// treated as credentials: no error quotes them. nil means none.
	Headers map[string]string
	// Dialect names the server's quirks the requests are rendered around: DialectOpenAI,
	// DialectVLLM, DialectLlamaCpp, DialectOllama or DialectYandex. "" means DialectOpenAI.
	Dialect string
	// HTTPClient sends the requests. nil means httpx.NewClient(httpx.Timeouts{}).
	HTTPClient *http.Client
	// Clock turns an HTTP-date Retry-After into a wait. nil means the real clock.
	Clock clockwork.Clock
}

// DefaultBaseURL is OpenAI's API root, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

const defaultName = "openai"

// Client calls one OpenAI-compatible endpoint. It implements afloat.Provider,
// afloat.Streamer and afloat.Prober, and is safe for concurrent use.
type Client struct {
	name     string
	endpoint string
	models   string // the models list, for Probe
	apiKey   afloat.Secret
	secrets  []string // the key and the header values, cut out of every quoted text
	model    string
	dialect  string
	headers  http.Header
	http     *http.Client
	clock    clockwork.Clock
}

var (
	_ afloat.Provider = (*Client)(nil)
	_ afloat.Streamer = (*Client)(nil)
	_ afloat.Prober   = (*Client)(nil)
)

// New checks cfg and returns a Client. Its errors never quote the key or a header's value.
func New(cfg Config) (*Client, error) {
	c := &Client{
		name:    cfg.Name,
		apiKey:  cfg.APIKey,
		model:   cfg.Model,
		dialect: cfg.Dialect,
		http:    cfg.HTTPClient,
		clock:   cfg.Clock,
	}
	if c.name == "" {
		c.name = defaultName
	}
	base, err := httpx.AbsURL(cfg.BaseURL, DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("openai: %s: base url %w", c.name, err)
	}
	c.endpoint = strings.TrimRight(base, "/") + "/chat/completions"
	c.models = strings.TrimRight(base, "/") + "/models"
	if !knownDialect(c.dialect) {
		return nil, fmt.Errorf("openai: %s: unknown dialect %q (want openai, vllm, llamacpp, ollama or yandex)", c.name, c.dialect)
	}
	if httpx.HasControl(cfg.APIKey.Reveal()) {
		return nil, fmt.Errorf("openai: %s: api key holds a control character", c.name)
	}
	if c.headers, err = httpx.Headers(cfg.Headers); err != nil {
		return nil, fmt.Errorf("openai: %s: %w", c.name, err)
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

// Continuation says what the server can do with an answer cut on another provider
// (afloat.Request's Continue), for the config layer: "prefill" for DialectVLLM (sent with
// continue_final_message) and DialectLlamaCpp (llama-server continues a final assistant
// message unless started with --no-prefill-assistant), "none" for the others, whose
// requests with Continue fail as Contract without being sent.
func (c *Client) Continuation() string {
	switch c.dialect {
	case DialectVLLM, DialectLlamaCpp:
		return httpx.ContinuePrefill
	}
	return httpx.ContinueNone
}

// Complete sends req and returns the answer. Failures are *afloat.ProviderError: a transport
// failure or a cut context is Unavailable (with Timeout when time ran out), an HTTP error is
// classified by status and error code (a 400 of content_policy_violation or content_filter
// is Refused, its message kept as the cause), a 200 without choices is Unavailable, a 200
// whose finish reason is content_filter is Refused, and tool arguments that are not a JSON
// object are Contract. With req.Continue the answer is only what the model added to the
// last (assistant) message; a dialect that cannot continue fails as Contract, unsent.
func (c *Client) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	resp, err := c.send(ctx, req, false)
	if err != nil {
		return nil, err
	}
	body, err := httpx.ReadBody(c.name, resp)
	if err != nil {
		return nil, err
	}
	out, err := decodeResponse(body)
	if err != nil {
		return nil, httpx.DecodeError(c.name, resp.StatusCode, err)
	}
	if out.FinishReason == finishContentFilter {
		return nil, contentFiltered(c.name, resp.StatusCode)
	}
	return out, nil
}

// Probe asks for the models list (GET {BaseURL}/models, with the chat's credentials and
// headers), which bills nothing. Failures are classified as Complete's; a server without
// the list answers 404, which is Contract: probe it some other way.
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

// send posts req and returns a response with a 2xx status; any other outcome is returned as
// a classified error, with the body already drained and closed.
func (c *Client) send(ctx context.Context, req *afloat.Request, stream bool) (*http.Response, error) {
	if req == nil {
		return nil, httpx.ContractError(c.name, errors.New("nil request"))
	}
	if req.Continue && c.Continuation() != httpx.ContinuePrefill {
		return nil, httpx.NoContinuation(c.name)
	}
	payload, err := encodeFor(req, c.model, stream, c.dialect)
	if err != nil {
		return nil, httpx.ContractError(c.name, err)
	}
	hreq, err := httpx.NewJSONRequest(ctx, c.endpoint, payload, stream)
	if err != nil {
		return nil, httpx.ContractError(c.name, err)
	}
	c.authorize(hreq)
	return httpx.Send(c.http, c.name, hreq, c.statusError)
}

// authorize sets the key and the configured headers on a request.
func (c *Client) authorize(hreq *http.Request) {
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey.Reveal())
	}
	for k, v := range c.headers {
		hreq.Header.Set(k, v[0])
	}
}
