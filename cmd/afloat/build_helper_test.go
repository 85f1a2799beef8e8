package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buildAfloat builds the afloat binary into a temporary folder, with the extra go build
// flags, and returns its path. Without go on PATH it skips (fails when CI=true); with -short
// it skips, saying why the test needs the binary.
func buildAfloat(t *testing.T, why string, flags ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go is not on PATH: %v", err)
		}
		t.Skipf("go is not on PATH (%v): cannot build the binary", err)
	}
	if testing.Short() {
		t.Skip(why)
	}
	bin := filepath.Join(t.TempDir(), "afloat")
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	if out, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
