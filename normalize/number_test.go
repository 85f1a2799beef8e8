package normalize

import "testing"

// TestNumber: a string is read as a number only when its separator cannot group thousands.
func TestNumber(t *testing.T) {
	tests := []struct {
		in, want string // want "" means not read
	}{
		{"0.8", "0.8"},
		{"0,8", "0.8"},
		{"2.5", "2.5"},
		{"2.50", "2.50"},
		{"2.5000", "2.5000"},
		{"0.500", "0.500"},
		{"-0.125", "-0.125"},
		{"1234.567", "1234.567"},
		{"1e3", "1e3"},
		{"2.500", ""},    // 2500 in Portuguese and Russian
		{"-2.500", ""},   // likewise
		{"12.345", ""},   // 12345
		{"999.999", ""},  // 999999
		{"2.500,00", ""}, // 2500 with cents
		{"1,000", ""},    // 1000 in English
		{"1.000.000", ""},
		{"", ""},
		{"abc", ""},
	}
	for _, tt := range tests {
		n, ok := number(tt.in)
		if ok != (tt.want != "") || string(n) != tt.want {
			t.Errorf("number(%q) = %q, %v; want %q", tt.in, n, ok, tt.want)
		}
	}
}
