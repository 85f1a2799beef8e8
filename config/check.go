package config

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
)

// Check validates the config file at path as `afloat check` does: everything Load and Build
// check (without binding a port or calling a provider), then it renders every template with a
// sample input built from the task's input fields. It returns every error found, as Errors,
// and warnings about a config that works but may not do what was meant: a single-tier
// cascade, heuristic rules no policy uses, keys this build does not apply.
func Check(path string) (warnings []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return check(data, dir, os.LookupEnv)
}

func check(data []byte, dir string, env func(string) (string, bool)) ([]string, error) {
	f, errs := parse(data, dir, env)
	if f == nil {
		return nil, errs.err()
	}
	b := f.build(BuildOptions{})
	errs = append(errs, b.errs...)
	if f.Review.Store == "postgres" {
		errs = append(errs, &Error{Path: "review.store", Line: f.Line("review.store"), Msg: "postgres is not available in this build: use sqlite"})
	}
	for _, t := range f.Tasks {
		templates := b.prompts[t.Name]
		in := sampleInput(t.Input, templateFields(templates))
		for i, tpl := range templates {
			if tpl == nil {
				continue
			}
			if _, err := tpl.Render(in); err != nil {
				p := fmt.Sprintf("tasks.%s.cascade[%d].prompt", t.Name, i)
				errs = append(errs, &Error{Path: p, Line: f.Line(p), Msg: fmt.Sprintf("rendering with a sample input: %v", err)})
			}
		}
	}
	return warnings(f), errs.sorted().err()
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
	for _, r := range f.Routes {
		if len(r.Cascade) == 1 {
			warn("routes."+r.Name, "cascade has a single tier: when its provider fails, the route answers unavailable")
		}
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
// and the alerts' below. Each leaves this list with the work that applies it.
var unappliedKeys = []string{
	"state.redis",       // the redis state backend (state.backend redis is an error)
	"state.on_failure",  // the redis state backend
	"review.postgres",   // the postgres review store (review.store postgres is an error)
	"review.webhook",    // review webhooks
	"flags.openfeature", // the OpenFeature flag provider
	"telemetry.otlp",    // trace export
	"drill.max_age",     // drills, with afloat_drill_age_seconds
}

// unappliedGuards are keys of a provider's guards, under defaults and under each provider,
// that this build does not apply yet.
var unappliedGuards = []string{"breaker.ramp_up", "timeouts.write", "timeouts.pool"}

// unapplied returns the key paths that Check warns about when the file writes them.
func unapplied(f *File) []string {
	out := slices.Clone(unappliedKeys)
	for _, key := range unappliedGuards {
		out = append(out, "defaults."+key)
		for _, pr := range f.Providers {
			out = append(out, "providers."+pr.Name+"."+key)
		}
	}
	// Every alert: nothing evaluates alerts yet (afloat_alerts_firing comes with that work).
	_, alerts := fieldsOf(reflect.TypeFor[Alerts]())
	for _, a := range alerts {
		out = append(out, "alerts."+a)
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

// sampleInput builds an input with every field a task reads: a value of the field's declared
// schema, or a sample string.
func sampleInput(declared Fields, fields []string) map[string]any {
	in := make(map[string]any, len(fields))
	for _, name := range fields {
		in[name] = "sample " + name
	}
	for _, fd := range declared {
		in[fd.Name] = sampleValue(fd.Name, fd.Schema)
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
