package openfeature_test

import (
	"context"
	"fmt"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/flags/openfeature"
	of "github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/memprovider"
)

func Example() {
	ctx := context.Background()
	defer of.Shutdown()

	// OpenFeature → afloat: the team's flag system (in memory here) kills triage; what it
	// does not say (summarize's blocklist) comes from afloat's config flags.
	team := memprovider.NewInMemoryProvider(map[string]memprovider.InMemoryFlag{
		"afloat.triage.kill": {State: memprovider.Enabled, DefaultVariant: "on", Variants: map[string]any{"on": true}},
	})
	if err := of.SetProviderAndWait(team); err != nil {
		panic(err)
	}
	config := &flags.Document{Tasks: map[string]flags.TaskFlags{"summarize": {Blocklist: []string{"globex"}}}}
	src, err := openfeature.NewSource(ctx, of.NewDefaultClient(), []string{"triage", "summarize"},
		openfeature.SourceConfig{Fallback: config})
	if err != nil {
		panic(err)
	}
	defer src.Close()
	doc, _ := src.Flags(ctx)
	fmt.Println("triage for acme:", doc.Allow("triage", "acme"))
	fmt.Println("summarize for acme:", doc.Allow("summarize", "acme"))
	fmt.Println("summarize for globex:", doc.Allow("summarize", "globex"))

	// afloat → OpenFeature: code that reads its flags through OpenFeature sees afloat's
	// switches, per tenant.
	mem := flags.NewMemory()
	_ = mem.Set(ctx, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Blocklist: []string{"initech"}}}})
	if err := of.SetNamedProviderAndWait("afloat", openfeature.NewProvider(mem)); err != nil {
		panic(err)
	}
	client := of.NewClient("afloat")
	for _, tenant := range []string{"acme", "initech"} {
		on := client.Boolean(ctx, "afloat.triage.enabled", true, of.NewEvaluationContext(tenant, nil))
		fmt.Printf("afloat.triage.enabled for %s: %v\n", tenant, on)
	}
	// Output:
	// triage for acme: false
	// summarize for acme: true
	// summarize for globex: false
	// afloat.triage.enabled for acme: true
	// afloat.triage.enabled for initech: false
}
