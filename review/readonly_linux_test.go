package review

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSQLiteRefusesReadOnlyStorage: on storage it cannot write, the store refuses to open,
// whether the database was closed cleanly or a kill -9 left its WAL beside it: it never
// opens to refuse every Enqueue later.
func TestSQLiteRefusesReadOnlyStorage(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		make func(t *testing.T, dir string)
	}{
		{"closed cleanly", func(t *testing.T, dir string) {
			s, err := OpenSQLite(ctx, filepath.Join(dir, "afloat.db"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			enqueue(t, s, modItem("acme", "a"))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "afloat.db-wal")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a clean close left a WAL: %v", err)
			}
		}},
		{"WAL left by kill -9", func(t *testing.T, dir string) {
			// The files of an open store, copied while no commit runs, are what kill -9
			// leaves: the database, and its WAL holding the commits not checkpointed.
			src := t.TempDir()
			s := openSQLite(t, filepath.Join(src, "afloat.db"), Options{})
			enqueue(t, s, modItem("acme", "a"))
			for _, f := range []string{"afloat.db", "afloat.db-wal", "afloat.db-shm"} {
				copyFile(t, filepath.Join(src, f), filepath.Join(dir, f))
			}
			if fi, err := os.Stat(filepath.Join(dir, "afloat.db-wal")); err != nil || fi.Size() == 0 {
				t.Fatalf("no WAL to recover from: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.make(t, dir)
			readOnly(t, dir)
			s, err := OpenSQLite(ctx, filepath.Join(dir, "afloat.db"), Options{})
			if err == nil {
				_, qerr := s.Enqueue(ctx, modItem("acme", "b"))
				s.Close()
				t.Fatalf("opened read-only storage (then Enqueue: %v)", qerr)
			}
			if !strings.Contains(err.Error(), "cannot write") {
				t.Errorf("error %q, want it to say the store cannot write", err)
			}
		})
	}
}

// readOnly makes dir and its files read-only until the test ends. Root ignores file modes,
// so as root it bind-mounts dir read-only on itself, and skips when it may not mount.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o444); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = os.Chmod(dir, 0o755)
			for _, e := range entries {
				_ = os.Chmod(filepath.Join(dir, e.Name()), 0o644)
			}
		})
		return
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("running as root, which ignores file modes, and cannot bind-mount %s read-only: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("running as root and cannot remount %s read-only: %v", dir, err)
	}
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		t.Fatalf("%s is still writable", dir)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
