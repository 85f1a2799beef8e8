// Package gateway serves afloat over HTTP (shared/DESIGN.md §6): the typed task API
// (POST /v1/tasks/{task}), an OpenAI-compatible chat endpoint over routes
// (POST /v1/chat/completions, streaming included), Anthropic's Messages API over the same
// routes (POST /v1/messages), the routes and their aliases (GET /v1/models), review status
// for callers, the admin API (status, flags, breakers, faults, config reload), /metrics,
// /healthz and /readyz.
//
// Every request gets an id (X-Request-Id: the caller's when valid, else generated) that
// its response, its task envelope and its log lines carry, and its W3C trace context is
// continued by the calls' spans.
//
// It is the only place that maps errors to HTTP statuses. Build it from a configured
// runtime and serve its Handler:
//
//	gw, err := gateway.New(gateway.Config{Tasks: rt.Tasks, Routes: rt.Routes, Engine: rt.Engine, ...})
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: gw.Handler()}
package gateway
