package gateway

import "testing"

// TestFormatCost: a cost is written in plain decimals, without the binary noise of a sum of
// per-token prices, and exact values stay as they are.
func TestFormatCost(t *testing.T) {
	perToken, tenth := 0.0000002, 0.1 // variables: Go's constant arithmetic would be exact
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{13 * perToken, "0.0000026"}, // 2.5999999999999997e-06 in float64
		{tenth + 2*tenth, "0.3"},     // 0.30000000000000004
		{0.00014, "0.00014"},
		{0, "0"},
		{1.5, "1.5"},
		{123.456789012345, "123.456789012"},
	} {
		if got := formatCost(tt.in); got != tt.want {
			t.Errorf("formatCost(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if noisy := 13 * perToken; noisy == 0.0000026 {
		t.Fatal("the noisy case is not noisy")
	}
}
