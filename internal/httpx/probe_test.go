package httpx

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/afloat-dev/afloat"
)

func TestNewGetRequest(t *testing.T) {
	req, err := NewGetRequest(t.Context(), "https://api.example.com/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	if req.Method != http.MethodGet || req.Header.Get("Accept") != "application/json" || req.Body != nil {
		t.Errorf("%s with Accept %q and a body; want a GET accepting JSON", req.Method, req.Header.Get("Accept"))
	}
}

func TestReadProbe(t *testing.T) {
	tests := []struct {
		name   string
		body   io.Reader
		kind   afloat.Kind
		errHas string // "" means the provider answers
	}{
		{name: "models list", body: strings.NewReader(`{"object":"list","data":[{"id":"m"}]}`)},
		{name: "a portal's page", body: strings.NewReader("<html>welcome</html>"), kind: afloat.Unavailable, errHas: "probe: response is not json"},
		{name: "read fails", body: iotest.ErrReader(io.ErrUnexpectedEOF), kind: afloat.Unavailable, errHas: "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ReadProbe("p", &http.Response{StatusCode: 200, Body: io.NopCloser(tt.body)})
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("ReadProbe = %v, want nil", err)
				}
				return
			}
			if afloat.KindOf(err) != tt.kind || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("ReadProbe = %v, want a %s error saying %q", err, tt.kind, tt.errHas)
			}
		})
	}
}
