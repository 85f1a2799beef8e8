package httpx

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tlsServer starts an HTTP/2 TLS server and returns it with its certificate as PEM.
func tlsServer(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func TestNewTLSClientTrustsTheCAFile(t *testing.T) {
	srv, caPEM := tlsServer(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		tls       TLS
		wantProto string // "" means the handshake must fail
	}{
		{name: "system roots only", tls: TLS{}},
		{name: "ca file", tls: TLS{CAFile: caFile}, wantProto: "HTTP/2.0"},
		{name: "ca pem", tls: TLS{CAPEM: caPEM}, wantProto: "HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewTLSClient(Timeouts{}, tt.tls)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Get(srv.URL)
			if tt.wantProto == "" {
				var ua x509.UnknownAuthorityError
				if err == nil || !errors.As(err, &ua) {
					t.Fatalf("err = %v, want an unknown authority", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if string(body) != tt.wantProto || resp.ProtoMajor != 2 {
				t.Errorf("server saw %q, client %s; want HTTP/2 both ways", body, resp.Proto)
			}
		})
	}
}

func TestNewTLSClientErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		tls    TLS
		errHas string
	}{
		{"missing file", TLS{CAFile: filepath.Join(dir, "absent.pem")}, "no such file"},
		{"file without pem", TLS{CAFile: junk}, "holds no pem certificate"},
		{"pem without certificate", TLS{CAPEM: []byte("junk")}, "ca pem holds no pem certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewTLSClient(Timeouts{}, tt.tls)
			if err == nil || !strings.Contains(err.Error(), tt.errHas) || c != nil {
				t.Fatalf("NewTLSClient = %v, %v; want an error saying %q", c, err, tt.errHas)
			}
		})
	}
}
