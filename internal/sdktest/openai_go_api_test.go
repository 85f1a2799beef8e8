package sdktest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAIGoListsRoutesAndReadsErrors: openai-go lists the routes with Models.List, and
// reads afloat's errors as *openai.Error with OpenAI's type, code and param.
func TestOpenAIGoListsRoutesAndReadsErrors(t *testing.T) {
	base := tenanted(t)
	newClient := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key),
			option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	}
	client := newClient(tenantKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatalf("Models.List: %v", err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.OwnedBy != "afloat" || m.Created == 0 {
			t.Errorf("model %s: owned by %q, created %d", m.ID, m.OwnedBy, m.Created)
		}
	}
	if !slices.Equal(ids, tenantedRoutes) {
		t.Errorf("Models.List gave %v, want the routes %v", ids, tenantedRoutes)
	}

	tests := []struct {
		name             string
		key, model       string
		status           int
		typ, code, param string
	}{
		{"unknown key", "sdk-wrong-key", route, 401, "authentication_error", "unauthorized", ""},
		{"unknown route", tenantKey, "gpt-9", 404, "invalid_request_error", "model_not_found", "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(tt.key)
			_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    tt.model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v is not an *openai.Error", err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Type != tt.typ || apiErr.Code != tt.code || apiErr.Param != tt.param || apiErr.Message == "" {
				t.Errorf("error %d type %q code %q param %q message %q; want %d %q %q %q", apiErr.StatusCode, apiErr.Type,
					apiErr.Code, apiErr.Param, apiErr.Message, tt.status, tt.typ, tt.code, tt.param)
			}
		})
	}
	// The list needs the key as chat does.
	wrong := newClient("sdk-wrong-key")
	_, err = wrong.Models.List(ctx)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type != "authentication_error" {
		t.Errorf("Models.List with an unknown key: %v, want a 401 authentication_error", err)
	}
}
