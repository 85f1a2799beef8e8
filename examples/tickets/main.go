package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/afloat-dev/afloat/provider/sim"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tickets:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8081", "address to listen on")
	upstream := flag.String("upstream", "", "base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama); empty uses a simulated model")
	model := flag.String("model", "", "model name for -upstream")
	budget := flag.Duration("budget", 1500*time.Millisecond, "triage budget per ticket, every retry and fallback included")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var pc cascade.ProviderConfig
	if *upstream != "" {
		c, err := openai.New(openai.Config{Name: "primary", BaseURL: *upstream, Model: *model, APIKey: afloat.Secret(os.Getenv("TICKETS_API_KEY"))})
		if err != nil {
			return err
		}
		pc = cascade.ProviderConfig{Name: "primary", Provider: c}
	} else {
		p, err := sim.New(sim.Config{Name: "primary", P50: 300 * time.Millisecond, P95: 700 * time.Millisecond, ErrorRate: 0.01})
		if err != nil {
			return err
		}
		pc = cascade.ProviderConfig{Name: "primary", Provider: p}
	}

	reg := prometheus.NewRegistry()
	metrics, err := telemetry.New(reg)
	if err != nil {
		return err
	}
	svc, err := NewService(Config{
		Providers: []cascade.ProviderConfig{pc}, Budget: *budget, Logger: log,
		Engine: cascade.Config{Metrics: metrics},
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	tickets := svc.Handler()
	mux.Handle("/tickets", tickets)
	mux.Handle("/tickets/", tickets)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("tickets listening", "addr", *listen)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
