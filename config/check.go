package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
)

// Check validates the config file at path as `afloat check` does: everything Load and Build
// check, rendering every template with a sample input built from the task's input fields
// included, without binding a port, opening a store or calling a provider, and what serve
// refuses beside (open access off loopback). It returns every error found, as Errors, and
// warnings about a config that works but may not do what was meant: a single-tier cascade,
// heuristic rules no policy uses, keys this build does not apply.
func Check(path string) (warnings []string, err error) {
	data, dir, err := read(path)
	if err != nil {
		return nil, err
	}
	return check(data, dir, os.LookupEnv, false)
}

// CheckOffline is Check on a machine without the deployment's secrets: a ${VAR} the
// environment lacks, and that has no default, is given a placeholder (see OfflineEnv), and a
// provider's ca_file that is absent is a warning rather than an error, so that the
// structure, templates and schemas are checked without credentials. placeholders names the
// variables that were given a placeholder, sorted.
func CheckOffline(path string) (warnings, placeholders []string, err error) {
	data, dir, err := read(path)
	if err != nil {
		return nil, nil, err
	}
	env := OfflineEnv(data, os.LookupEnv)
	warnings, err = check(data, dir, env.Lookup, true)
	return warnings, env.Placeholders(), err
}

// LoadOffline is Load with OfflineEnv: a config whose unset variables are placeholders, for
// the tools that need no credentials (`afloat prompts test`). placeholders names them.
func LoadOffline(path string) (f *File, placeholders []string, err error) {
	data, dir, err := read(path)
	if err != nil {
		return nil, nil, err
	}
	env := OfflineEnv(data, os.LookupEnv)
	f, err = Parse(data, dir, env.Lookup)
	return f, env.Placeholders(), err
}

// read returns the file at path and its folder, absolute.
func read(path string) ([]byte, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	return data, dir, nil
}

// Placeholder is how the value OfflineEnv gives a variable the environment lacks begins:
// the value is Placeholder, a slash and the variable's name, a URL so that it also fits
// where a URL is expected (base_url, a webhook), and one of its own for each variable, so
// that two credentials from two unset variables are not taken for one reused (two places
// that write the same variable still share one).
const Placeholder = "http://placeholder.invalid/afloat-offline"

// placeholderOf is the value OfflineEnv gives the unset variable name.
func placeholderOf(name string) string { return Placeholder + "/" + name }

// Env is an environment for Parse that stands in for the variables the process lacks. It is
// not safe for concurrent use.
type Env struct {
	lookup func(string) (string, bool)
	bare   map[string]bool // variables the text writes as ${NAME}, without a default
	used   map[string]bool
}

// bareVar is a ${NAME} without a default.
var bareVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// OfflineEnv returns an environment for Parse of data that looks variables up with lookup
// and gives a placeholder (see Placeholder) to one it lacks that data writes without a default. A variable
// written only as ${NAME:-default} is left unset, so that its default applies as it would
// in production.
func OfflineEnv(data []byte, lookup func(string) (string, bool)) *Env {
	e := &Env{lookup: lookup, bare: map[string]bool{}, used: map[string]bool{}}
	for _, m := range bareVar.FindAllSubmatch(data, -1) {
		e.bare[string(m[1])] = true
	}
	return e
}

// Lookup is the environment to pass to Parse.
func (e *Env) Lookup(name string) (string, bool) {
	if v, ok := e.lookup(name); ok {
		return v, true
	}
	if !e.bare[name] {
		return "", false
	}
	e.used[name] = true
	return placeholderOf(name), true
}

// Placeholders returns the variables Lookup gave a placeholder, sorted.
func (e *Env) Placeholders() []string {
	out := make([]string, 0, len(e.used))
	for name := range e.used {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func check(data []byte, dir string, env func(string) (string, bool), offline bool) ([]string, error) {
	f, errs := parse(data, dir, env)
	if f == nil {
		return nil, errs.err()
	}
	var absent []string
	if offline {
		absent = absentCAFiles(f)
	}
	b := f.build(BuildOptions{})
	defer func() { _ = b.rt.Close() }() // a reload checks in a long-running process
	errs = append(errs, b.errs...)
	if host, _, err := net.SplitHostPort(f.Server.Listen); err == nil && len(f.Tenants) == 0 && !Loopback(host) {
		errs = append(errs, &Error{Path: "server.listen", Line: f.Line("server.listen"),
			Msg: fmt.Sprintf("%s is not a loopback address and there are no tenants: open access is served on loopback only (serve refuses it)", f.Server.Listen)})
	}
	return append(absent, warnings(f)...), errs.sorted().err()
}

// absentCAFiles clears the ca_file of every provider whose file does not exist, so that an
// offline check builds it with the system's roots, and returns a warning for each: the file
// is deployment material (GigaChat's is downloaded), like a credential.
func absentCAFiles(f *File) []string {
	var ws []string
	for _, p := range f.Providers {
		if p.CAFile == "" {
			continue
		}
		if _, err := os.Stat(p.CAFile); errors.Is(err, fs.ErrNotExist) {
			path := "providers." + p.Name + ".ca_file"
			ws = append(ws, fmt.Sprintf("line %d: %s: %s is absent: not checked offline", f.Line(path), path, p.CAFile))
			p.CAFile = ""
		}
	}
	return ws
}

// warnings returns what Check warns about in a loaded file, in line order.
func warnings(f *File) []string {
	type warning struct {
		line int
		msg  string
	}
	var ws []warning
	warn := func(path, format string, args ...any) {
		msg := path + ": " + fmt.Sprintf(format, args...)
		line := f.Line(path)
		if line > 0 {
			msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		ws = append(ws, warning{line, msg})
	}
	for _, t := range f.Tasks {
		path := "tasks." + t.Name
		policy := t.OnExhausted
		if policy == "" && t.Criticality != 0 {
			policy = cascade.DefaultPolicy(t.Criticality)
		}
		if len(t.Cascade) == 1 {
			warn(path, "cascade has a single tier: when its provider fails, the task goes straight to its on_exhausted policy (%s)", policy)
		}
		if len(t.Heuristic) > 0 && policy != "" && policy != cascade.PolicyHeuristic {
			warn(path+".heuristic", "rules are never used: on_exhausted is %s, not heuristic", policy)
		}
		if f.Line(path+".review_sla") > 0 && policy != "" && policy != cascade.PolicyHuman {
			warn(path+".review_sla", "has no effect: on_exhausted is %s, not human", policy)
		}
	}
	for _, t := range f.Tasks {
		if t.Cache != nil && t.Cache.AllowCritical && t.Criticality != afloat.Critical {
			warn("tasks."+t.Name+".cache.allow_critical", "has no effect: the task is not critical, and serves from its cache anyway")
		}
	}
	for _, r := range f.Routes {
		path := "routes." + r.Name
		if len(r.Cascade) == 1 {
			warn(path, "cascade has a single tier: when its provider fails, the route answers unavailable")
		}
		if r.Cache != nil && r.Cache.AllowCritical && r.Criticality != afloat.Critical {
			warn(path+".cache.allow_critical", "has no effect: the route is not critical, and serves from its cache anyway")
		}
		for i, tier := range r.Cascade {
			if p := fmt.Sprintf("%s.cascade[%d].system_mode", path, i); f.Line(p) > 0 && tier.System == "" {
				warn(p, "has no effect without system: the client's messages go unchanged")
			}
		}
	}
	for _, p := range f.Providers {
		if key := "providers." + p.Name + ".timeouts.connect"; p.Type == TypeSim && f.Line(key) > 0 {
			warn(key, "has no effect on a sim provider, which makes no connection")
		}
	}
	if f.State.Backend != "redis" {
		for _, key := range []string{"state.redis", "state.on_failure"} {
			if f.Line(key) > 0 {
				warn(key, "is not used: state.backend is %s, not redis", f.State.Backend)
			}
		}
	}
	if o := f.Telemetry.OTLP; f.Line("telemetry.otlp.endpoint") == 0 {
		for _, key := range []string{"protocol", "headers", "insecure"} {
			if f.Line("telemetry.otlp."+key) > 0 {
				warn("telemetry.otlp."+key, "has no effect without telemetry.otlp.endpoint: no traces are exported")
			}
		}
	} else if o.Insecure && (o.Protocol == "http" || strings.Contains(o.Endpoint, "://")) {
		warn("telemetry.otlp.insecure", "has no effect: the endpoint's scheme decides (http:// sends without TLS, https:// with it)")
	}
	if f.legacyMemory {
		warn("state.backend", "memory is now called local (flags and faults persist in the SQLite file beside the review queue)")
	}
	if f.Review.Store == "postgres" && f.State.Backend == "local" {
		warn("review.store", "postgres holds the review queue of the fleet, but state.backend local keeps each gateway's flags and faults in its memory, lost on restart: use state.backend redis to share them")
	} else if f.Review.Store != "postgres" && f.Line("review.postgres") > 0 {
		warn("review.postgres", "is not used: review.store is %s", f.Review.Store)
	}
	for _, p := range unapplied(f) {
		if f.Line(p) > 0 {
			warn(p, "is not applied by this build")
		}
	}
	slices.SortStableFunc(ws, func(a, b warning) int { return cmp.Compare(a.line, b.line) })
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.msg
	}
	return out
}

// unappliedKeys are keys Load accepts and this build does not apply yet, besides the guards'
// below. Each leaves this list with the work that applies it.
var unappliedKeys = []string{}

// unappliedGuards are keys of a provider's guards, under defaults and under each provider,
// that this build does not apply yet.
var unappliedGuards = []string{"timeouts.write", "timeouts.pool"}

// unapplied returns the key paths that Check warns about when the file writes them.
func unapplied(f *File) []string {
	out := slices.Clone(unappliedKeys)
	for _, key := range unappliedGuards {
		out = append(out, "defaults."+key)
		for _, pr := range f.Providers {
			out = append(out, "providers."+pr.Name+"."+key)
		}
	}
	return out
}

// templateFields returns the fields the templates read, each once.
func templateFields(templates []*prompt.Template) []string {
	var fields []string
	for _, tpl := range templates {
		if tpl != nil {
			fields = append(fields, tpl.Fields()...)
		}
	}
	slices.Sort(fields)
	return slices.Compact(fields)
}

// sampleInput builds the input a call to a task may carry: with an input schema, a value of
// each declared field's schema and nothing else (a call carrying more is not guaranteed);
// without one, a sample string for each field the templates read.
func sampleInput(declared Fields, fields []string) map[string]any {
	if len(declared) > 0 {
		in := make(map[string]any, len(declared))
		for _, fd := range declared {
			in[fd.Name] = sampleValue(fd.Name, fd.Schema)
		}
		return in
	}
	in := make(map[string]any, len(fields))
	for _, name := range fields {
		in[name] = "sample " + name
	}
	return in
}

// sampleValue returns a value that fits a simple JSON Schema: its first enum value, its
// const, or a value of its type.
func sampleValue(name string, schema map[string]any) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	typ, _ := schema["type"].(string)
	if types, ok := schema["type"].([]any); ok {
		for _, t := range types {
			if s, _ := t.(string); s != "null" {
				typ = s
				break
			}
		}
	}
	switch typ {
	case "integer":
		return 1
	case "number":
		return 1.5
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	case "null":
		return nil
	}
	return "sample " + name
}
