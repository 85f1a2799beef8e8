package config

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/internal/otlptest"
)

// TestTelemetryOTLPKeys: telemetry.otlp's keys are read and checked, its protocol defaults
// to http, and each invalid value is an error at its key.
func TestTelemetryOTLPKeys(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		f := mustParse(t, "telemetry:\n  otlp: {endpoint: \"http://127.0.0.1:4318\", headers: {Authorization: \"Bearer t0ken-value\"}}\n"+minimal)
		o := f.Telemetry.OTLP
		if o.Protocol != "http" || o.Endpoint != "http://127.0.0.1:4318" || o.Headers["Authorization"].Reveal() != "Bearer t0ken-value" || o.Insecure {
			t.Errorf("otlp %+v: want protocol http and the endpoint and header as written", o)
		}
		if s := fmt.Sprintf("%v %+v", o.Headers, o); strings.Contains(s, "t0ken-value") {
			t.Errorf("a header value printed: %s", s)
		}
	})
	for _, tc := range []struct {
		name, otlp string
		path, msg  string // "" path: valid
	}{
		{"grpc host port", `{endpoint: "collector:4317", protocol: grpc, insecure: true}`, "", ""},
		{"grpc url", `{endpoint: "https://collector:4317", protocol: grpc}`, "", ""},
		{"off", `{endpoint: ""}`, "", ""},
		{"unknown protocol", `{endpoint: "http://c:4318", protocol: thrift}`, "telemetry.otlp.protocol", "unknown protocol"},
		{"http needs a url", `{endpoint: "collector:4318"}`, "telemetry.otlp.endpoint", "invalid URL"},
		{"grpc garbage", `{endpoint: "not a host", protocol: grpc}`, "telemetry.otlp.endpoint", "invalid endpoint"},
		{"https insecure", `{endpoint: "https://c:4318", insecure: true}`, "telemetry.otlp.insecure", "contradicts"},
		{"header newline", `{endpoint: "http://c:4318", headers: {"X-K": "a\nb"}}`, "telemetry.otlp.headers", "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("telemetry:\n  otlp: "+tc.otlp+"\n"+minimal), "/cfg", noEnv)
			if tc.path == "" {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				return
			}
			if e := findError(asErrors(t, err), tc.path, tc.msg); e == nil {
				t.Fatalf("errors %v: want %s: %s", err, tc.path, tc.msg)
			}
		})
	}
}

// TestCheckAppliesTelemetryOTLP: check no longer warns that telemetry.otlp is not applied,
// and builds no exporter (it never connects).
func TestCheckAppliesTelemetryOTLP(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	dir := writeTree(t, map[string]string{
		"afloat.yaml": "telemetry:\n  otlp: {endpoint: \"" + rcv.URL() + "\"}\n" + minimal, "triage.json": triageSchema,
		"prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	warnings, err := Check(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if strings.Contains(w, "telemetry") {
			t.Errorf("warning %q", w)
		}
	}
	if spans := rcv.Spans(); len(spans) != 0 {
		t.Errorf("check exported %d spans", len(spans))
	}
}

// TestBuildExportsTraces: Build with telemetry.otlp exports each call's spans over
// OTLP/HTTP, as service afloat with the providers' gen_ai.system, and Close flushes them.
func TestBuildExportsTraces(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	dir := writeTree(t, map[string]string{
		"afloat.yaml": "telemetry:\n  otlp: {endpoint: \"" + rcv.URL() + "\"}\nreview: {sqlite: {path: afloat.db}}\n" + minimal,
		"triage.json": triageSchema, "prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	f, err := Load(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Tasks["triage"].RunJSON(context.Background(), afloat.Input{"subject": "s", "message": "m"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	byName := map[string]otlptest.Span{}
	for _, s := range rcv.Spans() {
		byName[s.Name] = s
	}
	call, ok := byName["afloat.task triage"]
	attempt, ok2 := byName["afloat.attempt primary"]
	if !ok || !ok2 {
		t.Fatalf("spans %v (rejected %v): want the call's and the primary's attempt", byName, rcv.Rejected())
	}
	if call.Service != "afloat" || attempt.ParentID() != call.SpanID() {
		t.Errorf("service %q, attempt parent %s, call %s", call.Service, attempt.ParentID(), call.SpanID())
	}
	if sys, _ := attempt.Attr("gen_ai.system"); sys != "sim" {
		t.Errorf("gen_ai.system %q, want sim", sys)
	}
}

// TestBuildGRPCExporter: a grpc collector is not dialled by Build (the exporter connects on
// its first export), so a collector that is down delays nothing; Close stops the exporter.
func TestBuildGRPCExporter(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"afloat.yaml": "telemetry:\n  otlp: {endpoint: \"127.0.0.1:1\", protocol: grpc, insecure: true}\nreview: {sqlite: {path: afloat.db}}\n" + minimal,
		"triage.json": triageSchema, "prompts/primary.v1.tmpl": triagePrompt, "prompts/backup.v1.tmpl": triagePrompt,
	})
	f, err := Load(filepath.Join(dir, "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rt.tracer == nil {
		t.Fatal("no tracer provider built for telemetry.otlp")
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}
