package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version replaces the module version when set at build time with
// -ldflags "-X main.version=v1.2.3" (a release build from a tarball has no VCS stamp).
var version string

// versionCmd prints what the binary was built from: the module version, the VCS revision
// and whether the tree had uncommitted changes, the commit time and the Go toolchain. go
// build stamps these; `go run` and `go test` binaries may lack the VCS settings, and what
// is missing is left out.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: afloat version\n\nPrints the module version, the VCS revision it was built from (marked dirty when the\ntree had uncommitted changes), the commit time and the Go version.")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprint(stdout, versionText(bi))
	return nil
}

// versionText renders bi; a nil bi (a binary built without module support) gives what the
// runtime knows.
func versionText(bi *debug.BuildInfo) string {
	v, goVersion := version, runtime.Version()
	var revision, modified, at string
	if bi != nil {
		if v == "" {
			v = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			case "vcs.time":
				at = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	out := "afloat " + v + "\n"
	if revision != "" {
		if modified == "true" {
			revision += " (dirty)"
		}
		out += "  revision " + revision + "\n"
	}
	if at != "" {
		out += "  time     " + at + "\n"
	}
	return out + "  go       " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
}
