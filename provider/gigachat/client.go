package gigachat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx"
	"github.com/jonboulle/clockwork"
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in errors, logs and metrics ("gigachat-pro"). "" means
	// "gigachat".
	Name string
	// BaseURL is the API root; chats go to BaseURL + "/chat/completions". "" means
	// https://gigachat.devices.sberbank.ru/api/v1.
	BaseURL string
	// AuthURL is the OAuth token endpoint. "" means
	// https://ngw.devices.sberbank.ru:9443/api/v2/oauth.
	AuthURL string
	// AuthKey is the authorization key, base64 of "client_id:client_secret"; required. It
	// prints and logs as "[redacted]".
	AuthKey afloat.Secret
	// Scope is the API scope: GIGACHAT_API_PERS, GIGACHAT_API_B2B or GIGACHAT_API_CORP.
	// "" means GIGACHAT_API_PERS.
	Scope string
	// Model is the model of every request that names none ("GigaChat-Pro"). "" requires
	// each Request to set Model.
	Model string
	// RefreshBefore is how long before its expiry a token is replaced. 0 means one minute.
	RefreshBefore time.Duration
	// StructuredOutput sends a json_schema response format as GigaChat's flat
	// response_format, a beta that not every model takes. false leaves the format to the
	// prompt and the task's contract check, so that a model without it is not refused.
	StructuredOutput bool
	// HTTPClient sends the token exchanges and the chats. nil means
	// httpx.NewClient(httpx.Timeouts{}), which trusts the system's roots only: GigaChat's
	// certificate chains to the Russian national root CA, so pass a client built by
	// httpx.NewTLSClient with that CA unless the system trusts it.
	HTTPClient *http.Client
	// Clock decides when a token expires and turns an HTTP-date Retry-After into a wait.
	// nil means the real clock.
	Clock clockwork.Clock
	// Logger receives token refreshes and their failures, never a key or a token. nil
	// discards them.
	Logger *slog.Logger
}

// Defaults of Config's empty fields.
const (
	DefaultBaseURL       = "https://gigachat.devices.sberbank.ru/api/v1"
	DefaultAuthURL       = "https://ngw.devices.sberbank.ru:9443/api/v2/oauth"
	DefaultScope         = "GIGACHAT_API_PERS"
	DefaultRefreshBefore = time.Minute
	defaultName          = "gigachat"
)

// Client calls GigaChat. It implements afloat.Provider, afloat.Streamer and afloat.Prober,
// and is safe for concurrent use: its calls share one token.
type Client struct {
	name     string
	endpoint string
	models   string // the models list, for Probe
	authKey  afloat.Secret
	model    string
	schemas  bool // StructuredOutput
	http     *http.Client
	clock    clockwork.Clock
	log      *slog.Logger
	tokens   *tokens
}

var (
	_ afloat.Provider = (*Client)(nil)
	_ afloat.Streamer = (*Client)(nil)
	_ afloat.Prober   = (*Client)(nil)
)

// New checks cfg and returns a Client. It makes no call: the first token is fetched by the
// first chat. Its errors never quote the key.
func New(cfg Config) (*Client, error) {
	c := &Client{name: cfg.Name, authKey: cfg.AuthKey, model: cfg.Model, schemas: cfg.StructuredOutput,
		http: cfg.HTTPClient, clock: cfg.Clock, log: cfg.Logger}
	if c.name == "" {
		c.name = defaultName
	}
	base, err := httpx.AbsURL(cfg.BaseURL, DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("gigachat: %s: base url %w", c.name, err)
	}
	c.endpoint = strings.TrimRight(base, "/") + "/chat/completions"
	c.models = strings.TrimRight(base, "/") + "/models"
	authURL, err := httpx.AbsURL(cfg.AuthURL, DefaultAuthURL)
	if err != nil {
		return nil, fmt.Errorf("gigachat: %s: auth url %w", c.name, err)
	}
	scope := cfg.Scope
	if scope == "" {
		scope = DefaultScope
	}
	refresh := cfg.RefreshBefore
	if refresh == 0 {
		refresh = DefaultRefreshBefore
	}
	switch {
	case cfg.AuthKey == "":
		return nil, fmt.Errorf("gigachat: %s: auth key is required", c.name)
	case httpx.HasControl(cfg.AuthKey.Reveal()):
		return nil, fmt.Errorf("gigachat: %s: auth key holds a control character", c.name)
	case httpx.HasControl(scope):
		return nil, fmt.Errorf("gigachat: %s: scope holds a control character", c.name)
	case refresh < 0:
		return nil, fmt.Errorf("gigachat: %s: refresh before %v is negative", c.name, refresh)
	}
	if c.http == nil {
		c.http = httpx.NewClient(httpx.Timeouts{})
	}
	if c.clock == nil {
		c.clock = clockwork.NewRealClock()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.tokens = &tokens{c: c, url: authURL, scope: scope, margin: refresh}
	return c, nil
}

// Name returns the provider's name as it appears in errors.
func (c *Client) Name() string { return c.name }

// Continuation returns "none", for the config layer: GigaChat documents no assistant
// prefill, so a request with Continue fails as Contract without being sent.
func (c *Client) Continuation() string { return httpx.ContinueNone }

// Probe asks for the models list (GET {BaseURL}/models with the shared token), which bills
// nothing. Failures are classified as Complete's, the token exchange's included; a 401
// refreshes the token once, as a chat does.
func (c *Client) Probe(ctx context.Context) error {
	resp, err := c.do(ctx, func(tok string) (*http.Request, error) {
		hreq, err := httpx.NewGetRequest(ctx, c.models)
		if err == nil {
			hreq.Header.Set("Authorization", "Bearer "+tok)
		}
		return hreq, err
	})
	if err != nil {
		return err
	}
	return httpx.ReadProbe(c.name, resp)
}

// Complete sends req and returns the answer. Failures are *afloat.ProviderError: a transport
// failure or a cut context is Unavailable (with Timeout when time ran out), a failed token
// exchange is classified as the token endpoint's, an HTTP error by its status (401 after one
// refresh, 402 and 403 Unusable), a 200 without choices is Unavailable, and function
// arguments that are not a JSON object are Contract.
func (c *Client) Complete(ctx context.Context, req *afloat.Request) (*afloat.Response, error) {
	payload, err := c.encode(req, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, payload, false)
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
	return out, nil
}

func (c *Client) encode(req *afloat.Request, stream bool) ([]byte, error) {
	if req == nil {
		return nil, httpx.ContractError(c.name, errors.New("nil request"))
	}
	if req.Continue {
		return nil, httpx.NoContinuation(c.name)
	}
	payload, err := encodeRequest(req, c.model, stream, c.schemas)
	if err != nil {
		return nil, httpx.ContractError(c.name, err)
	}
	return payload, nil
}

// send posts a rendered chat with the shared token and returns a response with a 2xx
// status, as do does.
func (c *Client) send(ctx context.Context, payload []byte, stream bool) (*http.Response, error) {
	return c.do(ctx, func(tok string) (*http.Request, error) {
		hreq, err := httpx.NewJSONRequest(ctx, c.endpoint, payload, stream)
		if err == nil {
			hreq.Header.Set("Authorization", "Bearer "+tok)
		}
		return hreq, err
	})
}

// do makes the request build returns for the shared token and returns a response with a 2xx
// status. A 401 refreshes the token once and makes it again; any other outcome is returned
// as a classified error, with the body already drained and closed.
func (c *Client) do(ctx context.Context, build func(tok string) (*http.Request, error)) (*http.Response, error) {
	tok, err := c.tokens.get(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.once(tok, build)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		drain(resp)
		c.log.Info("gigachat token refused; refreshing once", "provider", c.name)
		c.tokens.invalidate(tok)
		if tok, err = c.tokens.get(ctx); err != nil {
			return nil, err
		}
		if resp, err = c.once(tok, build); err != nil {
			return nil, err
		}
	}
	return httpx.CheckStatus(resp, c.statusError)
}

// once makes one request; only a transport failure is an error.
func (c *Client) once(tok string, build func(tok string) (*http.Request, error)) (*http.Response, error) {
	hreq, err := build(tok)
	if err != nil {
		return nil, httpx.ContractError(c.name, err)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, httpx.TransportError(c.name, err)
	}
	return resp, nil
}

// drain reads a little of a body so that its connection can be reused, and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, httpx.MaxErrorBody))
	resp.Body.Close()
}
