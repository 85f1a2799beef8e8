package openfeature

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/afloat-dev/afloat/flags"
	of "github.com/open-feature/go-sdk/openfeature"
)

// afloatClient returns an OpenFeature client served by a Provider over a flags.Memory holding
// doc.
func afloatClient(t *testing.T, doc *flags.Document) (*flags.Memory, of.IClient) {
	t.Helper()
	mem := flags.NewMemory()
	if err := mem.Set(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	return mem, bind(t, NewProvider(mem))
}

func TestProviderEnabledMatchesAllow(t *testing.T) {
	tenants := []string{"", "acme", "globex"}
	for i := range 40 {
		tenants = append(tenants, fmt.Sprintf("tenant-%d", i))
	}
	tasks := []string{"triage", "summarize", "extract", "classify"} // classify: not in the document
	tests := []struct {
		name string
		doc  *flags.Document
	}{
		{"per task", &flags.Document{Tasks: map[string]flags.TaskFlags{
			"triage":    {Blocklist: []string{"globex"}, RolloutPct: pct(50)},
			"summarize": {Kill: true},
			"extract":   {RolloutPct: pct(0)},
		}}},
		{"global kill", &flags.Document{Kill: true, Tasks: map[string]flags.TaskFlags{"triage": {}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, client := afloatClient(t, tt.doc)
			ctx := context.Background()
			seen := map[bool]int{}
			for _, task := range tasks {
				for _, tenant := range tenants {
					want := tt.doc.Allow(task, tenant)
					seen[want]++
					// The default is the wrong answer, so that a fallback to it fails.
					d, err := client.BooleanValueDetails(ctx, taskKey(task, attrEnabled), !want, of.NewEvaluationContext(tenant, nil))
					if err != nil {
						t.Fatalf("%s for %q: %v", task, tenant, err)
					}
					if d.Value != want || d.Reason != of.TargetingMatchReason {
						t.Errorf("%s for %q = %v (%s), want %v (%s)", task, tenant, d.Value, d.Reason, want, of.TargetingMatchReason)
					}
				}
			}
			if tt.doc.Kill && seen[true] > 0 {
				t.Errorf("global kill: %d tenants on", seen[true])
			}
			if !tt.doc.Kill && (seen[true] == 0 || seen[false] == 0) {
				t.Errorf("per task: on/off counts %v, want both", seen)
			}
		})
	}
}

func TestProviderValues(t *testing.T) {
	_, client := afloatClient(t, &flags.Document{Tasks: map[string]flags.TaskFlags{
		"triage":    {Blocklist: []string{"globex", "initech"}, RolloutPct: pct(50)},
		"summarize": {Kill: true},
		"a.b":       {Kill: true},
	}})
	ctx := context.Background()
	none := of.EvaluationContext{}
	boolean := func(k string) (any, error) { return client.BooleanValue(ctx, k, false, none) }
	integer := func(k string) (any, error) { return client.IntValue(ctx, k, -1, none) }
	object := func(k string) (any, error) { return client.ObjectValue(ctx, k, nil, none) }
	tests := []struct {
		key  string
		eval func(string) (any, error)
		want any
	}{
		{"afloat.kill", boolean, false},
		{"afloat.triage.kill", boolean, false},
		{"afloat.summarize.kill", boolean, true},
		{"afloat.a.b.kill", boolean, true},
		{"afloat.classify.kill", boolean, false},
		{"afloat.triage.blocklist", object, []any{"globex", "initech"}},
		{"afloat.classify.blocklist", object, []any{}},
		{"afloat.triage.rollout_pct", integer, int64(50)},
		{"afloat.summarize.rollout_pct", integer, int64(100)},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := tt.eval(tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("= %#v, want %#v", got, tt.want)
			}
		})
	}
}

type failing struct{}

func (failing) Flags(context.Context) (*flags.Document, error) { return nil, errors.New("store down") }

func TestProviderErrors(t *testing.T) {
	_, client := afloatClient(t, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}})
	broken := bind(t, NewProvider(failing{}))
	ctx := context.Background()
	none := of.EvaluationContext{}
	type result struct {
		value, def any
		details    of.EvaluationDetails
		err        error
	}
	boolean := func(c of.IClient, k string) result {
		d, err := c.BooleanValueDetails(ctx, k, true, none)
		return result{d.Value, true, d.EvaluationDetails, err}
	}
	str := func(c of.IClient, k string) result {
		d, err := c.StringValueDetails(ctx, k, "def", none)
		return result{d.Value, "def", d.EvaluationDetails, err}
	}
	float := func(c of.IClient, k string) result {
		d, err := c.FloatValueDetails(ctx, k, -1, none)
		return result{d.Value, -1.0, d.EvaluationDetails, err}
	}
	integer := func(c of.IClient, k string) result {
		d, err := c.IntValueDetails(ctx, k, -1, none)
		return result{d.Value, int64(-1), d.EvaluationDetails, err}
	}
	object := func(c of.IClient, k string) result {
		d, err := c.ObjectValueDetails(ctx, k, "def", none)
		return result{d.Value, "def", d.EvaluationDetails, err}
	}
	tests := []struct {
		name   string
		client of.IClient
		key    string
		eval   func(of.IClient, string) result
		code   of.ErrorCode
	}{
		{"other flag", client, "checkout.enabled", boolean, of.FlagNotFoundCode},
		{"other flag as string", client, "checkout.theme", str, of.FlagNotFoundCode},
		{"unknown attribute", client, "afloat.triage.paused", boolean, of.FlagNotFoundCode},
		{"no task", client, "afloat..kill", boolean, of.FlagNotFoundCode},
		{"prefix only", client, "afloat.", boolean, of.FlagNotFoundCode},
		{"string of a boolean flag", client, "afloat.triage.enabled", str, of.TypeMismatchCode},
		{"string of the global kill", client, "afloat.kill", str, of.TypeMismatchCode},
		{"float of the rollout", client, "afloat.triage.rollout_pct", float, of.TypeMismatchCode},
		{"int of the kill", client, "afloat.triage.kill", integer, of.TypeMismatchCode},
		{"object of the kill", client, "afloat.triage.kill", object, of.TypeMismatchCode},
		{"boolean of the blocklist", client, "afloat.triage.blocklist", boolean, of.TypeMismatchCode},
		{"source fails", broken, "afloat.triage.kill", boolean, of.GeneralCode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.eval(tt.client, tt.key)
			if r.err == nil {
				t.Fatal("no error")
			}
			if r.details.ErrorCode != tt.code || r.details.Reason != of.ErrorReason {
				t.Errorf("code %s, reason %s; want %s, %s", r.details.ErrorCode, r.details.Reason, tt.code, of.ErrorReason)
			}
			if !reflect.DeepEqual(r.value, r.def) {
				t.Errorf("value %#v, want the default %#v", r.value, r.def)
			}
		})
	}
}
