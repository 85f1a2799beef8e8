package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/afloat-dev/afloat/config"
)

const checkUsage = `Usage: afloat check -c afloat.yaml [--offline] [--diff OLD.yaml]

Validates the config, renders every prompt template with a sample of its task's input fields,
compiles the schemas and checks the heuristic rules. Prints every error and exits 1 when there
is any.

With --offline, a ${VAR} the environment lacks (and that has no default) is given a placeholder
instead of being an error, so that a config is checked without the deployment's credentials
(in CI, on a laptop); check names the variables it gave placeholders.

With --diff, check also prints what a reload from OLD.yaml (the config in force) to this
file would change, one key a line: + added, - removed, ~ changed (with the old and new value
where it is no secret, a prompt's version, "content" for a schema or prompt edited in place),
! a key a reload does not apply. It exits 1 when a reload would refuse this file: when it is
invalid, or changes a key that takes a restart. Both versions are printed: /admin/status
shows the one a gateway serves ("config": {"version"}).

Flags:
`

// check validates a config file, its templates, schemas and heuristic rules, and prints
// every problem; it fails when there is any.
func check(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "afloat.yaml", "the config file to check")
	offline := fs.Bool("offline", false, "give unset environment variables a placeholder instead of failing on them")
	diffFrom := fs.String("diff", "", "the config in force: print what a reload from it to this file would change")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var (
		warnings, placeholders []string
		err                    error
	)
	if *offline {
		warnings, placeholders, err = config.CheckOffline(*path)
	} else {
		warnings, err = config.Check(*path)
	}
	if len(placeholders) > 0 {
		fmt.Fprintf(stdout, "%s: offline: placeholders for %s\n", *path, strings.Join(placeholders, ", "))
	}
	for _, w := range warnings {
		fmt.Fprintf(stdout, "%s: warning: %s\n", *path, w)
	}
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintf(stderr, "%s: %v\n", *path, e)
			}
			fmt.Fprintf(stderr, "%s: %d error(s)\n", *path, len(errs))
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", *path, err)
		}
		return errFailed
	}
	fmt.Fprintf(stdout, "%s: ok\n", *path)
	if *diffFrom != "" {
		return printDiff(*diffFrom, *path, *offline, stdout, stderr)
	}
	return nil
}

// printDiff prints what a reload from the config at from to the one at to would change; it
// fails when a reload would refuse to.
func printDiff(from, to string, offline bool, stdout, stderr io.Writer) error {
	load := config.Load
	if offline {
		load = func(p string) (*config.File, error) {
			f, _, err := config.LoadOffline(p)
			return f, err
		}
	}
	old, err := load(from)
	if err != nil {
		fmt.Fprintf(stderr, "%s:\n%v\n", from, err)
		return errFailed
	}
	next, err := load(to)
	if err != nil {
		fmt.Fprintf(stderr, "%s:\n%v\n", to, err)
		return errFailed
	}
	d := config.Compare(old, next)
	fmt.Fprintf(stdout, "diff %s (%s) → %s (%s):\n%s", from, d.From, to, d.To, d)
	if n := len(d.Restart()); n > 0 {
		fmt.Fprintf(stderr, "%s: %d change(s) take a restart: a reload would refuse this file\n", to, n)
		return errFailed
	}
	return nil
}
