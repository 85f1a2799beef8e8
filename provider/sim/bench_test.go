package sim_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/provider/sim"
)

// BenchmarkComplete measures a call with no latency: the provider's own cost inside the
// cascade's benchmarks.
func BenchmarkComplete(b *testing.B) {
	schemaReq := userRequest("the app crashes on login")
	schemaReq.ResponseFormat = &afloat.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(triageSchema)}
	tests := []struct {
		name  string
		req   *afloat.Request
		fault sim.Fault
	}{
		{"text", userRequest("the app crashes on login"), sim.Fault{}},
		{"triage schema", schemaReq, sim.Fault{}},
		{"unavailable", schemaReq, sim.Fault{Mode: sim.ModeUnavailable}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			p, err := sim.New(sim.Config{})
			if err != nil {
				b.Fatal(err)
			}
			p.SetFault(tc.fault)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, _ = p.Complete(ctx, tc.req)
			}
		})
		b.Run(tc.name+" parallel", func(b *testing.B) {
			p, err := sim.New(sim.Config{})
			if err != nil {
				b.Fatal(err)
			}
			p.SetFault(tc.fault)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					_, _ = p.Complete(ctx, tc.req)
				}
			})
		})
	}
}
