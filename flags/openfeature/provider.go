package openfeature

import (
	"context"
	"fmt"

	"github.com/afloat-dev/afloat/flags"
	of "github.com/open-feature/go-sdk/openfeature"
)

// Provider is an OpenFeature FeatureProvider serving afloat's flags from a flags.Source, so
// that code reading its flags through OpenFeature reads afloat's kill switches too. It
// answers the keys of the package doc, afloat.<task>.enabled included, for any task name (a
// task the document does not hold is on); other keys are FLAG_NOT_FOUND, and a key
// evaluated as another type than its own is TYPE_MISMATCH. Each evaluation reads the
// Source, which is cheap. It has no initialization, so the SDK holds it ready as soon as it
// is set, and it raises no events: consumers that cache should poll, as a Source does.
// A Provider is safe for concurrent use.
type Provider struct {
	src flags.Source
}

var _ of.FeatureProvider = (*Provider)(nil)

// NewProvider returns a Provider serving src, which must not be nil.
func NewProvider(src flags.Source) *Provider { return &Provider{src: src} }

// Metadata names the provider "afloat".
func (p *Provider) Metadata() of.Metadata { return of.Metadata{Name: "afloat"} }

// Hooks returns no hooks.
func (p *Provider) Hooks() []of.Hook { return nil }

// BooleanEvaluation answers afloat.kill, afloat.<task>.kill and afloat.<task>.enabled, the
// last for the tenant given as the targeting key (none is the empty tenant of
// flags.Document.Allow).
func (p *Provider) BooleanEvaluation(ctx context.Context, flag string, defaultValue bool, flatCtx of.FlattenedContext) of.BoolResolutionDetail {
	return evaluate(ctx, p, flag, of.Boolean, defaultValue, flatCtx)
}

// StringEvaluation answers no afloat flag: a known key is TYPE_MISMATCH.
func (p *Provider) StringEvaluation(ctx context.Context, flag string, defaultValue string, flatCtx of.FlattenedContext) of.StringResolutionDetail {
	return evaluate(ctx, p, flag, of.String, defaultValue, flatCtx)
}

// FloatEvaluation answers no afloat flag: a known key is TYPE_MISMATCH.
func (p *Provider) FloatEvaluation(ctx context.Context, flag string, defaultValue float64, flatCtx of.FlattenedContext) of.FloatResolutionDetail {
	return evaluate(ctx, p, flag, of.Float, defaultValue, flatCtx)
}

// IntEvaluation answers afloat.<task>.rollout_pct, 100 when the document sets none.
func (p *Provider) IntEvaluation(ctx context.Context, flag string, defaultValue int64, flatCtx of.FlattenedContext) of.IntResolutionDetail {
	return evaluate(ctx, p, flag, of.Int, defaultValue, flatCtx)
}

// ObjectEvaluation answers afloat.<task>.blocklist as a []any of tenant id strings, the
// shape a JSON list decodes to.
func (p *Provider) ObjectEvaluation(ctx context.Context, flag string, defaultValue any, flatCtx of.FlattenedContext) of.InterfaceResolutionDetail {
	return evaluate(ctx, p, flag, of.Object, defaultValue, flatCtx)
}

// evaluate resolves flag as a T, or returns defaultValue with the resolution error.
func evaluate[T any](ctx context.Context, p *Provider, flag string, want of.Type, defaultValue T, flatCtx of.FlattenedContext) of.GenericResolutionDetail[T] {
	v, detail := p.resolve(ctx, flag, want, flatCtx)
	if t, ok := v.(T); ok {
		return of.GenericResolutionDetail[T]{Value: t, ProviderResolutionDetail: detail}
	}
	return of.GenericResolutionDetail[T]{Value: defaultValue, ProviderResolutionDetail: detail}
}

// resolve returns the value of flag, which is wanted as a want; the value is nil when the
// detail holds an error.
func (p *Provider) resolve(ctx context.Context, flag string, want of.Type, flatCtx of.FlattenedContext) (any, of.ProviderResolutionDetail) {
	k, ok := parseKey(flag)
	if !ok {
		return nil, failed(of.NewFlagNotFoundResolutionError(fmt.Sprintf("%q is not an afloat flag", flag)))
	}
	if typ := k.typ(); typ != want {
		return nil, failed(of.NewTypeMismatchResolutionError(fmt.Sprintf("%s is a %s flag, not a %s", flag, typ, want)))
	}
	doc, err := p.src.Flags(ctx)
	if err != nil {
		return nil, failed(of.NewGeneralResolutionError("afloat flags unavailable", err))
	}
	if doc == nil {
		doc = &flags.Document{}
	}
	static := of.ProviderResolutionDetail{Reason: of.StaticReason}
	if k.task == "" {
		return doc.Kill, static
	}
	t := doc.Tasks[k.task]
	switch k.attr {
	case attrKill:
		return t.Kill, static
	case attrBlocklist:
		list := make([]any, len(t.Blocklist))
		for i, tenant := range t.Blocklist {
			list[i] = tenant
		}
		return list, static
	case attrRollout:
		return int64(t.Rollout()), static
	default: // attrEnabled
		tenant, _ := flatCtx[of.TargetingKey].(string)
		return doc.Allow(k.task, tenant), of.ProviderResolutionDetail{Reason: of.TargetingMatchReason}
	}
}

func failed(e of.ResolutionError) of.ProviderResolutionDetail {
	return of.ProviderResolutionDetail{ResolutionError: e, Reason: of.ErrorReason}
}
