package yandex

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

// Config configures a Client. Exactly one of APIKey and IAMToken is required.
type Config struct {
	// Name is the provider's name in errors and metrics. "" means "yandexgpt".
	Name string
	// BaseURL is the API host; requests go to BaseURL + "/foundationModels/v1/completion".
	// "" means https://llm.api.cloud.yandex.net.
	BaseURL string
	// ModelURI is the model of every request that names none
	// ("gpt://<folder>/yandexgpt/latest"). "" requires each Request to set Model.
	ModelURI string
	// APIKey is a service account's API key, sent as "Authorization: Api-Key <key>". It
	// prints and logs as "[redacted]", as IAMToken does.
	APIKey afloat.Secret
	// IAMToken is sent as "Authorization: Bearer <token>". It is used as given: a token
	// lives 12 hours, and its refresh is the host's job.
	IAMToken afloat.Secret
	// FolderID is sent as "x-folder-id" with an IAMToken (a user account's token needs
	// it); "" sends none. It does not go with an APIKey.
	FolderID string
	// HTTPClient sends the requests. nil means httpx.NewClient(httpx.Timeouts{}).
	HTTPClient *http.Client
	// Clock turns an HTTP-date Retry-After into a wait. nil means the real clock.
	Clock clockwork.Clock
}

// Defaults of Config's empty fields.
const (
	DefaultBaseURL = "https://llm.api.cloud.yandex.net"
	completionPath = "/foundationModels/v1/completion"
	defaultName    = "yandexgpt"
)

// Client calls Yandex Foundation Models. It implements afloat.Provider and
// afloat.Streamer, and is safe for concurrent use.
type Client struct {
	name     string
	endpoint string
	modelURI string
	auth     afloat.Secret // the Authorization header
	secret   afloat.Secret // the key or token, for redaction
	folderID string
	http     *http.Client
	clock    clockwork.Clock
}

var (
	_ afloat.Provider = (*Client)(nil)
	_ afloat.Streamer = (*Client)(nil)
)

// New checks cfg and returns a Client. Its errors never quote the key or the token.
func New(cfg Config) (*Client, error) {
	c := &Client{name: cfg.Name, modelURI: cfg.ModelURI, folderID: cfg.FolderID, http: cfg.HTTPClient, clock: cfg.Clock}
	if c.name == "" {
		c.name = defaultName
	}
	base, err := httpx.AbsURL(cfg.BaseURL, DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("yandex: %s: base url %w", c.name, err)
	}
	c.endpoint = strings.TrimRight(base, "/") + completionPath
	switch {
	case cfg.APIKey != "" && cfg.IAMToken != "":
		return nil, fmt.Errorf("yandex: %s: set an api key or an iam token, not both", c.name)
	case cfg.APIKey != "" && cfg.FolderID != "":
		return nil, fmt.Errorf("yandex: %s: a folder id goes with an iam token, not an api key", c.name)
	case cfg.APIKey != "":
		c.auth, c.secret = "Api-Key "+cfg.APIKey, cfg.APIKey
	case cfg.IAMToken != "":
		c.auth, c.secret = "Bearer "+cfg.IAMToken, cfg.IAMToken
	default:
		return nil, fmt.Errorf("yandex: %s: an api key or an iam token is required", c.name)
	}
	if httpx.HasControl(c.secret.Reveal()) || httpx.HasControl(cfg.FolderID) {
		return nil, fmt.Errorf("yandex: %s: credentials hold a control character", c.name)
	}
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

// Continuation returns "none", for the config layer: Foundation Models document no assistant
// prefill, so a request with Continue fails as Contract without being sent. (There is no
// Probe either: the API has no call that bills nothing.)
func (c *Client) Continuation() string { return httpx.ContinueNone }

// Complete sends req and returns the answer. Failures are *afloat.ProviderError: a transport
// failure or a cut context is Unavailable (with Timeout when time ran out), an HTTP error is
// classified by status, a 200 without alternatives is Unavailable, an alternative of status
// ALTERNATIVE_STATUS_CONTENT_FILTER is Refused (its text, Yandex's own account of the
// refusal, is the cause), and tool arguments that are not a JSON object are Contract.
func (c *Client) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	payload, model, err := c.encode(req, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, payload)
	if err != nil {
		return nil, err
	}
	body, err := httpx.ReadBody(c.name, resp)
	if err != nil {
		return nil, err
	}
	out, err := decodeResponse(body, model)
	if err != nil {
		return nil, httpx.DecodeError(c.name, resp.StatusCode, err)
	}
	if out.FinishReason == finishReason(statusContentFilter) {
		return nil, c.refusal(resp.StatusCode, out.Content)
	}
	return out, nil
}

// encode renders req and returns the model URI it names.
func (c *Client) encode(req *afloat.Request, stream bool) ([]byte, string, error) {
	if req == nil {
		return nil, "", httpx.ContractError(c.name, errors.New("nil request"))
	}
	if req.Continue {
		return nil, "", httpx.NoContinuation(c.name)
	}
	model := req.Model
	if model == "" {
		model = c.modelURI
	}
	payload, err := encodeRequest(req, model, stream)
	if err != nil {
		return nil, "", httpx.ContractError(c.name, err)
	}
	return payload, model, nil
}

// send posts a rendered request and returns a response with a 2xx status; any other outcome
// is returned as a classified error, with the body already drained and closed.
func (c *Client) send(ctx context.Context, payload []byte) (*http.Response, error) {
	// A stream too is JSON lines, not server-sent events: Accept stays application/json.
	hreq, err := httpx.NewJSONRequest(ctx, c.endpoint, payload, false)
	if err != nil {
		return nil, httpx.ContractError(c.name, err)
	}
	hreq.Header.Set("Authorization", c.auth.Reveal())
	if c.folderID != "" {
		hreq.Header.Set("X-Folder-Id", c.folderID)
	}
	return httpx.Send(c.http, c.name, hreq, c.statusError)
}
