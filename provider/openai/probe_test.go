package openai

import (
	"errors"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

const modelsPath = "/v1/models"

func TestProbe(t *testing.T) {
	tests := []struct {
		fixture string // "" answers 404, as a server without the list
		kind    afloat.Kind
		status  int
		errHas  string // "" means the probe passes
	}{
		{fixture: "models_ok.http"},
		{fixture: "err_401_invalid_api_key.http", kind: afloat.Unusable, status: 401, errHas: "Incorrect API key"},
		{fixture: "err_429_rate_limit.http", kind: afloat.Throttled, status: 429, errHas: "Rate limit"},
		{fixture: "err_503_llamacpp_loading.http", kind: afloat.Unavailable, status: 503, errHas: "Loading model"},
		{fixture: "", kind: afloat.Contract, status: 404, errHas: "status 404"},
		{fixture: "models_html.http", kind: afloat.Unavailable, status: 200, errHas: "probe: response is not json"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := fixture.NewServer(t)
			if tt.fixture != "" {
				srv.Handle(modelsPath, read(t, tt.fixture))
			}
			c := newClient(t, srv.URL, func(c *Config) { c.Headers = map[string]string{"OpenAI-Project": "b1gfolder"} })
			err := c.Probe(t.Context())
			got := srv.Last(t, modelsPath)
			if got.Method != "GET" || got.Header.Get("Authorization") != "Bearer "+testKey || got.Header.Get("OpenAI-Project") != "b1gfolder" {
				t.Errorf("probe sent %s with headers %v; want GET with the key and the configured headers", got.Method, got.Header)
			}
			if n := len(srv.Requests(chatPath)); n != 0 {
				t.Errorf("probe made %d chat calls, want none", n)
			}
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("Probe = %v, want nil", err)
				}
				return
			}
			var pe *afloat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != tt.status || pe.Provider != "t-lite" {
				t.Fatalf("Probe = %v, want a %s error of status %d", err, tt.kind, tt.status)
			}
			if !contains(err, tt.errHas) {
				t.Errorf("Probe = %v, want it to say %q", err, tt.errHas)
			}
		})
	}
}

func TestProbeTransportFailure(t *testing.T) {
	err := newClient(t, fixture.ClosedURL(t), nil).Probe(t.Context())
	var pe *afloat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != afloat.Unavailable || pe.Status != 0 {
		t.Fatalf("Probe = %v, want an unavailable transport error", err)
	}
}
