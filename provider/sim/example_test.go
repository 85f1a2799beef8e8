package sim_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/provider/sim"
)

func Example() {
	p, err := sim.New(sim.Config{Name: "sim-primary", Seed: 1})
	if err != nil {
		panic(err)
	}
	req := &afloat.Request{
		Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "Не работает оплата картой, срочно!"}},
		ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"department": {"enum": ["technical", "billing", "sales", "other", null]},
				"is_urgent": {"type": "number", "minimum": 0, "maximum": 1}
			},
			"required": ["department", "is_urgent"],
			"additionalProperties": false
		}`)},
	}
	ctx := context.Background()
	resp, err := p.Complete(ctx, req)
	fmt.Println(resp.Content, err)

	p.SetFault(sim.Fault{Mode: sim.ModeUnavailable}) // the drill: the provider goes down
	_, err = p.Complete(ctx, req)
	fmt.Println(err, afloat.KindOf(err).CountsAsFailure())

	p.SetFault(sim.Fault{})
	_, err = p.Complete(ctx, req)
	fmt.Println(err, p.Calls())
	// Output:
	// {"department":"technical","is_urgent":0.35} <nil>
	// sim-primary: unavailable: status 503: simulated failure true
	// <nil> 3
}
