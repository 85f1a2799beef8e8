// Package config reads afloat's YAML config file (shared/DESIGN.md §4) and makes it live.
//
// Load reads a file into a File: every key checked (an unknown key is an error), ${VAR}
// expanded from the environment in values (never in comments; $${ is a literal ${),
// durations read as Go durations (700ms) and sizes with their units (1MiB), the defaults
// filled in where a key was left out, relative paths resolved against the file's folder, and
// providers, tasks and routes kept in the order written, since a cascade's order is its
// meaning. Every problem is reported at once, each with its key path and line:
//
//	f, err := config.Load("afloat.yaml")
//	var errs config.Errors
//	if errors.As(err, &errs) {
//		for _, e := range errs { fmt.Println(e) } // line 41: tasks.triage.budget: invalid duration "1.5"
//	}
//
// Build turns a File into a Runtime: an adapter per provider (wrapped for fault injection),
// its breaker, timeouts, retries and bulkhead, and every task and route over them, with the
// flags, the review queue and the metrics they share. It makes no connection:
//
//	rt, err := f.Build(config.BuildOptions{Logger: logger})
//	res, err := afloat.Run[Triage](ctx, rt.Tasks["triage"], afloat.Input{"subject": s, "message": m})
//
// Check is `afloat check`: Load and Build, plus every template rendered with a sample input,
// returning every error and the warnings (a single-tier cascade, unused rules, and each key
// that Load accepts but this build does not apply yet: the write and pool timeouts of a
// provider's guards).
//
// Runtime.Reload is a config reload: the file read and checked again, and built over the
// runtime in force, which it keeps its stores, flags and unchanged providers from; Compare
// (`afloat check --diff`) says what it changes, key by key:
//
//	next, diff, err := rt.Reload("afloat.yaml", func(next *config.Runtime) error { return gw.Swap(...) })
package config
