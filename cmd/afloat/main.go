// Command afloat is the gateway and its tools: serve, check and demo (shared/DESIGN.md §9).
// main only parses and wires; each subcommand lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `afloat keeps AI features working when the model provider fails.

Usage:
  afloat serve -c afloat.yaml    run the gateway
  afloat check -c afloat.yaml    validate a config, its templates and schemas
  afloat demo [--duration 60s]   an offline demo: simulated providers, an outage, a live view
  afloat prompts test -c afloat.yaml
                                 run each prompt's recorded outputs through normalization
  afloat review list|show|claim|resolve|reject --target URL --admin-token T
                                 work the human review queue of a running gateway
  afloat version                 print the version

Run "afloat <command> -h" for a command's flags.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// errUsage reports bad command-line use; its text has been printed already.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command and returns the process's exit code: 0 on success, 1 on a
// failure (an invalid config, a failed check), 2 on bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stdout, stderr)
	case "check":
		err = check(args[1:], stdout, stderr)
	case "demo":
		err = demo(ctx, args[1:], stdout, stderr)
	case "review":
		err = reviewCmd(args[1:], stdout, stderr)
	case "prompts":
		err = prompts(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "afloat", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "afloat: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errFailed):
		return 1
	default:
		fmt.Fprintln(stderr, "afloat:", err)
		return 1
	}
}

// errFailed is a command that failed and has said why already.
var errFailed = errors.New("failed")
