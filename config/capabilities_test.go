package config

import (
	"context"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// plain is an adapter with neither a models list nor a continuation.
type plain struct{}

func (plain) Complete(context.Context, *afloat.Request) (*afloat.Response, error) { return nil, nil }

// capable is an adapter that continues from a prefill and has a free models list.
type capable struct{ plain }

func (capable) Continuation() string        { return "prefill" }
func (capable) Probe(context.Context) error { return nil }

// TestCapabilities: a provider's continuation and background probe default to what its
// adapter can do; the file may narrow them, and a models probe of an adapter without a models
// list is an error naming the key.
func TestCapabilities(t *testing.T) {
	tests := []struct {
		name         string
		p            Provider
		adapter      afloat.Provider
		cont         cascade.Continuation
		probe        cascade.ProbeMode
		wantErrorKey string
	}{
		{"capable defaults", Provider{}, capable{}, cascade.ContinuePrefill, cascade.ProbeModels, ""},
		{"plain defaults", Provider{}, plain{}, cascade.ContinueNone, cascade.ProbeOff, ""},
		{"narrowed", Provider{Continuation: "restart", Probe: "off"}, capable{}, cascade.ContinueNone, cascade.ProbeOff, ""},
		{"completion probe needs no models list", Provider{Probe: "completion"}, plain{}, cascade.ContinueNone, cascade.ProbeCompletion, ""},
		{"models probe without a models list", Provider{Type: TypeYandex, Probe: "models"}, plain{}, cascade.ContinueNone, cascade.ProbeOff, "providers.p.probe"},
		{"prefill the adapter cannot do", Provider{Type: TypeOpenAI, Continuation: "prefill"}, plain{}, cascade.ContinueNone, cascade.ProbeOff, "providers.p.continuation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &builder{f: &File{invalid: map[string]bool{}}}
			cont, probe := b.capabilities("providers.p", &tt.p, tt.adapter)
			if cont != tt.cont || probe != tt.probe {
				t.Errorf("got %s, %s; want %s, %s", cont, probe, tt.cont, tt.probe)
			}
			switch {
			case tt.wantErrorKey == "" && len(b.errs) > 0:
				t.Errorf("errors %v", b.errs)
			case tt.wantErrorKey != "" && (len(b.errs) != 1 || !strings.Contains(b.errs[0].Error(), tt.wantErrorKey)):
				t.Errorf("errors %v, want one at %s", b.errs, tt.wantErrorKey)
			}
		})
	}
}
