package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
)

// serve runs the gateway until ctx ends (SIGINT, SIGTERM), then stops accepting, lets the
// calls in flight finish within the grace period and closes the review store. SIGHUP and
// POST /admin/reload reload the config file without a restart (reload.go).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "afloat.yaml", "the config file")
	listen := fs.String("listen", "", "address to listen on, replacing server.listen")
	grace := fs.Duration("grace", 30*time.Second, "how long calls in flight may take to finish on shutdown")
	logLevel := fs.String("log-level", "", "the least severe level logged: debug, info, warn or error, replacing server.log_level")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: afloat serve -c afloat.yaml [-listen 127.0.0.1:8080] [-grace 30s] [-log-level info]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "afloat serve: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if *logLevel != "" {
		if _, err := config.ParseLogLevel(*logLevel); err != nil {
			fmt.Fprintf(stderr, "afloat serve: -log-level: %v\n", err)
			return errUsage
		}
	}
	f, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "%s:\n%v\n", *path, err)
		return errFailed
	}
	if *logLevel == "" {
		*logLevel = f.Server.LogLevel
	}
	level, err := config.ParseLogLevel(*logLevel)
	if err != nil {
		return err // Load checked server.log_level
	}
	log := serveLogger(stderr, level)
	addr := f.Server.Listen
	if *listen != "" {
		addr = *listen
	}
	tenants := map[string][]string{}
	for _, t := range f.Tenants {
		tenants[t.Name] = t.Keys
	}
	if len(tenants) == 0 && !loopback(addr) {
		fmt.Fprintf(stderr, "afloat serve: refusing to listen on %s without tenants: with no client keys anyone who reaches the port can call the models on your bill; configure tenants or listen on 127.0.0.1\n", addr)
		return errFailed
	}
	rt, err := f.Build(config.BuildOptions{Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "%s:\n%v\n", *path, err)
		return errFailed
	}
	// The reloader holds the runtime in force from here on: POST /admin/reload and SIGHUP
	// replace it (reload.go).
	rl := &reloader{path: *path, addr: addr, rt: rt}
	gw, err := gateway.New(gatewayConfig(rt, log, rl.reload))
	if err != nil {
		_ = rt.Close()
		return err
	}
	rl.gw = gw
	stopHangup := watchHangup(gw, log)
	defer stopHangup()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var debug *http.Server
	if f.Server.DebugListen != "" {
		dln, err := net.Listen("tcp", f.Server.DebugListen)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("server.debug_listen: %w", err)
		}
		debug = &http.Server{Handler: debugHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := debug.Serve(dln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("debug listener stopped", "err", err)
			}
		}()
		log.Info("profiler listening", "addr", dln.Addr().String(), "path", "/debug/pprof/")
	}
	// ReadTimeout bounds reading a request (a body trickled in byte by byte holds no
	// goroutine forever); there is no WriteTimeout, since a streamed answer may take as long
	// as its route's budget.
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("afloat listening", "addr", ln.Addr().String(), "tasks", rt.TaskOrder, "routes", rt.RouteOrder,
		"providers", rt.ProviderOrder, "admin_api", f.Server.AdminToken != "", "tenants", len(tenants), "config", f.Version())
	fmt.Fprintf(stdout, "afloat listening on http://%s\n", ln.Addr())

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: no new connections, waiting for calls in flight", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if debug != nil {
		// A profile in progress is not worth waiting for.
		_ = debug.Close()
	}
	err = srv.Shutdown(sctx)
	if err != nil {
		// The grace period is over: cut what is left rather than hang.
		log.Warn("grace period over: closing the connections still open", "err", err)
		_ = srv.Close()
	}
	stopHangup() // no reload after this: the runtime in force closes
	if cerr := rl.close(); cerr != nil {
		log.Error("closing the runtime (trace exporter, state, review store)", "err", cerr)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// loopback reports whether addr listens on the loopback interface only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && config.Loopback(host)
}

// debugHandler serves the Go profiler of net/http/pprof on a mux of its own (never
// http.DefaultServeMux, where importing the package registers it for any server that uses
// the default mux).
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
