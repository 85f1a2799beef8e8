package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URL returns AFLOAT_POSTGRES_URL. When it is unset the test is skipped, or failed under
// CI=true, where the PostgreSQL tests must run.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("AFLOAT_POSTGRES_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("AFLOAT_POSTGRES_URL is not set, and CI=true: the PostgreSQL integration tests must run")
		}
		t.Skip("AFLOAT_POSTGRES_URL is not set: skipping the PostgreSQL integration test")
	}
	return u
}

// Schema creates a schema with a random name in the database of AFLOAT_POSTGRES_URL, drops it
// (and every table in it) when the test ends, and returns the URL with that schema as its
// search_path: what a store opens there is the test's alone.
func Schema(t testing.TB) string {
	t.Helper()
	base := URL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "afloat_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("postgres at AFLOAT_POSTGRES_URL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithParam(t, base, "search_path", schema)
}

// WithParam returns the connection string u (a URL or a key=value DSN) with the parameter
// name set to value.
func WithParam(t testing.TB, u, name, value string) string {
	t.Helper()
	if !strings.Contains(u, "://") {
		return u + " " + name + "=" + value
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("AFLOAT_POSTGRES_URL: %v", err)
	}
	q := pu.Query()
	q.Set(name, value)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// HostPort returns the host:port of the connection string u.
func HostPort(t testing.TB, u string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatalf("postgres url: %v", err)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// Proxy forwards TCP connections from a loopback port to a PostgreSQL server; Cut stops it
// as a server that went down would (open connections reset, new ones refused) and Restore
// takes connections again on the same port. It is safe for concurrent use.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// NewProxy starts a proxy to target (host:port), stopped when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// URL returns u with the proxy as its host and port.
func (p *Proxy) URL(u string) string {
	p.t.Helper()
	host, port, _ := net.SplitHostPort(p.addr)
	if !strings.Contains(u, "://") {
		return u + " host=" + host + " port=" + port
	}
	pu, err := url.Parse(u)
	if err != nil {
		p.t.Fatal(err)
	}
	pu.Host = p.addr
	return pu.String()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialing
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut closes the listener and every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as from a server that is gone
		}
		_ = c.Close()
	}
}

// Restore listens on the proxy's port again.
func (p *Proxy) Restore() {
	p.t.Helper()
	var (
		ln  net.Listener
		err error
	)
	for range 50 { // the port was just closed: a connection of it may hold it a moment
		if ln, err = net.Listen("tcp", p.addr); !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
