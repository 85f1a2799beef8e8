// Package openfeature connects afloat's kill switches (package flags) with OpenFeature, both
// ways, through the OpenFeature Go SDK (github.com/open-feature/go-sdk/openfeature).
//
// [NewSource] reads the flag document from the team's flag system: a [Source] is a
// flags.Source whose document is evaluated through an OpenFeature client. Flags is read on
// every call, so it does not evaluate: it returns the last document evaluated, which is
// evaluated again when the provider reports PROVIDER_READY or PROVIDER_CONFIGURATION_CHANGED,
// and every SourceConfig.RefreshInterval (a second by default: DESIGN.md §2 allows no
// staler flags without push invalidation, and not every provider pushes).
//
// [NewProvider] goes the other way: a [Provider] is an OpenFeature FeatureProvider serving a
// flags.Source, so that code reading its flags through OpenFeature reads afloat's too.
//
// # Flag keys
//
//	afloat.kill                boolean  the global kill switch
//	afloat.<task>.kill         boolean  the kill switch of a task or route
//	afloat.<task>.blocklist    object   the tenant ids for whom the task is off: a list of
//	                                    strings, or an object {"tenants": [...]} for flag
//	                                    systems whose object flags must be JSON objects
//	                                    (flagd); a Provider serves the list
//	afloat.<task>.rollout_pct  integer  the share of tenants, 0–100, for whom the task is on
//	afloat.<task>.enabled      boolean  Provider only: whether the task is on for the tenant
//	                                    given as the targeting key (flags.Document.Allow)
//
// <task> is the task or route name of afloat's config; it may hold dots (the task is what
// lies between "afloat." and the last dot).
//
// # Fallback
//
// A Source never turns a switch off, or on, because the flag system has no answer: a key it
// does not know (FLAG_NOT_FOUND), a flag it serves disabled, a provider not ready, an
// evaluation error, a value of the wrong type and a rollout outside 0–100 all take the
// value that SourceConfig.Fallback holds, normally afloat's own config flags. Absent keys
// are the normal way to leave a switch to afloat's config and are no error; the others are
// logged once each time they change (not on every refresh), and counted by Source.Errors.
//
// The document is one for all tenants: a Source evaluates with one evaluation context, so
// per-tenant targeting rules of the flag system are not seen; blocklist tenants instead.
//
// # Use
//
// The package's name is the SDK's, so one of the two takes another name (of, here):
//
//	src, err := openfeature.NewSource(ctx, of.NewDefaultClient(), []string{"triage"},
//		openfeature.SourceConfig{Fallback: configFlags, Logger: log})
//	if err != nil { ... }
//	defer src.Close()
//	doc, _ := src.Flags(ctx) // cheap: the last document evaluated
//	doc.Allow("triage", "acme")
//
//	_ = of.SetNamedProviderAndWait("afloat", openfeature.NewProvider(gatewayFlags))
//	on := of.NewClient("afloat").Boolean(ctx, "afloat.triage.enabled", true,
//		of.NewEvaluationContext("acme", nil))
package openfeature
