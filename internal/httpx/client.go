package httpx

import (
	"net"
	"net/http"
	"time"
)

// Timeouts tunes the transport of NewClient. Values ≤ 0 mean the field's default.
type Timeouts struct {
	// Connect bounds dialing a connection, apart from the read timeout. 0 means 1s.
	Connect time.Duration
	// TLSHandshake bounds the TLS handshake after the dial. 0 means Connect.
	TLSHandshake time.Duration
	// ResponseHeader bounds the wait for the response headers once the request is written.
	// 0 means none: the cascade cuts slow reads through the request's context, with a
	// deadline that follows the provider's measured latency.
	ResponseHeader time.Duration
	// IdleConn is how long an idle keep-alive connection is kept for reuse. 0 means 90s.
	IdleConn time.Duration
	// MaxConnsPerHost caps the connections (dialing, active and idle) to one host. 0 means
	// no limit.
	MaxConnsPerHost int
	// IdlePerHost is how many idle keep-alive connections to one host are kept for reuse: as
	// many as the calls the provider may have in flight (its max_in_flight), so that a load
	// held above the default's 64 does not close a connection after every answer and dial
	// (and handshake) another for the next call. 0 means 64; MaxConnsPerHost caps it.
	IdlePerHost int
}

const (
	defaultConnect  = time.Second
	defaultIdleConn = 90 * time.Second
	// defaultIdlePerHost keeps enough warm connections for a busy provider when its
	// concurrency is not given (IdlePerHost); net/http's default of 2 would make every burst
	// pay for new dials and TLS handshakes.
	defaultIdlePerHost = 64
	// writeBuffer and readBuffer size each upstream connection's buffers (net/http's default
	// is 4 KiB each). A connection holds them as long as it lives, a stream's for its whole
	// length: at 2,000 streams the defaults are 16 MiB of live heap, twice that in RSS. A
	// request's headers fit in 1 KiB, and a body or a read larger than a buffer bypasses it
	// (bufio writes and reads it directly), so the smaller buffers cost no extra system call
	// for large prompts or answers; an SSE line fits in 2 KiB.
	writeBuffer = 1 << 10
	readBuffer  = 2 << 10
)

// NewClient returns an *http.Client for calls to model APIs: dial and TLS handshake timeouts
// separate from the read, keep-alive reuse, HTTP/2 attempted, proxies from the environment,
// and no overall Timeout, because the caller's context bounds each call. The client is safe
// for concurrent use; build one per provider and reuse it.
func NewClient(t Timeouts) *http.Client {
	connect := t.Connect
	if connect <= 0 {
		connect = defaultConnect
	}
	handshake := t.TLSHandshake
	if handshake <= 0 {
		handshake = connect
	}
	idle := t.IdleConn
	if idle <= 0 {
		idle = defaultIdleConn
	}
	idlePerHost := defaultIdlePerHost
	if t.IdlePerHost > 0 {
		idlePerHost = t.IdlePerHost
	}
	if t.MaxConnsPerHost > 0 && t.MaxConnsPerHost < idlePerHost {
		idlePerHost = t.MaxConnsPerHost
	}
	dialer := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   handshake,
		ResponseHeaderTimeout: max(t.ResponseHeader, 0),
		IdleConnTimeout:       idle,
		MaxIdleConns:          0, // no global cap: MaxIdleConnsPerHost bounds each provider
		MaxIdleConnsPerHost:   idlePerHost,
		MaxConnsPerHost:       max(t.MaxConnsPerHost, 0),
		ExpectContinueTimeout: time.Second,
		WriteBufferSize:       writeBuffer,
		ReadBufferSize:        readBuffer,
	}
	return &http.Client{Transport: tr}
}
