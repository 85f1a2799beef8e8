package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
)

const newKey = "ck-initech-9b4d2f7a1e"

// reloadStatus is "config" of /admin/status.
type reloadStatus struct {
	Config struct {
		Version    string `json:"version"`
		LastReload *struct {
			OK     bool     `json:"ok"`
			Errors []string `json:"errors"`
		} `json:"last_reload"`
	} `json:"config"`
}

// TestReloadEndpoint: POST /admin/reload runs the host's Reloader behind the admin token; a
// failure answers 422 with each problem and changes nothing; a success swaps the table (a new
// task, new tenant keys) and shows in /admin/status. Without a Reloader the endpoint is 404.
func TestReloadEndpoint(t *testing.T) {
	var reload Reloader
	e := newEnv(t, func(c *Config) {
		c.Version = "v1"
		c.Reload = func(ctx context.Context) (*Reload, error) { return reload(ctx) }
	})
	if status, hdr, _ := e.do("GET", "/admin/reload", adminToken, ""); status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "POST" {
		t.Fatalf("GET /admin/reload: %d Allow %q", status, hdr.Get("Allow"))
	}
	if status, _, _ := e.do("POST", "/admin/reload", clientKey, ""); status != http.StatusUnauthorized {
		t.Fatalf("a client key reloads: %d", status)
	}

	reload = func(context.Context) (*Reload, error) {
		return nil, errors.Join(errors.New("tasks.triage.cascade[0].prompt: template: unclosed action"), errors.New("server.listen: needs a restart"))
	}
	status, _, body := e.do("POST", "/admin/reload", adminToken, "")
	var bad struct {
		Error struct {
			Code   string   `json:"code"`
			Errors []string `json:"errors"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &bad); err != nil || status != http.StatusUnprocessableEntity || bad.Error.Code != "invalid_config" || len(bad.Error.Errors) != 2 {
		t.Fatalf("a failed reload: %d %s", status, body)
	}
	_, _, body = e.do("GET", "/admin/status", adminToken, "")
	st := decode[reloadStatus](t, body)
	if st.Config.Version != "v1" || st.Config.LastReload == nil || st.Config.LastReload.OK || len(st.Config.LastReload.Errors) != 2 {
		t.Fatalf("status after a failed reload: %s", body)
	}
	if !strings.Contains(e.logs.String(), "config reload refused") {
		t.Fatalf("the failed reload was not logged:\n%s", e.logs.String())
	}

	reload = func(context.Context) (*Reload, error) {
		next, err := cascade.New(cascade.Config{Previous: e.engine, Flags: e.flags, Review: e.review, Providers: []cascade.ProviderConfig{
			{Name: "primary", Provider: e.faults["primary"], Retry: cascade.RetryConfig{Max: -1}},
			{Name: "backup", Provider: e.faults["backup"], Retry: cascade.RetryConfig{Max: -1}},
		}})
		if err != nil {
			return nil, err
		}
		tpl, err := prompt.Parse("summary/primary.v1.tmpl", "--- user\n{{.message}}")
		if err != nil {
			return nil, err
		}
		task, err := next.Task(cascade.TaskConfig{Name: "summary", Criticality: afloat.Enrichment, Schema: []byte(triageSchema),
			Cascade: []cascade.Tier{{Provider: "primary", Prompt: tpl}}})
		if err != nil {
			return nil, err
		}
		if err := e.gw.Swap(Config{Engine: next, Tasks: map[string]*cascade.Task{"summary": task}, Faults: e.faults,
			Tenants: map[string][]string{"initech": {newKey}}}); err != nil {
			return nil, err
		}
		next.TakeOver(e.engine)
		return &Reload{Version: "v2", Previous: "v1", Changes: []ReloadChange{{Path: "tasks.summary", Kind: "added"}}}, nil
	}
	status, _, body = e.do("POST", "/admin/reload", adminToken, "")
	if res := decode[Reload](t, body); status != http.StatusOK || res.Version != "v2" || len(res.Changes) != 1 {
		t.Fatalf("a reload: %d %s", status, body)
	}
	if status, _, body := e.do("POST", "/v1/tasks/summary", newKey, `{"input": {"message": "hi"}}`); status != http.StatusOK {
		t.Fatalf("the task the reload added, with the tenant it added: %d %s", status, body)
	}
	if status, _, _ := e.do("POST", "/v1/tasks/summary", clientKey, `{"input": {"message": "hi"}}`); status != http.StatusUnauthorized {
		t.Fatalf("a key the reload removed: %d", status)
	}
	if status, _, _ := e.do("POST", "/v1/tasks/triage", newKey, `{"input": {"message": "hi"}}`); status != http.StatusNotFound {
		t.Fatalf("a task the reload removed: %d", status)
	}
	_, _, body = e.do("GET", "/admin/status", adminToken, "")
	if st := decode[reloadStatus](t, body); st.Config.Version != "v2" || st.Config.LastReload == nil || !st.Config.LastReload.OK || st.Config.LastReload.Errors == nil {
		t.Fatalf("status after the reload: %s", body)
	}
	if e.gw.served().engine.Breaker("primary") != e.engine.Breaker("primary") {
		t.Fatal("the provider given again with its adapter got a new breaker")
	}

	off := newEnv(t)
	if status, _, _ := off.do("POST", "/admin/reload", adminToken, ""); status != http.StatusNotFound {
		t.Fatalf("without a Reloader: %d", status)
	}
}

// promptOf is the prompt version of an envelope.
type promptOf struct {
	PromptVersion *string `json:"prompt_version"`
}

// gated answers at once, but holds its first call until release is closed, telling entered
// when it got it.
type gated struct {
	calls   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (g *gated) Complete(ctx context.Context, _ *afloat.Request) (*afloat.Response, error) {
	if g.calls.Add(1) == 1 {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &afloat.Response{Content: triageAnswer}, nil
}

// TestSwapLeavesCallsInFlight: a call in flight when the table is swapped finishes on the
// config it started with (its prompt version), while the next call runs on the new one over
// the same provider, whose in-flight count the new engine sees. A table that fails its
// checks is refused and changes nothing.
func TestSwapLeavesCallsInFlight(t *testing.T) {
	up := &gated{entered: make(chan struct{}), release: make(chan struct{})}
	pcs := []cascade.ProviderConfig{{Name: "gate", Provider: up, Breaker: breaker.Config{Disabled: true}}}
	taskOver := func(eng *cascade.Engine, version string) *cascade.Task {
		tpl, err := prompt.Parse("triage/gate."+version+".tmpl", "--- user\n{{.message}}")
		if err != nil {
			t.Fatal(err)
		}
		task, err := eng.Task(cascade.TaskConfig{Name: "triage", Criticality: afloat.Enrichment, Budget: 10 * time.Second,
			Schema: []byte(triageSchema), Cascade: []cascade.Tier{{Provider: "gate", Prompt: tpl}}})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	old, err := cascade.New(cascade.Config{Providers: pcs})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(Config{Engine: old, Tasks: map[string]*cascade.Task{"triage": taskOver(old, "v1")}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, gw: gw, srv: httptest.NewServer(gw.Handler())}
	t.Cleanup(e.srv.Close)

	first := make(chan []byte, 1)
	go func() {
		_, _, body := e.do("POST", "/v1/tasks/triage", "", `{"input": {"message": "hi"}}`)
		first <- body
	}()
	<-up.entered
	next, err := cascade.New(cascade.Config{Providers: pcs, Previous: old})
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[string]*cascade.Task{"triage": taskOver(next, "v2")}
	if err := gw.Swap(Config{Engine: next, Tasks: tasks, Models: map[string]string{"gpt-x": "nowhere"}}); err == nil {
		t.Fatal("a table with an alias to no route was swapped in")
	}
	if _, _, body := e.do("POST", "/v1/tasks/triage", "", `{"input": {"message": "hi"}}`); !strings.Contains(string(body), "triage/gate/v1") {
		t.Fatalf("a refused swap changed the table: %s", body)
	}
	if err := gw.Swap(Config{Engine: next, Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	next.TakeOver(old)
	if n := next.InFlight("gate"); n != 1 {
		t.Fatalf("the new engine sees %d calls in flight to the provider it carried over, want 1", n)
	}
	_, _, body := e.do("POST", "/v1/tasks/triage", "", `{"input": {"message": "hi"}}`)
	if v := decode[promptOf](t, body).PromptVersion; v == nil || *v != "triage/gate/v2" {
		t.Fatalf("the call after the swap ran on prompt %v, want triage/gate/v2: %s", v, body)
	}
	close(up.release)
	body = <-first
	if v := decode[promptOf](t, body).PromptVersion; v == nil || *v != "triage/gate/v1" {
		t.Fatalf("the call in flight during the swap ran on prompt %v, want triage/gate/v1: %s", v, body)
	}
}
