package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/afloat-dev/afloat/config"
)

// check validates a config file, its templates, schemas and heuristic rules, and prints
// every problem; it fails when there is any.
func check(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "afloat.yaml", "the config file to check")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: afloat check -c afloat.yaml\n\nValidates the config, renders every prompt template with a sample input, compiles the\nschemas and checks the heuristic rules. Prints every error and exits 1 when there is any.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "afloat check: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	warnings, err := config.Check(*path)
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
