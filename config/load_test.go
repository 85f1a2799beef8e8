package config

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// TestParseErrors: each class of error names its key path and the line marked "# here".
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		env  map[string]string
		path string
		msg  string
	}{
		{
			name: "unknown top-level key",
			text: "servr:          # here\n  listen: x\n" + minimal,
			path: "servr", msg: `unknown key "servr"`,
		},
		{
			name: "unknown nested key",
			text: minimal + "    budgett: 1s    # here\n",
			path: "tasks.triage.budgett", msg: `unknown key "budgett"`,
		},
		{
			name: "bad duration",
			text: minimal + "    budget: 1.5    # here\n",
			path: "tasks.triage.budget", msg: `invalid duration "1.5"`,
		},
		{
			name: "bad size",
			text: "server:\n  max_body: 1 parsec   # here\n" + minimal,
			path: "server.max_body", msg: `invalid size "1 parsec"`,
		},
		{
			name: "missing environment variable",
			text: "server:\n  admin_token: ${AFLOAT_NOPE}   # here\n" + minimal,
			path: "server.admin_token", msg: "environment variable AFLOAT_NOPE is not set",
		},
		{
			name: "unterminated variable",
			text: "server:\n  admin_token: \"${AFLOAT_NOPE\"   # here\n" + minimal,
			path: "server.admin_token", msg: "unterminated ${",
		},
		{
			name: "missing criticality",
			text: "providers:\n  p: {type: sim}\ntasks:\n  triage:    # here\n    schema: s.json\n    cascade: [{provider: p, prompt: p.v1.tmpl}]\n",
			path: "tasks.triage.criticality", msg: "explicit decision",
		},
		{
			name: "route without criticality",
			text: minimal + "routes:\n  chat:   # here\n    cascade: [primary]\n",
			path: "routes.chat.criticality", msg: "explicit decision",
		},
		{
			name: "unknown criticality",
			text: strings.Replace(minimal, "criticality: enrichment", "criticality: optional   # here", 1),
			path: "tasks.triage.criticality", msg: `unknown criticality "optional"`,
		},
		{
			name: "critical task with heuristic policy",
			text: strings.Replace(minimal, "criticality: enrichment", "criticality: critical\n    on_exhausted: heuristic   # here", 1),
			path: "tasks.triage.on_exhausted", msg: "security bypass",
		},
		{
			name: "critical task with unavailable policy",
			text: strings.Replace(minimal, "criticality: enrichment", "criticality: critical\n    on_exhausted: unavailable   # here", 1),
			path: "tasks.triage.on_exhausted", msg: "a critical task must fail closed",
		},
		{
			name: "unknown policy",
			text: minimal + "    on_exhausted: shrug   # here\n",
			path: "tasks.triage.on_exhausted", msg: `unknown on_exhausted policy "shrug"`,
		},
		{
			name: "unknown provider in a task cascade",
			text: minimal + "      - {provider: nope, prompt: x.v1.tmpl}   # here\n",
			path: "tasks.triage.cascade[2].provider", msg: `unknown provider "nope" (want one of primary, backup)`,
		},
		{
			name: "unknown provider in a route cascade",
			text: minimal + "routes:\n  chat:\n    criticality: assistance\n    cascade: [primary, nope]   # here\n",
			path: "routes.chat.cascade[1].provider", msg: `unknown provider "nope"`,
		},
		{
			name: "unknown provider type",
			text: strings.Replace(minimal, "backup: {type: sim}", "backup: {type: watson}   # here", 1),
			path: "providers.backup.type", msg: `unknown provider type "watson"`,
		},
		{
			name: "missing provider type",
			text: strings.Replace(minimal, "backup: {type: sim}", "backup: {seed: 3}   # here", 1),
			path: "providers.backup.type", msg: "required",
		},
		{
			name: "key of another provider type",
			text: strings.Replace(minimal, "backup: {type: sim}", "backup:\n    type: openai\n    model: m\n    latency: {p50: 1s}   # here", 1),
			path: "providers.backup.latency", msg: "does not apply to provider type openai",
		},
		{
			name: "openai without model",
			text: strings.Replace(minimal, "backup: {type: sim}", "backup: {type: openai}   # here", 1),
			path: "providers.backup.model", msg: "required for provider type openai",
		},
		{
			name: "duplicate key",
			text: minimal + "    budget: 1s\n    budget: 2s   # here\n",
			path: "tasks.triage.budget", msg: `duplicate key "budget"`,
		},
		{
			name: "retry budget ratio out of range",
			text: "defaults:\n  retry: {budget_ratio: 2}   # here\n" + minimal,
			path: "defaults.retry.budget_ratio", msg: "outside [0, 1]",
		},
		{
			name: "listen port out of range",
			text: "server: {listen: \"127.0.0.1:99999\"}   # here\n" + minimal,
			path: "server.listen", msg: `invalid port "99999"`,
		},
		{
			name: "a name that reads as another's key",
			text: strings.Replace(minimal, "  backup: {type: sim}\n", "  backup: {type: sim}\n  primary.breaker: {type: sim, breaker: {enabled: false}}   # here\n", 1),
			path: "providers.primary.breaker", msg: `provider name "primary.breaker" reads as provider primary's key breaker`,
		},
		{
			name: "negative retry budget floor",
			text: "defaults:\n  retry: {budget_floor: -1}   # here\n" + minimal,
			path: "defaults.retry.budget_floor", msg: "at least 0",
		},
		{
			name: "unknown access log",
			text: "server:\n  access_log: sometimes   # here\n" + minimal,
			path: "server.access_log", msg: "want on, errors or off",
		},
		{
			name: "operator named admin",
			text: minimal + "operators:\n  admin: {token: t}   # here\n",
			path: "operators.admin", msg: "admin token's own",
		},
		{
			name: "negative retry max",
			text: strings.Replace(minimal, "backup: {type: sim}", "backup: {type: sim, retry: {max: -1}}   # here", 1),
			path: "providers.backup.retry.max", msg: "at least 0",
		},
		{
			name: "zero max_in_flight",
			text: "defaults:\n  max_in_flight: 0   # here\n" + minimal,
			path: "defaults.max_in_flight", msg: "at least 1",
		},
		{
			name: "not an integer",
			text: "defaults:\n  max_in_flight: many   # here\n" + minimal,
			path: "defaults.max_in_flight", msg: `invalid integer "many"`,
		},
		{
			name: "a list where an object goes",
			text: "server: [a, b]   # here\n" + minimal,
			path: "server", msg: "not a list",
		},
		{
			name: "route system mode",
			text: minimal + "routes:\n  chat:\n    criticality: assistance\n    cascade:\n      - {provider: primary, system_mode: append}   # here\n",
			path: "routes.chat.cascade[0].system_mode", msg: `unknown system_mode "append"`,
		},
		{
			name: "route named like a task",
			text: minimal + "routes:\n  triage:   # here\n    criticality: assistance\n    cascade: [primary]\n",
			path: "routes.triage", msg: "already a task's",
		},
		{
			name: "heuristic rule that is both",
			text: minimal + "    heuristic:\n      - {when_any: [x], set: {a: 1}, default: {a: 2}}   # here\n",
			path: "tasks.triage.heuristic[0]", msg: "either a default or when_any",
		},
		{
			name: "heuristic rule without words",
			text: minimal + "    heuristic:\n      - {set: {a: 1}}   # here\n",
			path: "tasks.triage.heuristic[0].when_any", msg: "at least one word",
		},
		{
			name: "input field that is not a schema",
			text: minimal + "    input: {subject: string}   # here\n",
			path: "tasks.triage.input.subject", msg: "JSON Schema object",
		},
		{
			name: "rollout out of range",
			text: minimal + "    rollout_pct: 150   # here\n",
			path: "tasks.triage.rollout_pct", msg: "outside 0–100",
		},
		{
			name: "redis backend without url",
			text: "state:\n  backend: redis   # here\n" + minimal,
			path: "state.redis.url", msg: "required with state.backend redis",
		},
		{
			name: "redis prefix moving the hash slot",
			text: "state:\n  backend: redis\n  redis: {url: \"redis://127.0.0.1:6379/0\", prefix: \"a{b}:\"}   # here\n" + minimal,
			path: "state.redis.prefix", msg: "may not hold '{' or '}'",
		},
		{
			name: "openfeature without endpoint",
			text: "flags:\n  openfeature: {provider: ofrep}   # here\n" + minimal,
			path: "flags.openfeature.endpoint", msg: "required with provider ofrep",
		},
		{
			name: "openfeature unknown provider",
			text: "flags:\n  openfeature: {provider: launchdarkly, endpoint: \"http://127.0.0.1:1\"}   # here\n" + minimal,
			path: "flags.openfeature.provider", msg: "want ofrep or flagd",
		},
		{
			name: "unknown on_failure",
			text: "state:\n  on_failure: crash   # here\n" + minimal,
			path: "state.on_failure", msg: "want local or fail",
		},
		{
			name: "unknown alias",
			text: "server:\n  listen: *nowhere   # here\n" + minimal,
			path: "server.listen", msg: "unknown alias",
		},
		{
			name: "invalid provider name",
			text: strings.Replace(minimal, "backup: {type: sim}", "back/up: {type: sim}   # here", 1),
			path: "providers.back/up", msg: "invalid provider name",
		},
		{
			name: "debug listener on every interface",
			text: "server:\n  debug_listen: 0.0.0.0:6060   # here\n" + minimal,
			path: "server.debug_listen", msg: "not a loopback address",
		},
		{
			name: "debug listener without a host",
			text: "server:\n  debug_listen: \":6060\"   # here\n" + minimal,
			path: "server.debug_listen", msg: "not a loopback address",
		},
		{
			name: "debug listener without a port",
			text: "server:\n  debug_listen: 127.0.0.1   # here\n" + minimal,
			path: "server.debug_listen", msg: "want host:port",
		},
		{
			name: "unknown log level",
			text: "server:\n  log_level: verbose   # here\n" + minimal,
			path: "server.log_level", msg: `unknown log level "verbose" (want debug, info, warn or error)`,
		},
		{
			name: "short admin token",
			text: "server:\n  admin_token: \" \"   # here\n" + minimal,
			path: "server.admin_token", msg: "too short: 1 bytes, want at least 16 (generate one with `openssl rand -hex 16`)",
		},
		{
			name: "short operator token",
			text: minimal + "operators:\n  ana: {token: hunter2}   # here\n",
			path: "operators.ana.token", msg: "too short",
		},
		{
			name: "tenant key equal to the admin token",
			text: "server: {admin_token: adm-0123456789abcdef}\ntenants:\n  acme: {keys: [adm-0123456789abcdef]}   # here\n" + minimal,
			path: "tenants.acme.keys[0]", msg: "is also the admin token",
		},
		{
			name: "operator token equal to the admin token",
			text: "server: {admin_token: adm-0123456789abcdef}\n" + minimal + "operators:\n  ana: {token: adm-0123456789abcdef}   # here\n",
			path: "operators.ana.token", msg: "is also the admin token",
		},
		{
			name: "two operators with one token",
			text: minimal + "operators:\n  ana: {token: op-0123456789abcdef}\n  bob: {token: op-0123456789abcdef}   # here\n",
			path: "operators.bob.token", msg: "is also operator ana's token",
		},
		{
			name: "tenant key equal to an operator token",
			text: minimal + "operators:\n  ana: {token: op-0123456789abcdef}\ntenants:\n  acme: {keys: [op-0123456789abcdef]}   # here\n",
			path: "tenants.acme.keys[0]", msg: "is also operator ana's token",
		},
		{
			name: "two tenants with one key",
			text: "tenants:\n  acme: {keys: [k-1]}\n  beta: {keys: [k-2, k-1]}   # here\n" + minimal,
			path: "tenants.beta.keys[1]", msg: "is also a key of tenant acme",
		},
		{
			name: "tenant key padded with white space",
			text: "tenants:\n  acme: {keys: [\" k-1\"]}   # here\n" + minimal,
			path: "tenants.acme.keys[0]", msg: "white space",
		},
		{
			name: "empty tenant key",
			text: "tenants:\n  acme: {keys: [\"${EMPTY}\"]}   # here\n" + minimal,
			env:  map[string]string{"EMPTY": ""},
			path: "tenants.acme.keys[0]", msg: "key is empty",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text), "/cfg", envOf(tc.env))
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
			if !strings.Contains(e.Error(), tc.path) {
				t.Errorf("error text %q does not name %s", e.Error(), tc.path)
			}
		})
	}
}

// TestDottedNames: a dot in a name that begins none of the object's keys is no collision,
// and each provider keeps its own keys.
func TestDottedNames(t *testing.T) {
	text := strings.Replace(minimal, "  backup: {type: sim}\n", "  backup: {type: sim}\n  primary.v2: {type: sim, breaker: {enabled: false}}\n", 1)
	f, err := Parse([]byte(text), "/cfg", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Provider("primary").Breaker.Enabled || f.Provider("primary.v2").Breaker.Enabled {
		t.Errorf("breaker enabled: primary %v, primary.v2 %v; want true and false",
			f.Provider("primary").Breaker.Enabled, f.Provider("primary.v2").Breaker.Enabled)
	}
}

// TestSyntaxError: text that is not YAML is one error with its line.
func TestSyntaxError(t *testing.T) {
	tests := []struct {
		name string
		text string
		line int
	}{
		{"unclosed flow sequence", "providers:\n  p: {type: sim}\nx: [1, 2\ny: 3\n", 4},
		{"two documents", minimal + "---\nserver: {}\n", 13},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text), "", noEnv)
			errs := asErrors(t, err)
			if len(errs) != 1 || errs[0].Line != tc.line {
				t.Fatalf("errors %v, want one on line %d", errs, tc.line)
			}
		})
	}
}

// TestParseCollectsEveryError: one parse reports every problem, in the order of their lines.
func TestParseCollectsEveryError(t *testing.T) {
	text := `
server:
  listen: 127.0.0.1:8080
  colour: blue
providers:
  primary: {type: sim, latency: {p50: fast}}
tasks:
  triage:
    schema: s.json
    budget: soon
    cascade: [{provider: ghost, prompt: x.v1.tmpl}]
`
	_, err := Parse([]byte(text), "", noEnv)
	errs := asErrors(t, err)
	want := []struct {
		path string
		line int
	}{
		{"server.colour", 4},
		{"providers.primary.latency.p50", 6},
		{"tasks.triage.criticality", 8},
		{"tasks.triage.budget", 10},
		{"tasks.triage.cascade[0].provider", 11},
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if errs[i].Path != w.path || errs[i].Line != w.line {
			t.Errorf("error %d is %q, want %s on line %d", i, errs[i], w.path, w.line)
		}
	}
	if n := strings.Count(err.Error(), "\n"); n != len(want)-1 {
		t.Errorf("Error() has %d line breaks, want one error per line:\n%v", n, err)
	}
}

// TestEnvExpansion: ${VAR} expands in values of every type, never in comments or keys; $${
// is a literal.
func TestEnvExpansion(t *testing.T) {
	env := envOf(map[string]string{
		"TOKEN": "s3cret-0123456789abcdef", "BOB_TOKEN": "bob-0123456789abcdef", "ACME_KEY": "k-acme", "N": "12", "HOST": "10.0.0.1", "PORT": "9090",
		"RATE": "0.25", "OFF": "false", "WAIT": "45s",
	})
	text := `
# a comment may say ${NOPE} without harm
server:
  listen: ${HOST}:${PORT}           # ${NOPE} in a trailing comment
  admin_token: ${TOKEN}
operators:
  ana: {token: "${UNSET_OP:-fallback-op-0123456789}"}
  bob: {token: "${BOB_TOKEN:-unused}"}
tenants:
  acme: {keys: ["${ACME_KEY}", "literal-$${NOT_A_VAR}"]}
defaults:
  max_in_flight: ${N}
  breaker: {enabled: "${OFF}", failure_rate: "${RATE}", recovery: "${WAIT}"}   # quoted: { } are flow syntax
` + minimal
	f, err := Parse([]byte(text), "", env)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"listen", f.Server.Listen, "10.0.0.1:9090"},
		{"admin_token", f.Server.AdminToken, "s3cret-0123456789abcdef"},
		{"default of an unset variable", f.Operators[0].Token, "fallback-op-0123456789"},
		{"default of a set variable", f.Operators[1].Token, "bob-0123456789abcdef"},
		{"key in a flow list", f.Tenants[0].Keys[0], "k-acme"},
		{"escaped", f.Tenants[0].Keys[1], "literal-${NOT_A_VAR}"},
		{"integer", f.Defaults.MaxInFlight, 12},
		{"bool", f.Defaults.Breaker.Enabled, false},
		{"float", f.Defaults.Breaker.FailureRate, 0.25},
		{"duration", f.Defaults.Breaker.Recovery, 45 * time.Second},
		{"inherited by a provider", f.Providers[0].Breaker.Recovery, 45 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// TestEnvMissingLines: each unset variable is reported on its own line, a block scalar's
// included.
func TestEnvMissingLines(t *testing.T) {
	text := minimal + `routes:
  chat:
    criticality: assistance
    cascade:
      - provider: primary
        system: |
          You help customers.
          Signed: ${SIGNATURE}
`
	_, err := Parse([]byte(text), "", noEnv)
	errs := asErrors(t, err)
	e := findError(errs, "routes.chat.cascade[0].system", "environment variable SIGNATURE is not set")
	if e == nil {
		t.Fatalf("no error for SIGNATURE: %v", err)
	}
	if want := strings.Count(text[:strings.Index(text, "Signed")], "\n") + 1; e.Line != want {
		t.Errorf("line %d, want %d", e.Line, want)
	}
	if len(errs) != 1 {
		t.Errorf("%d errors, want 1: %v", len(errs), err)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"1MiB", 1 << 20, ""},
		{"512KiB", 512 << 10, ""},
		{"10MB", 10_000_000, ""},
		{"2GiB", 2 << 30, ""},
		{"1kb", 1000, ""},
		{"1024", 1024, ""},
		{"64B", 64, ""},
		{"1 MiB", 1 << 20, ""},
		{"0", 0, ""},
		{"1.5MiB", 0, "invalid size"},
		{"MiB", 0, "invalid size"},
		{"ten", 0, "invalid size"},
		{"", 0, "invalid size"},
		{"-1KiB", 0, "negative"},
		{"9999999999GiB", 0, "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseSize(%q) = %d, %v; want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestSizeInFile(t *testing.T) {
	tests := []struct {
		value string
		want  Size
	}{
		{"512KiB", 512 << 10},
		{"10MB", 10_000_000},
		{"2048", 2048},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			f := mustParse(t, "server: {max_body: "+tc.value+"}\n"+minimal)
			if f.Server.MaxBody != tc.want {
				t.Errorf("max_body %d, want %d", f.Server.MaxBody, tc.want)
			}
		})
	}
}

// TestRelativePaths: schema, prompt, ca_file and the SQLite path are read from the config
// file's folder unless absolute.
func TestRelativePaths(t *testing.T) {
	text := `
review:
  sqlite: {path: data/queue.db}
providers:
  primary: {type: sim}
  local: {type: openai, model: m, ca_file: certs/ca.pem}
tasks:
  triage:
    criticality: enrichment
    schema: schemas/triage.json
    cascade:
      - {provider: primary, prompt: prompts/triage/primary.v1.tmpl}
      - {provider: local, prompt: /abs/local.v1.tmpl}
`
	f, err := Parse([]byte(text), "/etc/afloat", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"schema", f.Tasks[0].Schema, "/etc/afloat/schemas/triage.json"},
		{"prompt", f.Tasks[0].Cascade[0].Prompt, "/etc/afloat/prompts/triage/primary.v1.tmpl"},
		{"absolute prompt", f.Tasks[0].Cascade[1].Prompt, "/abs/local.v1.tmpl"},
		{"ca_file", f.Provider("local").CAFile, "/etc/afloat/certs/ca.pem"},
		{"sqlite", f.Review.SQLite.Path, "/etc/afloat/data/queue.db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

// TestLoadResolvesAgainstFileFolder: Load takes the folder from the file's path.
func TestLoadResolvesAgainstFileFolder(t *testing.T) {
	dir := writeTree(t, map[string]string{"conf/afloat.yaml": minimal})
	f, err := Load(filepath.Join(dir, "conf", "afloat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "conf", "triage.json"); f.Tasks[0].Schema != want {
		t.Errorf("schema %q, want %q", f.Tasks[0].Schema, want)
	}
	if want := filepath.Join(dir, "conf", "afloat.db"); f.Review.SQLite.Path != want {
		t.Errorf("default sqlite path %q, want %q", f.Review.SQLite.Path, want)
	}
}

// TestOrderPreserved: providers, tasks, routes, tiers and input fields keep the file's order.
func TestOrderPreserved(t *testing.T) {
	text := `
providers:
  zeta: {type: sim}
  alpha: {type: sim}
  mu: {type: sim}
tasks:
  second:
    criticality: assistance
    schema: s.json
    input: {message: {type: string}, subject: {type: string}, account: {type: integer}}
    cascade:
      - {provider: mu, prompt: a.v1.tmpl}
      - {provider: zeta, prompt: b.v1.tmpl}
      - {provider: alpha, prompt: c.v1.tmpl}
  first:
    criticality: assistance
    schema: s.json
    cascade: [{provider: alpha, prompt: c.v1.tmpl}]
routes:
  z-route: {criticality: assistance, cascade: [alpha, zeta]}
  a-route: {criticality: assistance, cascade: [zeta, alpha]}
`
	f := mustParse(t, text)
	var providers, tasks, routes, tiers []string
	for _, p := range f.Providers {
		providers = append(providers, p.Name)
	}
	for _, tk := range f.Tasks {
		tasks = append(tasks, tk.Name)
	}
	for _, r := range f.Routes {
		routes = append(routes, r.Name)
	}
	for _, tr := range f.Tasks[0].Cascade {
		tiers = append(tiers, tr.Provider)
	}
	tests := []struct {
		name      string
		got, want []string
	}{
		{"providers", providers, []string{"zeta", "alpha", "mu"}},
		{"tasks", tasks, []string{"second", "first"}},
		{"routes", routes, []string{"z-route", "a-route"}},
		{"tiers", tiers, []string{"mu", "zeta", "alpha"}},
		{"input fields", f.Tasks[0].Input.Names(), []string{"message", "subject", "account"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// TestDefaults: left-out keys take DESIGN.md §4's values; the defaults block overrides them
// and a provider overrides the defaults block, key by key.
func TestDefaults(t *testing.T) {
	text := `
defaults:
  breaker: {window: 10s}
  timeouts: {min: 300ms}
  retry: {max: 2}
  reask: {max: 0}
  max_in_flight: 32
providers:
  primary:
    type: sim
    breaker: {enabled: false, recovery: 1m}
    timeouts: {max: 4s}
    retry: {max: 0}
    max_in_flight: 8
  backup: {type: sim}
tasks:
  triage:
    criticality: enrichment
    schema: triage.json
    cascade:
      - {provider: primary, prompt: prompts/primary.v1.tmpl}
      - {provider: backup, prompt: prompts/backup.v1.tmpl}
  moderation:
    criticality: critical
    schema: m.json
    reask: {max: 3}
    cascade: [{provider: primary, prompt: m.v1.tmpl}]
routes:
  chat: {criticality: assistance, cascade: [backup]}
`
	f, err := Parse([]byte(text), "/cfg", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	primary, backup := f.Provider("primary"), f.Provider("backup")
	triage, moderation, chat := f.Task("triage"), f.Task("moderation"), f.Route("chat")
	tests := []struct {
		name      string
		got, want any
	}{
		{"listen", f.Server.Listen, "127.0.0.1:8080"},
		{"max_body", f.Server.MaxBody, Size(1 << 20)},
		{"state backend", f.State.Backend, "local"},
		{"review store", f.Review.Store, "sqlite"},
		{"sqlite path", f.Review.SQLite.Path, "/cfg/afloat.db"},
		{"drill max age", f.Drill.MaxAge, 2160 * time.Hour},
		{"builtin consecutive failures", f.Defaults.Breaker.ConsecutiveFailures, 5},
		{"builtin recovery", f.Defaults.Breaker.Recovery, 10 * time.Second},
		{"builtin percentile", f.Defaults.Timeouts.Percentile, 0.95},
		{"builtin connect", f.Defaults.Timeouts.Connect, time.Second},
		{"builtin budget ratio", f.Defaults.Retry.BudgetRatio, 0.2},
		{"defaults window", f.Defaults.Breaker.Window, 10 * time.Second},
		{"backup inherits window", backup.Breaker.Window, 10 * time.Second},
		{"backup inherits enabled", backup.Breaker.Enabled, true},
		{"backup inherits min", backup.Timeouts.Min, 300 * time.Millisecond},
		{"backup inherits builtin max", backup.Timeouts.Max, 10 * time.Second},
		{"backup inherits retry", backup.Retry.Max, 2},
		{"backup inherits in-flight", backup.MaxInFlight, 32},
		{"primary disables breaker", primary.Breaker.Enabled, false},
		{"primary recovery", primary.Breaker.Recovery, time.Minute},
		{"primary still inherits window", primary.Breaker.Window, 10 * time.Second},
		{"primary max", primary.Timeouts.Max, 4 * time.Second},
		{"primary still inherits min", primary.Timeouts.Min, 300 * time.Millisecond},
		{"primary no retries", primary.Retry.Max, 0},
		{"primary in-flight", primary.MaxInFlight, 8},
		{"task budget", triage.Budget, 10 * time.Second},
		{"task review sla", triage.ReviewSLA, 30 * time.Minute},
		{"task rollout", triage.RolloutPct, 100},
		{"task inherits reask", triage.Reask.Max, 0},
		{"task reask override", moderation.Reask.Max, 3},
		{"task policy left to the criticality", moderation.OnExhausted, cascade.Policy("")},
		{"task criticality", moderation.Criticality, afloat.Critical},
		{"route budget", chat.Budget, 30 * time.Second},
		{"route rollout", chat.RolloutPct, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// TestRouteCascadeForms: a route tier is a provider name or an object.
func TestRouteCascadeForms(t *testing.T) {
	temp := 0.3
	tests := []struct {
		name string
		text string
		want []RouteTier
	}{
		{
			name: "strings",
			text: "cascade: [primary, backup]",
			want: []RouteTier{{Provider: "primary"}, {Provider: "backup"}},
		},
		{
			name: "objects",
			text: "cascade:\n      - {provider: primary, system: 'Be brief. {{.system}}', system_mode: prepend, max_tokens: 300, temperature: 0.3}\n      - {provider: backup}",
			want: []RouteTier{
				{Provider: "primary", System: "Be brief. {{.system}}", SystemMode: cascade.SystemPrepend, MaxTokens: 300, Temperature: &temp},
				{Provider: "backup"},
			},
		},
		{
			name: "mixed",
			text: "cascade:\n      - primary\n      - provider: backup\n        max_tokens: 50",
			want: []RouteTier{{Provider: "primary"}, {Provider: "backup", MaxTokens: 50}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, minimal+"routes:\n  chat:\n    criticality: assistance\n    "+tc.text+"\n")
			got := f.Route("chat").Cascade
			if len(got) != len(tc.want) {
				t.Fatalf("tiers %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Provider != w.Provider || g.System != w.System || g.SystemMode != w.SystemMode || g.MaxTokens != w.MaxTokens ||
					(g.Temperature == nil) != (w.Temperature == nil) || (g.Temperature != nil && *g.Temperature != *w.Temperature) {
					t.Errorf("tier %d is %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestTaskKeys: a task's input, synonyms and heuristic rules decode with their values.
func TestTaskKeys(t *testing.T) {
	f := mustParse(t, minimal+`    input: {subject: {type: string, maxLength: 200}}
    synonyms: {department: [категория, dept]}
    heuristic:
      - {when_any: ["не работает", "fora do ar"], set: {is_urgent: 0.8, urgency_score: 2}}
      - {default: {is_urgent: 0.2, urgency_score: 0.5, department: null}}
`)
	tk := f.Task("triage")
	if got := tk.Input[0].Schema["maxLength"]; got != int64(200) {
		t.Errorf("input maxLength %v (%T), want 200", got, got)
	}
	if got := tk.Synonyms["department"]; !slices.Equal(got, []string{"категория", "dept"}) {
		t.Errorf("synonyms %v", got)
	}
	if got := tk.Heuristic[0].WhenAny; !slices.Equal(got, []string{"не работает", "fora do ar"}) {
		t.Errorf("when_any %v", got)
	}
	if got := tk.Heuristic[0].Set["is_urgent"]; got != 0.8 {
		t.Errorf("set is_urgent %v", got)
	}
	def := tk.Heuristic[1].Default
	if v, ok := def["department"]; !ok || v != nil {
		t.Errorf("default department %v (present %v), want a null that is present", v, ok)
	}
}

// TestAnchorsAndMerge: anchors, aliases and merge keys work, and a file's own key wins over
// a merged one.
func TestAnchorsAndMerge(t *testing.T) {
	text := `
x-sim: &sim {type: sim, latency: {p50: 100ms, p95: 300ms}}
providers:
  primary: {<<: *sim, seed: 3}
  backup:
    <<: *sim
    latency: {p50: 1s, p95: 2s}
tasks:
  triage:
    criticality: enrichment
    schema: s.json
    cascade: [{provider: primary, prompt: p.v1.tmpl}]
`
	_, err := Parse([]byte(text), "", noEnv)
	// x-sim is not a key of the file: anchors live on known keys only.
	if findError(asErrors(t, err), "x-sim", "unknown key") == nil {
		t.Fatalf("want an unknown key error for x-sim, got %v", err)
	}
	text = strings.Replace(text, "x-sim: &sim {type: sim, latency: {p50: 100ms, p95: 300ms}}\nproviders:\n  primary: {<<: *sim, seed: 3}",
		"providers:\n  primary: &sim {type: sim, latency: {p50: 100ms, p95: 300ms}, seed: 3}", 1)
	f := mustParse(t, text)
	if p := f.Provider("backup"); p.Type != "sim" || p.Latency.P50 != time.Second || p.Seed != 3 {
		t.Errorf("merged backup %+v", p)
	}
}

// TestAliasBomb: aliases that expand to millions of values are refused, quickly.
func TestAliasBomb(t *testing.T) {
	text := minimal + `    heuristic:
      - default:
          a: &a [x, x, x, x, x, x, x, x, x, x]
          b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
          c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
          d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
          e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
          f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
          g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
          h: [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
`
	_, err := Parse([]byte(text), "", noEnv)
	errs := asErrors(t, err)
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "expands to more than") {
		t.Fatalf("errors %v, want one about the expansion", err)
	}
}

// TestEnvFlowStyle: an unquoted ${VAR} means in a flow mapping or list what it means in block
// style, though { } [ ] and , are flow syntax there; an unset one is still reported on its
// line, and a key is still never expanded.
func TestEnvFlowStyle(t *testing.T) {
	env := envOf(map[string]string{"ACME_KEY": "k-acme", "N": "7", "OFF": "false", "HOST": "10.0.0.1"})
	text := `
tenants: {acme: {keys: [${ACME_KEY}, pre-${ACME_KEY}-post]}, beta: {keys: ["${ACME_KEY}-b"]}}
server: {listen: ${HOST}:8080, max_body: ${SIZE:-2MiB}}
defaults: {max_in_flight: ${N}, breaker: {enabled: ${OFF}}}
operators: {ana: {token: ${X:-a,b}-0123456789abcdef}}
` + minimal
	f, err := Parse([]byte(text), "", env)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"plain in a flow list", f.Tenants[0].Keys[0], "k-acme"},
		{"inside a plain scalar", f.Tenants[0].Keys[1], "pre-k-acme-post"},
		{"quoted", f.Tenants[1].Keys[0], "k-acme-b"},
		{"before a colon", f.Server.Listen, "10.0.0.1:8080"},
		{"default", f.Server.MaxBody, Size(2 << 20)},
		{"integer", f.Defaults.MaxInFlight, 7},
		{"bool", f.Defaults.Breaker.Enabled, false},
		{"default holding a comma", f.Operators[0].Token, "a,b-0123456789abcdef"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}

	missing := "tenants: {acme: {keys: [${NOPE}]}}   # here\n" + minimal
	_, err = Parse([]byte(missing), "", noEnv)
	errs := asErrors(t, err)
	e := findError(errs, "tenants.acme.keys[0]", "environment variable NOPE is not set")
	if e == nil {
		t.Fatalf("no error for NOPE: %v", err)
	}
	if want := markedLine(t, missing); e.Line != want {
		t.Errorf("line %d, want %d", e.Line, want)
	}

	keyed := "routes: {chat: {criticality: assistance, cascade: [primary], ${NOPE}: 1}}\n" + minimal
	_, err = Parse([]byte(keyed), "", noEnv)
	if e := findError(asErrors(t, err), "routes.chat.${NOPE}", "unknown key \"${NOPE}\""); e == nil {
		t.Errorf("a key was expanded or mangled: %v", err)
	}
}

// TestServerOperations: server.log_level and server.debug_listen take what they name, and
// leaving them out means info and no profiler.
func TestServerOperations(t *testing.T) {
	f := mustParse(t, minimal)
	if f.Server.LogLevel != "info" || f.Server.DebugListen != "" {
		t.Errorf("defaults: log_level %q, debug_listen %q; want info and none", f.Server.LogLevel, f.Server.DebugListen)
	}
	for _, addr := range []string{"127.0.0.1:6060", "localhost:0", "[::1]:6060", "127.0.0.2:6060"} {
		f := mustParse(t, "server: {debug_listen: \""+addr+"\", log_level: debug}\n"+minimal)
		if f.Server.DebugListen != addr || f.Server.LogLevel != "debug" {
			t.Errorf("%s: got %+v", addr, f.Server)
		}
	}
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := ParseLogLevel(in); err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLogLevel("INFO"); err == nil {
		t.Error("ParseLogLevel took INFO: the file and the flag write levels in lower case")
	}
}
