package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/afloat-dev/afloat/config"
)

const checkUsage = `Usage: afloat check -c afloat.yaml [--offline]

Validates the config, renders every prompt template with a sample of its task's input fields,
compiles the schemas and checks the heuristic rules. Prints every error and exits 1 when there
is any.

With --offline, a ${VAR} the environment lacks (and that has no default) is given a placeholder
instead of being an error, so that a config is checked without the deployment's credentials
(in CI, on a laptop); check names the variables it gave placeholders.

Flags:
`

// check validates a config file, its templates, schemas and heuristic rules, and prints
// every problem; it fails when there is any.
func check(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "afloat.yaml", "the config file to check")
	offline := fs.Bool("offline", false, "give unset environment variables a placeholder instead of failing on them")
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
	return nil
}
