package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/afloat-dev/afloat/alerts"
)

// TestStatusAlerts: /admin/status lists the alerts firing now, each with its scope, since,
// value, threshold and state; an empty list without any, and without an evaluator.
func TestStatusAlerts(t *testing.T) {
	type doc struct {
		Alerts []map[string]any `json:"alerts"`
	}
	status := func(e *env) (doc, json.RawMessage) {
		t.Helper()
		code, _, b := e.do("GET", "/admin/status", adminToken, "")
		if code != 200 {
			t.Fatalf("/admin/status %d: %s", code, b)
		}
		var raw struct {
			Alerts json.RawMessage `json:"alerts"`
		}
		_ = json.Unmarshal(b, &raw)
		return decode[doc](t, b), raw.Alerts
	}
	if _, raw := status(newEnv(t)); string(raw) != "[]" {
		t.Errorf("alerts without an evaluator: %s, want []", raw)
	}

	e := newEnv(t)
	ev, err := alerts.New(alerts.Config{Rules: []alerts.Rule{{Name: alerts.PrimaryOpen}},
		Tasks: []alerts.Task{{Name: "triage", Providers: []string{"primary", "backup"}}}, Breakers: e.engine})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	// The env's gateway again, now with the evaluator over its engine.
	cfg := e.gw.cfg
	cfg.Alerts = ev
	if e.gw, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.gw.Handler())
	defer e.srv.Close()
	ev.Evaluate(t.Context())
	if _, raw := status(e); string(raw) != "[]" {
		t.Errorf("alerts with the primary closed: %s, want []", raw)
	}
	if code, _, b := e.do("PUT", "/admin/breakers/primary", adminToken, `{"state":"open"}`); code != 200 {
		t.Fatalf("forcing the breaker open: %d %s", code, b)
	}
	ev.Evaluate(t.Context())
	d, raw := status(e)
	if len(d.Alerts) != 1 {
		t.Fatalf("alerts %s, want primary_open", raw)
	}
	a := d.Alerts[0]
	scope, _ := a["scope"].(map[string]any)
	if a["alert"] != "primary_open" || a["state"] != "firing" || a["value"] != 1.0 || a["threshold"] != 0.0 ||
		scope["task"] != "triage" || scope["provider"] != "primary" || a["since"] == nil {
		t.Errorf("alert %s", raw)
	}
}
