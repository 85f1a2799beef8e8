package httpx

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"folds space", "a\n\t b", nil, "a b"},
		{"redacts every secret", "key K1 and token T2.", []string{"K1", "", "T2"}, "key [redacted] and token [redacted]."},
		{"truncates at a rune", strings.Repeat("я", 150), nil, strings.Repeat("я", 100) + "…"},
		{"repairs utf-8", "a\xffb", nil, "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quote(tt.in, 200, tt.secrets...); got != tt.want {
				t.Errorf("Quote = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name   string
		in     map[string]string
		want   string // the canonical name of the one header, when valid
		errHas string
	}{
		{name: "nil", in: nil},
		{name: "canonical", in: map[string]string{"openai-project": "b1g"}, want: "Openai-Project"},
		{name: "space in name", in: map[string]string{"OpenAI Project": "x"}, errHas: "invalid header name"},
		{name: "empty name", in: map[string]string{"": "x"}, errHas: "invalid header name"},
		{name: "newline in value", in: map[string]string{"X-A": "a\r\nX-Evil: 1"}, errHas: "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Headers(tt.in)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && h.Get(tt.want) != tt.in[strings.ToLower(tt.want)] {
				t.Errorf("headers = %v, want %s set", h, tt.want)
			}
			if len(h) != len(tt.in) {
				t.Errorf("headers = %v, want %d", h, len(tt.in))
			}
		})
	}
}

func TestQuoteLongestSecretFirst(t *testing.T) {
	// "abc" is a prefix of the key: cut first, it would leave the key's tail in the text.
	if got := Quote("key abcdef and abc", 200, "abc", "abcdef"); got != "key [redacted] and [redacted]" {
		t.Errorf("Quote = %q", got)
	}
}

func TestSecrets(t *testing.T) {
	h := http.Header{"Api-Key": {"azure-key"}, "X-Empty": {""}}
	got := Secrets(h, "sk-1", "")
	slices.Sort(got)
	if want := []string{"azure-key", "sk-1"}; !slices.Equal(got, want) {
		t.Errorf("Secrets = %q, want %q", got, want)
	}
}
