// Command afloat is the gateway and its tools: serve, check and demo (shared/DESIGN.md §9).
// main only parses and wires; each subcommand lives in its own file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `afloat keeps AI features working when the model provider fails.

Usage:
  afloat serve -c afloat.yaml    run the gateway
  afloat check -c afloat.yaml [--offline] [--diff OLD.yaml]
                                 validate a config, its templates and schemas (--offline:
                                 placeholders for unset variables, no credentials needed;
                                 --diff: what a reload from OLD.yaml would change)
  afloat demo [--duration 60s]   an offline demo: simulated providers, an outage, a live view
  afloat prompts test -c afloat.yaml
                                 run each prompt's recorded outputs through normalization
  afloat review list|show|claim|resolve|reject|release --target URL --admin-token T
                                 work the human review queue of a running gateway
  afloat flags get|set|kill|unkill --target URL --admin-token T [--task NAME]
                                 read or change the kill switches (PATCH underneath)
  afloat drill --target URL --admin-token T --task NAME --provider NAME --mode MODE
                                 the unavailability exercise against a running gateway
  afloat version                 print the version, the VCS revision and the Go version

Run "afloat <command> -h" for a command's flags.
`

// errUsage reports bad command-line use; its text has been printed already.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks the command to stop cleanly (a drill clears its fault, serve
		// drains); a second one, while it does, ends the process at once.
		<-ctx.Done()
		stop()
	}()
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
	help := helpAsked(args[1:])
	if help {
		stderr = stdout // the usage asked for is the output, not a complaint
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
	case "flags":
		err = flagsCmd(args[1:], stdout, stderr)
	case "drill":
		err = drill(ctx, args[1:], stdout, stderr)
	case "prompts":
		err = prompts(args[1:], stdout, stderr)
	case "version", "--version":
		err = versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "afloat: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage) && help:
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

// helpAsked reports whether a command's arguments ask for its usage (-h, -help, --help)
// before a "--". A command prints its usage and returns errUsage on that as on a bad flag;
// run answers it with exit 0 and the usage on stdout.
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--h", "--help":
			return true
		}
	}
	return false
}

// parseFlags parses a command's flags and refuses a positional argument, printing the
// usage; both are errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return errUsage // the flag package printed the problem and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "afloat %s: unexpected argument %q\n\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}
