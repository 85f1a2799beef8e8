// Package otlptest is an OpenTelemetry collector for tests: an HTTP server that takes
// OTLP/HTTP trace exports (POST /v1/traces, protobuf) and keeps the spans it decoded.
//
//	rcv := otlptest.NewReceiver(t)
//	// telemetry: {otlp: {endpoint: rcv.URL()}}
//	spans := rcv.Spans()
package otlptest

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver takes trace exports. It is safe for concurrent use.
type Receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span
	exports int
	bad     []string // what was wrong with the requests that were not exports
	arrived chan struct{}
}

// Span is a received span with its service's name.
type Span struct {
	*tracepb.Span
	Service string
}

// TraceID returns the span's trace id in hex, as a traceparent writes it.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.TraceId) }

// SpanID returns the span's id in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.Span.SpanId) }

// ParentID returns the span's parent id in hex, "" for a root span.
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.ParentSpanId) }

// Attr returns the span's attribute key as text (a string as it is, an int or a bool
// formatted), and whether the span has it.
func (s Span) Attr(key string) (string, bool) {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue, true
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10), true
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue), true
		}
		return kv.Value.String(), true
	}
	return "", false
}

// NewReceiver starts a Receiver, closed when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{arrived: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base URL, for telemetry.otlp.endpoint.
func (r *Receiver) URL() string { return r.srv.URL }

// Arrived is signalled after each export.
func (r *Receiver) Arrived() <-chan struct{} { return r.arrived }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	switch {
	case req.Method != http.MethodPost || req.URL.Path != "/v1/traces":
		r.reject(w, req.Method+" "+req.URL.Path)
		return
	case req.Header.Get("Content-Type") != "application/x-protobuf":
		r.reject(w, "content type "+req.Header.Get("Content-Type"))
		return
	case err != nil || len(body) == 0:
		r.reject(w, "empty body")
		return
	}
	if err := proto.Unmarshal(body, &msg); err != nil {
		r.reject(w, "decode: "+err.Error())
		return
	}
	r.mu.Lock()
	r.exports++
	for _, rs := range msg.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, Span{Span: s, Service: service})
			}
		}
	}
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (r *Receiver) reject(w http.ResponseWriter, why string) {
	r.mu.Lock()
	r.bad = append(r.bad, why)
	r.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Rejected returns what was wrong with each request that was not a valid export.
func (r *Receiver) Rejected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}
