package main

// Redis processes of a test's own, for the tests that break Redis on purpose (kill it, pause
// it, start it again) and so may not touch the shared one of AFLOAT_REDIS_URL: a redis-server
// on a free loopback port, which a test can stop and start again on the same port, and a Redis
// Cluster of such servers. They need redis-server (and redis-cli for a cluster) on PATH;
// without them the tests skip, or fail under CI=true.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisTools returns the paths of the named Redis programs, skipping the test when one is
// missing, or failing it under CI=true.
func redisTools(t *testing.T, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not on PATH, and CI=true: the Redis failure tests must run: %v", name, err)
			}
			t.Skipf("%s is not on PATH (%v): skipping the test that runs its own Redis", name, err)
		}
		paths[i] = p
	}
	return paths
}

// redisServer is a redis-server process of one test, listening on 127.0.0.1:port, without
// persistence: a restart starts it empty, as a replacement server would. It is safe for
// concurrent use.
type redisServer struct {
	t    *testing.T
	bin  string
	port int
	args []string    // after the port, the bind and the persistence flags
	out  *syncWriter // the output of every run, for failure messages

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// startRedisServer starts a redis-server on a free loopback port with the extra flags, and
// returns once it answers PING. It is killed when the test ends.
func startRedisServer(t *testing.T, extra ...string) *redisServer {
	t.Helper()
	bin := redisTools(t, "redis-server")[0]
	dir := t.TempDir()
	var last error
	// A free port may be taken between the probe and redis-server's listen: try another.
	for range 5 {
		s := &redisServer{
			t: t, bin: bin, port: freeRedisPort(t), out: &syncWriter{},
			args: append([]string{"--dir", dir}, extra...),
		}
		if last = s.start(); last == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("redis-server would not start: %v", last)
	return nil
}

// freeRedisPort returns a loopback port that is free, and whose Redis Cluster bus port (the
// port + 10000) is free too.
func freeRedisPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(25000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return port
	}
	t.Fatal("no free loopback port for redis-server")
	return 0
}

// addr is the server's host:port.
func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// url is the server's redis:// URL, database 0.
func (s *redisServer) url() string { return "redis://" + s.addr() + "/0" }

// start runs the server on its port and waits (bounded) until it answers PING.
func (s *redisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("redis-server is already running")
	}
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	c := redis.NewClient(&redis.Options{Addr: s.addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, lastLines(s.out.String(), 5))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			s.cmd = nil
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s: %v", s.port, err)
		}
	}
}

// restart starts the server again on the same port after stop, failing the test if it cannot.
func (s *redisServer) restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// stop kills the server (SIGKILL: no goodbye to its clients beyond the kernel's) and waits
// for it to exit. Stopping a stopped server does nothing.
func (s *redisServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.t.Errorf("redis-server on port %d did not exit within 10s of SIGKILL", s.port)
	}
	s.cmd = nil
}

// client returns a client of the server for the test's own commands, closed when the test ends.
func (s *redisServer) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// startRedisCluster starts a Redis Cluster of masters servers (no replicas) and returns them
// once every node reports cluster_state:ok. Every server is killed when the test ends.
func startRedisCluster(t *testing.T, masters int) []*redisServer {
	t.Helper()
	cli := redisTools(t, "redis-server", "redis-cli")[1]
	nodes := make([]*redisServer, masters)
	addrs := make([]string, masters)
	for i := range nodes {
		conf := filepath.Join(t.TempDir(), "nodes.conf")
		nodes[i] = startRedisServer(t, "--cluster-enabled", "yes", "--cluster-config-file", conf,
			"--cluster-node-timeout", "5000")
		addrs[i] = nodes[i].addr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		c := n.client()
		deadline := time.Now().Add(10 * time.Second)
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s is not ok 10s after the cluster was created: %v\n%s", n.addr(), err, info)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nodes
}

// lastLines returns the last n lines of s, for failure messages.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// stallProxy forwards loopback connections to a Redis. stall makes every connection open at
// that moment go silent, as when a middlebox loses them: what arrives is read and dropped,
// nothing is answered, nothing is closed. Connections made after it are forwarded as before.
// It is safe for concurrent use.
type stallProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []*proxyConn
	wg    sync.WaitGroup
}

// proxyConn is one forwarded connection.
type proxyConn struct {
	client, server net.Conn
	stalled        atomic.Bool
}

// startStallProxy listens on a free loopback port and forwards to target (host:port); it
// stops, closing every connection, when the test ends.
func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.client.Close()
			_ = c.server.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// addr is the proxy's host:port.
func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.wg.Go(func() { c.pipe(c.server, c.client) })
		p.wg.Go(func() { c.pipe(c.client, c.server) })
	}
}

// pipe copies from src to dst until either fails, dropping what arrives once stalled.
func (c *proxyConn) pipe(dst, src net.Conn) {
	defer func() {
		if !c.stalled.Load() {
			_ = dst.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stall silences every connection open now.
func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.stalled.Store(true)
	}
}
