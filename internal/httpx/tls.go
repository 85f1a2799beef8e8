package httpx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// TLS tunes the TLS of NewTLSClient. The zero TLS trusts the system's roots only.
type TLS struct {
	// CAFile is a PEM file of extra roots trusted beside the system's: GigaChat's
	// certificate chains to the Russian national root CA, which most systems lack. "" adds
	// none.
	CAFile string
	// CAPEM is PEM data of extra roots, trusted beside CAFile's and the system's. nil adds
	// none.
	CAPEM []byte
}

// NewTLSClient is NewClient with t's extra trusted roots. It fails when CAFile cannot be
// read or when CAFile or CAPEM holds no PEM certificate. HTTP/2 is still attempted: the
// transport keeps ForceAttemptHTTP2 with its own TLS config.
func NewTLSClient(timeouts Timeouts, t TLS) (*http.Client, error) {
	hc := NewClient(timeouts)
	if t.CAFile == "" && t.CAPEM == nil {
		return hc, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca file %s holds no pem certificate", t.CAFile)
		}
	}
	if t.CAPEM != nil && !pool.AppendCertsFromPEM(t.CAPEM) {
		return nil, errors.New("ca pem holds no pem certificate")
	}
	tr := hc.Transport.(*http.Transport)
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return hc, nil
}
