package httpx

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/httpx/fixture"
)

func TestNewClient(t *testing.T) {
	tests := []struct {
		name          string
		in            Timeouts
		tls, header   time.Duration
		idle          time.Duration
		conns, idleph int
	}{
		{"defaults", Timeouts{}, time.Second, 0, 90 * time.Second, 0, 64},
		{"handshake follows connect", Timeouts{Connect: 3 * time.Second}, 3 * time.Second, 0, 90 * time.Second, 0, 64},
		{"all set", Timeouts{Connect: time.Second, TLSHandshake: 2 * time.Second, ResponseHeader: 5 * time.Second,
			IdleConn: time.Minute, MaxConnsPerHost: 8}, 2 * time.Second, 5 * time.Second, time.Minute, 8, 8},
		{"negative means default", Timeouts{Connect: -1, TLSHandshake: -1, ResponseHeader: -1, IdleConn: -1,
			MaxConnsPerHost: -1, IdlePerHost: -1}, time.Second, 0, 90 * time.Second, 0, 64},
		{"idle as the calls in flight", Timeouts{IdlePerHost: 256}, time.Second, 0, 90 * time.Second, 0, 256},
		{"idle capped by the connections", Timeouts{IdlePerHost: 256, MaxConnsPerHost: 100}, time.Second, 0, 90 * time.Second, 100, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClient(tt.in)
			if c.Timeout != 0 {
				t.Errorf("client Timeout = %v, want 0 (the context bounds each call)", c.Timeout)
			}
			tr, ok := c.Transport.(*http.Transport)
			if !ok {
				t.Fatalf("transport is %T", c.Transport)
			}
			if !tr.ForceAttemptHTTP2 {
				t.Error("ForceAttemptHTTP2 is off")
			}
			if tr.DialContext == nil {
				t.Error("no DialContext: the dial timeout is not set")
			}
			if tr.TLSHandshakeTimeout != tt.tls || tr.ResponseHeaderTimeout != tt.header || tr.IdleConnTimeout != tt.idle {
				t.Errorf("tls/header/idle = %v/%v/%v, want %v/%v/%v", tr.TLSHandshakeTimeout,
					tr.ResponseHeaderTimeout, tr.IdleConnTimeout, tt.tls, tt.header, tt.idle)
			}
			if tr.MaxConnsPerHost != tt.conns || tr.MaxIdleConnsPerHost != tt.idleph {
				t.Errorf("conns/idle per host = %d/%d, want %d/%d", tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost, tt.conns, tt.idleph)
			}
		})
	}
}

// TestNewClientReusesConnections checks keep-alive: sequential calls share one connection.
func TestNewClientReusesConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(Timeouts{})
	for range 3 {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		resp.Body.Close()
	}
	srv.Close()
	if conns.Load() != 1 {
		t.Errorf("opened %d connections for 3 sequential calls, want 1", conns.Load())
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		headers map[string]string
		want    time.Duration
	}{
		{"absent", nil, 0},
		{"seconds", map[string]string{"Retry-After": "20"}, 20 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": "Sat, 01 Mar 2025 12:00:30 GMT"}, 30 * time.Second},
		{"http date passed", map[string]string{"Retry-After": "Sat, 01 Mar 2025 11:59:00 GMT"}, 0},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, 250 * time.Millisecond},
		{"bad milliseconds fall back", map[string]string{"Retry-After-Ms": "soon", "Retry-After": "2"}, 2 * time.Second},
		{"garbage", map[string]string{"Retry-After": "tomorrow"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"huge capped", map[string]string{"Retry-After": "1e300"}, 24 * time.Hour},
		{"spaces", map[string]string{"Retry-After": " 7 "}, 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			if got := RetryAfter(h, now); got != tt.want {
				t.Errorf("RetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestTransportErrorClassifies(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name      string
		err       error
		timeout   bool
		transient bool
	}{
		{"reset", reset, false, true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, false},
		{"deadline", context.DeadlineExceeded, true, false},
		{"cancelled", context.Canceled, true, false},
		{"net timeout", &net.OpError{Op: "dial", Net: "tcp", Err: netTimeout{}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := TransportError("local", tt.err)
			if pe.Provider != "local" || pe.Kind != afloat.Unavailable || pe.Status != 0 {
				t.Errorf("got %+v, want provider local, unavailable, status 0", pe)
			}
			if pe.Timeout != tt.timeout {
				t.Errorf("Timeout = %v, want %v", pe.Timeout, tt.timeout)
			}
			if pe.Transient() != tt.transient {
				t.Errorf("Transient = %v, want %v", pe.Transient(), tt.transient)
			}
			if !errors.Is(pe, tt.err) {
				t.Error("the cause is not in the chain")
			}
		})
	}
}

// TestTransportErrorFromClient drives real failures through NewClient's transport.
func TestTransportErrorFromClient(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		_, err := NewClient(Timeouts{}).Get(fixture.ClosedURL(t))
		if err == nil {
			t.Fatal("no error from a closed server")
		}
		pe := TransportError("local", err)
		if !errors.Is(pe, syscall.ECONNREFUSED) || pe.Timeout {
			t.Errorf("got %v, want a refused connection that is not a timeout", pe)
		}
	})
	t.Run("reset", func(t *testing.T) {
		_, err := NewClient(Timeouts{}).Get(fixture.ResetServer(t).URL)
		if err == nil {
			t.Fatal("no error from a reset connection")
		}
		pe := TransportError("local", err)
		if !errors.Is(pe, syscall.ECONNRESET) || !pe.Transient() {
			t.Errorf("got %v, want a transient reset", pe)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		start := time.Now()
		_, err := NewClient(Timeouts{}).Do(req)
		if err == nil {
			t.Fatal("no error from a hanging server")
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("took %v to honour a 50ms deadline", el)
		}
		if pe := TransportError("local", err); !pe.Timeout || !afloat.IsTimeout(pe) {
			t.Errorf("got %v, want a timeout", pe)
		}
	})
}
