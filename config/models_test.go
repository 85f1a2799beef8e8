package config

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// routesOnly is a file of two routes over sim providers, the second of which the cases
// complete (its models and the server block come from the case).
const routesOnly = `providers:
  primary: {type: sim}
  backup: {type: sim}
routes:
  support-agent:
    criticality: assistance
    cascade: [primary, backup]
    models: [gpt-4o-mini, gpt-4o]
  drafts:
    criticality: enrichment
    cascade: [backup]
`

// TestRouteModels: each route's aliases map to it, and the default route is kept.
func TestRouteModels(t *testing.T) {
	text := "server:\n  default_route: drafts\n" + routesOnly + "    models: [claude-sonnet-4-5]\n"
	f := mustParse(t, text)
	if got := f.Route("support-agent").Models; strings.Join(got, ",") != "gpt-4o-mini,gpt-4o" {
		t.Errorf("support-agent models %v", got)
	}
	if f.Server.DefaultRoute != "drafts" {
		t.Errorf("default_route %q", f.Server.DefaultRoute)
	}
	rt := buildTree(t, text, nil)
	want := map[string]string{"gpt-4o-mini": "support-agent", "gpt-4o": "support-agent", "claude-sonnet-4-5": "drafts"}
	if !maps.Equal(rt.Models, want) {
		t.Errorf("Runtime.Models %v, want %v", rt.Models, want)
	}
}

// TestRouteModelsErrors: a model name must lead to one route, and the default route must be
// one. An alias listed twice is reported where it is listed again, naming where it was
// listed first and that line.
func TestRouteModelsErrors(t *testing.T) {
	firstLine := strings.Count(routesOnly[:strings.Index(routesOnly, "models:")], "\n") + 1
	tests := []struct {
		name string
		text string
		path string
		msg  string
	}{
		{
			name: "alias listed by two routes",
			text: routesOnly + "    models: [claude-3-haiku, gpt-4o]   # here\n",
			path: "routes.drafts.models[1]",
			msg:  fmt.Sprintf(`"gpt-4o" is already listed at routes.support-agent.models[1] (line %d)`, firstLine),
		},
		{
			name: "alias listed twice by one route",
			text: routesOnly + "    models: [m-1, m-1]   # here\n",
			path: "routes.drafts.models[1]",
			msg:  "is already listed at routes.drafts.models[0]",
		},
		{
			name: "alias is another route's name",
			text: routesOnly + "    models: [support-agent]   # here\n",
			path: "routes.drafts.models[0]",
			msg:  fmt.Sprintf(`"support-agent" is the name of route "support-agent" (line %d)`, firstLine-3),
		},
		{
			name: "alias is the route's own name",
			text: routesOnly + "    models: [drafts]   # here\n",
			path: "routes.drafts.models[0]",
			msg:  "the route's own name",
		},
		{
			name: "alias with a space",
			text: routesOnly + "    models: [\"gpt 4\"]   # here\n",
			path: "routes.drafts.models[0]",
			msg:  "invalid model name",
		},
		{
			name: "default route unknown",
			text: "server:\n  default_route: support   # here\n" + routesOnly,
			path: "server.default_route",
			msg:  `names no route "support" (routes: support-agent, drafts)`,
		},
		{
			name: "models not a list",
			text: routesOnly + "    models: gpt-4o   # here\n",
			path: "routes.drafts.models",
			msg:  "want a list",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text), "/cfg", noEnv)
			if err == nil {
				t.Fatal("parsed without error")
			}
			errs := asErrors(t, err)
			e := findError(errs, tc.path, tc.msg)
			if e == nil {
				t.Fatalf("no error at %s saying %q; got:\n%v", tc.path, tc.msg, err)
			}
			if want := markedLine(t, tc.text); e.Line != want {
				t.Errorf("error %q on line %d, want %d", e, e.Line, want)
			}
		})
	}
}
