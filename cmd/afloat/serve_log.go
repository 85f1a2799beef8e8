package main

import (
	"io"
	"log/slog"

	"github.com/afloat-dev/afloat/telemetry"
)

// serveLogger is the gateway's logger: JSON lines for a log collector, or text when stderr is
// a terminal (a person reading); either way every line a request writes carries its
// request_id, and trace_id and span_id under a trace (telemetry.LogHandler).
func serveLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if isTerminal(w) {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(telemetry.LogHandler(h))
}
